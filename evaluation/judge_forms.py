"""The forms of the judge pages: a judge configuration, and a judge run to start."""

from __future__ import annotations

from django import forms

from annotate.engine.forms import (
    EndpointChoiceField,
    ReplaceLabelsField,
    SpendingCapField,
    endpoint_cost_label,
)
from annotate.engine.models import Endpoint
from annotate.models import Benchmark, Subset
from annotate.selectors.benchmarks import systems_with_responses
from evaluation.models import JudgeConfig, JudgeProtocol


class JudgeConfigForm(forms.Form):
    """A judge on an existing engine endpoint; the service checks the name and the endpoint."""

    name = forms.CharField(
        max_length=200,
        help_text="Its labels land under an llm annotator of this name: unique among judges "
        "and annotators, whatever the capitals.",
    )
    protocol = forms.ChoiceField(choices=JudgeProtocol.choices, initial=JudgeProtocol.MULTI_TURN)
    endpoint = EndpointChoiceField(
        Endpoint.objects.order_by("name"),
        help_text="The model that answers, with its decoding, limits and prices. An offline fake "
        "(no address) bills nobody: its prices only show in reports what its calls would cost.",
    )


class JudgeChoiceField(forms.ModelChoiceField):
    """A judge by name, saying as its endpoint does whether it bills nobody or is for admins."""

    def label_from_instance(self, obj: JudgeConfig) -> str:
        return f"{obj.name} ({endpoint_cost_label(obj.endpoint)})"


class JudgeRunForm(forms.Form):
    config = JudgeChoiceField(JudgeConfig.objects.select_related("endpoint"), label="Judge")
    benchmark = forms.ModelChoiceField(Benchmark.objects.all())
    # Every benchmark's systems: the benchmark is chosen on the same page, so the form cannot
    # narrow them to it; judge_run_create refuses a system lacking responses there, by name.
    systems = forms.ModelMultipleChoiceField(
        systems_with_responses(), widget=forms.CheckboxSelectMultiple
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
    replace = ReplaceLabelsField(
        help_text="Needed only when the judge has labelled some of these responses already "
        "(the estimate says so): the run asks every question again and overwrites them.",
    )

    def clean_instruction_ids(self) -> list[str]:
        value = self.cleaned_data["instruction_ids"]
        return [item.strip() for item in value.split(",") if item.strip()]
