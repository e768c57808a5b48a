"""Forms of the researchers' revision pages."""

from __future__ import annotations

from django import forms

from annotate.revision.models import Study
from annotate.revision.selectors import rerate_sent_count, study_annotators


class AnnotatorChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj) -> str:
        done = obj.study_sessions
        return f"{obj.username} ({done} session{'' if done == 1 else 's'} in this study)"


class RerateForm(forms.Form):
    """A seeded random sample of finished turns, sent to the chosen annotators (paper §5)."""

    size = forms.IntegerField(
        min_value=1, label="Turns to re-rate", help_text="The paper re-rated 65 turns."
    )
    annotators = AnnotatorChoiceField(
        queryset=None,
        widget=forms.CheckboxSelectMultiple,
        help_text="Each turn goes to one of them, never to the annotator of its own session.",
    )
    seed = forms.IntegerField(
        min_value=0, initial=0, help_text="The same seed draws the same turns."
    )
    # How many turns the study had sent when the page was shown: a second post of the same
    # page (a double click, a stale tab) finds more and is refused, as the session page's step.
    sent_before = forms.IntegerField(min_value=0, required=False, widget=forms.HiddenInput)

    def __init__(self, *args, study: Study, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["annotators"].queryset = study_annotators(study=study)
        self.fields["sent_before"].initial = rerate_sent_count(study=study)
