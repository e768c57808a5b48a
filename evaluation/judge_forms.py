"""The form that starts a judge run."""

from __future__ import annotations

from django import forms

from annotate.engine.forms import SpendingCapField
from annotate.models import Benchmark, Subset, System
from evaluation.models import JudgeConfig


class JudgeRunForm(forms.Form):
    config = forms.ModelChoiceField(JudgeConfig.objects.all(), label="Judge")
    benchmark = forms.ModelChoiceField(Benchmark.objects.all())
    systems = forms.ModelMultipleChoiceField(
        System.objects.all(), widget=forms.CheckboxSelectMultiple
    )
    subset = forms.ChoiceField(choices=[("", "All instructions"), *Subset.choices], required=False)
    instruction_ids = forms.CharField(
        required=False,
        label="Only these instruction ids",
        help_text="Comma-separated, e.g. user_oriented_task_1, domain_oriented_task_7.",
    )
    sample = forms.IntegerField(
        required=False, min_value=1, label="Random sample of N instructions"
    )
    seed = forms.IntegerField(initial=0, min_value=0)
    spending_cap_usd = SpendingCapField()

    def clean_instruction_ids(self) -> list[str]:
        value = self.cleaned_data["instruction_ids"]
        return [item.strip() for item in value.split(",") if item.strip()]
