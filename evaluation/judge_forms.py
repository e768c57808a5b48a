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


class ReloadingSelect(forms.Select):
    """A select whose choice reloads the form's page: static/annotate/site.js sends the form
    with `button` in it when the choice changes; without JavaScript, the button of that name
    shown beside the select does."""

    template_name = "evaluation/widgets/reloading_select.html"

    def __init__(self, *, button: str, button_label: str) -> None:
        super().__init__(attrs={"data-reload-on-change": button})
        self.button = button
        self.button_label = button_label

    def get_context(self, name, value, attrs):
        context = super().get_context(name, value, attrs)
        context["widget"]["button"] = {"name": self.button, "label": self.button_label}
        return context


# The button that sends the judge run form to list another benchmark's systems.
CHOOSE_BENCHMARK = "choose_benchmark"


class JudgeRunForm(forms.Form):
    """A judge run to estimate or start.

    Systems are those with responses in the chosen benchmark (the one sent, else the address's
    `?benchmark=`, else the only one there is), all ticked at first. Choosing another benchmark
    sends the form with CHOOSE_BENCHMARK (static/annotate/site.js, or its button without
    JavaScript); the page then shows it again from `chosen`, the form sent: every field as typed
    but the systems, now the new benchmark's, and the replace box, which an estimate of that
    benchmark asks for anew. With no benchmark chosen yet they are every benchmark's;
    judge_run_create refuses one lacking responses there, by name.
    """

    # What `chosen` brings back as it was typed (the address's `?config=&subset=`, or the form).
    KEPT = ("config", "subset", "instruction_ids", "sample", "seed", "spending_cap_usd")

    config = JudgeChoiceField(JudgeConfig.objects.select_related("endpoint"), label="Judge")
    benchmark = forms.ModelChoiceField(
        Benchmark.objects.all(),
        widget=ReloadingSelect(button=CHOOSE_BENCHMARK, button_label="List its systems"),
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
        initial = {name: chosen[name] for name in self.KEPT if name in chosen}
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
