"""Forms of the researchers' revision pages."""

from __future__ import annotations

from django import forms

from annotate.revision.models import Study
from annotate.revision.selectors import (
    rerate_candidates_count,
    rerate_left_per_annotator,
    rerate_sent_count,
    study_annotators,
)


class AnnotatorChoiceField(forms.ModelMultipleChoiceField):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # {annotator id: turns left that they alone may re-rate}, set by the form.
        self.left_alone: dict[int, int] = {}

    def label_from_instance(self, obj) -> str:
        done = obj.study_sessions
        sessions = f"{done} session{'' if done == 1 else 's'} in this study"
        if obj.pk not in self.left_alone:
            return f"{obj.username} ({sessions})"
        return f"{obj.username} ({sessions}; alone may re-rate {self.left_alone[obj.pk]})"


class RerateForm(forms.Form):
    """A seeded random sample of finished turns, sent to the chosen annotators (paper §5)."""

    size = forms.IntegerField(
        min_value=1, label="Turns to re-rate", help_text="The paper re-rated 65 turns."
    )
    annotators = AnnotatorChoiceField(
        queryset=None,
        widget=forms.CheckboxSelectMultiple,
        help_text="Each turn goes to one of them, never to the annotator of its own session: "
        "one annotator alone may re-rate the turns left but those of their own sessions (the "
        "count beside each name), two or more every turn left.",
    )
    seed = forms.IntegerField(
        min_value=0, initial=0, help_text="The same seed draws the same turns."
    )
    # How many turns the study had sent when the page was shown: a second post of the same
    # page (a double click, a stale tab) finds more and is refused, as the session page's step.
    sent_before = forms.IntegerField(min_value=0, required=False, widget=forms.HiddenInput)

    def __init__(self, *args, study: Study, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.study = study
        annotators = study_annotators(study=study)
        self.fields["annotators"].queryset = annotators
        self.offered = list(annotators)
        self.fields["annotators"].left_alone = rerate_left_per_annotator(
            study=study, annotators=self.offered
        )
        self.fields["sent_before"].initial = rerate_sent_count(study=study)

    def left_alone_by_id(self) -> dict[str, tuple[str, int]]:
        """{annotator id: (username, turns left they alone may re-rate)}, for the page's script
        that counts those eligible for the annotators ticked."""
        left_alone = self.fields["annotators"].left_alone
        return {str(user.pk): (user.username, left_alone[user.pk]) for user in self.offered}

    def eligible_for_chosen(self) -> tuple[list[str], int] | None:
        """(the chosen annotators' usernames, how many turns left they may re-rate), once the
        form was sent with valid annotators; None before."""
        chosen = getattr(self, "cleaned_data", {}).get("annotators")
        if not chosen:
            return None
        names = [annotator.username for annotator in chosen]
        if len(chosen) == 1:
            return names, self.fields["annotators"].left_alone[chosen[0].pk]
        return names, rerate_candidates_count(study=self.study)
