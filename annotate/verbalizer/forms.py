from django import forms

from annotate.engine.forms import SpendingCapField, endpoint_cost_label
from annotate.verbalizer.models import Group, Mode, TaskFamily
from annotate.verbalizer.services.imports import FORMATS


class DatasetForm(forms.Form):
    name = forms.CharField(max_length=100)
    family = forms.ChoiceField(choices=TaskFamily.choices)
    positive_name = forms.CharField(max_length=50, label="Golden name of the positive label")
    negative_name = forms.CharField(max_length=50, label="Golden name of the negative label")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class ItemsForm(forms.Form):
    """Items for a dataset listed above: a file as `manage.py import_classification` reads it."""

    dataset = forms.ChoiceField()
    format = forms.ChoiceField(
        choices=[(f, f) for f in FORMATS],
        help_text="GLUE's dev.tsv of SST-2, RTE, MRPC or QQP; or CSV (text, label, optional "
        "text_b, id) or JSON Lines with the same fields, labels named as the dataset's golden "
        "labels.",
    )
    # An empty file goes to the importer, whose refusal names it (refused_upload), as on the
    # other upload pages: the field's own error said only "The submitted file is empty.".
    upload = forms.FileField(label="File", allow_empty_file=True)

    def __init__(self, *args, datasets, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["dataset"].choices = [(d, d) for d in datasets]


class SetForm(forms.Form):
    """An evaluation set, as `manage.py verbalizer_set` makes one: the same items per dataset
    (seeded sample), each under every mapping chosen, in each mode."""

    name = forms.CharField(max_length=200)
    datasets = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple)
    items = forms.IntegerField(
        min_value=1, max_value=1_000_000, initial=100, label="Items per dataset"
    )
    seed = forms.IntegerField(min_value=0, max_value=2**32 - 1, initial=1)
    modes = forms.MultipleChoiceField(
        choices=Mode.choices, initial=[Mode.DIRECT], widget=forms.CheckboxSelectMultiple
    )

    def __init__(self, *args, datasets, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["datasets"].choices = [(d, d) for d in datasets]


class MappingForm(forms.Form):
    group = forms.ChoiceField(choices=Group.choices)
    positive_word = forms.CharField(max_length=50, label="Word for the positive label")
    negative_word = forms.CharField(max_length=50, label="Word for the negative label")


class StudyForm(forms.Form):
    name = forms.CharField(max_length=200)
    datasets = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    mappings = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    modes = forms.MultipleChoiceField(
        choices=Mode.choices, initial=[Mode.DIRECT], widget=forms.CheckboxSelectMultiple
    )
    items_per_dataset = forms.IntegerField(
        min_value=1,
        required=False,
        help_text="The first N of the set's sampled items of each dataset. Blank: all of them.",
    )
    answers_per_prompt = forms.IntegerField(min_value=1, max_value=50, initial=3)
    completion_code = forms.CharField(
        max_length=100,
        required=False,
        help_text="Self-hosted link: shown to a participant who has answered every prompt left "
        "for them (e.g. Prolific's completion code).",
    )
    completion_url = forms.URLField(
        required=False,
        assume_scheme="https",
        help_text="Self-hosted link: where such a participant is sent instead.",
    )

    def __init__(self, *args, evaluation_set, **kwargs):
        """Offer only what the set holds: its datasets, mappings and modes."""
        super().__init__(*args, **kwargs)
        self.fields["datasets"].choices = [
            (d.name, d.name) for d in evaluation_set.datasets.order_by("name")
        ]
        self.fields["mappings"].choices = [
            (m.name, f"{m.name} ({m.get_group_display().lower()})")
            for m in evaluation_set.mappings.all()
        ]
        modes = [m for m in Mode.values if m in evaluation_set.modes]
        self.fields["modes"].choices = [(m, Mode(m).label) for m in modes]
        self.fields["modes"].initial = [Mode.DIRECT] if Mode.DIRECT in modes else modes[:1]


class RunForm(forms.Form):
    system = forms.CharField(max_length=200, help_text="The name the figures show.")
    endpoint = forms.ChoiceField()
    modes = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple)
    model_size_b = forms.FloatField(
        required=False, min_value=0, label="Model size (billions)", help_text="Orders figures."
    )
    spending_cap_usd = SpendingCapField()

    def __init__(self, *args, evaluation_set, endpoints, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["endpoint"].choices = [
            (e.name, f"{e.name} ({endpoint_cost_label(e)})") for e in endpoints
        ]
        self.fields["modes"].choices = [(m, Mode(m).label) for m in evaluation_set.modes]
        self.fields["modes"].initial = list(evaluation_set.modes)
