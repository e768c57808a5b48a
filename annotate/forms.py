"""Forms of the researcher and admin pages. They parse input; services decide what is allowed."""

from __future__ import annotations

import json

from django import forms
from django.contrib.auth.models import User

from annotate.models import Benchmark, ProjectMode
from annotate.roles import RESEARCHER
from annotate.selectors.benchmarks import systems_with_responses
from annotate.services.projects import InstructionSelection, Selection, guidelines_for_mode

SELECTION_CHOICES = [
    (Selection.ALL, "All instructions"),
    (Selection.IDS, "These instruction ids"),
    (Selection.RANDOM, "A random sample of N per subset (easy, hard)"),
]


class SelectionForm(forms.Form):
    selection = forms.ChoiceField(choices=SELECTION_CHOICES, initial=Selection.ALL)
    external_ids = forms.CharField(
        label="Instruction ids (one per line or comma-separated)",
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
    )
    per_subset = forms.IntegerField(label="N per subset", min_value=1, required=False)
    seed = forms.IntegerField(label="Random seed", initial=0, required=False)

    def instruction_selection(self) -> InstructionSelection:
        data = self.cleaned_data
        ids = [item for chunk in data["external_ids"].splitlines() for item in chunk.split(",")]
        return InstructionSelection(
            kind=data["selection"],
            external_ids=[item.strip() for item in ids if item.strip()],
            per_subset=data["per_subset"] or 0,
            seed=data["seed"] or 0,
        )


class BatchForm(SelectionForm):
    name = forms.CharField(max_length=200)

    field_order = ["name", "selection", "external_ids", "per_subset", "seed"]


class ProjectForm(SelectionForm):
    name = forms.CharField(max_length=200)
    benchmark = forms.ModelChoiceField(queryset=Benchmark.objects.order_by("name"))
    systems = forms.ModelMultipleChoiceField(
        queryset=systems_with_responses(), widget=forms.CheckboxSelectMultiple
    )
    mode = forms.ChoiceField(choices=ProjectMode.choices, initial=ProjectMode.DRFR)
    assignments_per_task = forms.IntegerField(min_value=1, max_value=100, initial=3)
    allotted_minutes = forms.IntegerField(min_value=1, max_value=1440, initial=60)
    guidelines = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 12}),
        required=False,
        help_text="Pre-filled for the mode chosen; left as pre-filled, they follow the mode.",
    )
    continue_to_next = forms.BooleanField(
        label="Continue to the next task",
        initial=True,
        required=False,
        help_text="After a submit, open the annotator's next task straight away.",
    )
    practice = forms.BooleanField(
        label="Practice project",
        required=False,
        help_text="Answers are kept for the annotator but never become labels: they count in no "
        "report, majority or export.",
    )
    researchers = forms.ModelMultipleChoiceField(
        queryset=User.objects.filter(groups__name=RESEARCHER).order_by("username"),
        widget=forms.CheckboxSelectMultiple,
        required=False,
    )

    field_order = [
        "name",
        "benchmark",
        "systems",
        "selection",
        "external_ids",
        "per_subset",
        "seed",
        "mode",
        "assignments_per_task",
        "allotted_minutes",
        "guidelines",
        "continue_to_next",
        "practice",
        "researchers",
    ]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        mode = self.initial.get("mode", self.fields["mode"].initial)
        guidelines = self.fields["guidelines"]
        guidelines.initial = guidelines_for_mode(mode)
        # site.js swaps the text when the mode changes, while it is still one of these.
        prefills = {value: guidelines_for_mode(value) for value in ProjectMode.values}
        guidelines.widget.attrs["data-mode-guidelines"] = json.dumps(prefills)
