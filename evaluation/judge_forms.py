"""The forms of the judge pages: a judge configuration, and a judge run to start."""

from __future__ import annotations

from collections.abc import Mapping

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
    """A judge run to estimate or start.

    Systems are those with responses in the chosen benchmark (the one sent, else the address's
    `?benchmark=`, else the only one there is), all ticked at first. Choosing another benchmark
    reloads the page with the form's choices in the address (static/annotate/site.js,
    data-reload-on-change), which `chosen` brings back. With no benchmark chosen yet they are
    every benchmark's; judge_run_create refuses one lacking responses there, by name.
    """

    config = JudgeChoiceField(JudgeConfig.objects.select_related("endpoint"), label="Judge")
    benchmark = forms.ModelChoiceField(
        Benchmark.objects.all(), widget=forms.Select(attrs={"data-reload-on-change": ""})
    )
    systems = forms.ModelMultipleChoiceField(
        systems_with_responses(),
        # `required` on a checkbox would demand them all: site.js asks for one at least.
        widget=forms.CheckboxSelectMultiple(attrs={"data-one-required": ""}),
        help_text="At least one.",
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

    def __init__(self, data=None, *, chosen: Mapping[str, str] | None = None) -> None:
        chosen = chosen or {}
        initial = {name: chosen[name] for name in ("config", "subset") if chosen.get(name)}
        super().__init__(data, initial=initial)
        benchmark = self._benchmark_chosen(chosen.get("benchmark"))
        if benchmark is None:
            return
        systems = systems_with_responses(benchmark=benchmark)
        self.initial["benchmark"] = benchmark.pk
        self.initial["systems"] = list(systems)
        # Those sent stay choices, so a system with no response there is refused by the run,
        # by name and beside them, rather than as an unknown id.
        sent = [pk for pk in self.data.getlist("systems") if pk.isdigit()] if data else []
        self.fields["systems"].queryset = systems | systems_with_responses().filter(pk__in=sent)

    def _benchmark_chosen(self, benchmark_id: str | None) -> Benchmark | None:
        """The benchmark sent, else the one asked for in the address, else the only one."""
        chosen = self.data.get("benchmark") or benchmark_id
        if chosen:
            return Benchmark.objects.filter(pk=chosen).first() if str(chosen).isdigit() else None
        only = list(Benchmark.objects.all()[:2])
        return only[0] if len(only) == 1 else None

    def clean_instruction_ids(self) -> list[str]:
        value = self.cleaned_data["instruction_ids"]
        return [item.strip() for item in value.split(",") if item.strip()]
