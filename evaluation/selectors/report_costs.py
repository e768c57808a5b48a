"""Cost and time of each label source of a benchmark (paper Table 4), from what was recorded.

- Expert: hours on task (the assignments' active time) × the hourly rate.
- Crowd: reward × submitted assignments × (1 + platform fee).
- LLM judge: the cost of its engine calls (tokens × the endpoint's prices, as the engine priced
  each call; failed and retried calls included).
- Time: first claim to last submission of the source's assignments; for a judge, the time its
  calls took: the sum of the engine calls' latencies (a run resumed after a pause counts only
  its calls).

A source with nothing recorded (labels that were imported, say) gets None, never 0.

Whether an assignment is an expert's or a crowd worker's is the annotator's kind in this
benchmark (annotate.selectors.annotator_kinds: a project's override applies), the same
resolution as every other table of the report; an undecided annotator's work costs nothing here
because it counts nowhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, F, Max, Min, Sum

from annotate.engine.models import EngineCall
from annotate.models import AnnotatorKind, Benchmark, Response
from annotate.selectors.annotator_kinds import annotators_counted
from annotate.selectors.results import counted_assignments
from evaluation.models import JudgeRun

SUBSETS = ("easy", "hard", "overall")


@dataclass(frozen=True)
class SourceCost:
    cost_usd: float | None
    time_min: float | None


def _minutes(first, last) -> float | None:
    if first is None or last is None:
        return None
    return round((last - first).total_seconds() / 60, 2)


def _subset_filter(subset: str) -> dict:
    return {} if subset == "overall" else {"task__instruction__subset": subset}


def _assignments(benchmark: Benchmark, subset: str):
    """The benchmark's assignments whose work counts (rejected or unconfirmed work is unpaid)."""
    return counted_assignments().filter(
        task__instruction__benchmark=benchmark, **_subset_filter(subset)
    )


def _annotators_of_kind(benchmark: Benchmark) -> dict[str, list[int]]:
    """Return {kind: annotator ids} of those with counted assignments in the benchmark."""
    present = _assignments(benchmark, "overall").values_list("annotator_id", flat=True).distinct()
    kinds = annotators_counted(benchmark_id=benchmark.pk, annotator_ids=list(present))
    by_kind: dict[str, list[int]] = {AnnotatorKind.EXPERT: [], AnnotatorKind.CROWD: []}
    for annotator_id, kind in kinds.items():
        by_kind.setdefault(kind, []).append(annotator_id)
    return by_kind


def _expert_costs(benchmark: Benchmark, subset: str, experts: list[int]) -> dict[str, SourceCost]:
    rate = float(settings.EXPERT_HOURLY_RATE_USD)
    rows = (
        _assignments(benchmark, subset)
        .filter(annotator_id__in=experts)
        .values("annotator__name")
        .annotate(seconds=Sum("active_seconds"), first=Min("claimed_at"), last=Max("submitted_at"))
    )
    costs = {
        r["annotator__name"]: SourceCost(
            round(r["seconds"] / 3600 * rate, 2), _minutes(r["first"], r["last"])
        )
        for r in rows
    }
    # Asked whether or not there are experts, so the page's query count never depends on data.
    span = _assignments(benchmark, subset).filter(annotator_id__in=experts)
    bounds = span.aggregate(first=Min("claimed_at"), last=Max("submitted_at"))
    if costs:
        costs["expert-majority"] = SourceCost(
            round(sum(c.cost_usd or 0 for c in costs.values()), 2),
            _minutes(bounds["first"], bounds["last"]),
        )
    return costs


def _crowd_cost(benchmark: Benchmark, subset: str, workers: list[int]) -> dict[str, SourceCost]:
    crowd = _assignments(benchmark, subset).filter(annotator_id__in=workers)
    totals = crowd.aggregate(
        reward=Sum(F("task__batch__project__reward_usd")),
        count=Count("id"),
        first=Min("claimed_at"),
        last=Max("submitted_at"),
    )
    if not totals["count"]:
        return {}
    fee = Decimal(str(settings.CROWD_FEE_RATE))
    cost = float((totals["reward"] or Decimal(0)) * (1 + fee))
    return {"crowd-majority": SourceCost(round(cost, 2), _minutes(totals["first"], totals["last"]))}


def _judge_costs(benchmark: Benchmark, subset: str) -> dict[str, SourceCost]:
    """Cost and time of each judge's engine calls on the subset's responses.

    One source for both: the engine's stored calls of the judge's runs (EngineCall.cost_usd,
    priced at the endpoint's prices when made, and latency_ms), failed and retried calls
    included, since they were paid for and took time. A call answering several questions (all
    in one) is one call. A unit (one conversation) is keyed by its response, "judge:r<id>".
    """
    runs = dict(
        JudgeRun.objects.filter(benchmark=benchmark, engine_run__isnull=False).values_list(
            "engine_run_id", "config__annotator__name"
        )
    )
    if not runs:
        return {}
    per_unit = (
        EngineCall.objects.filter(run_id__in=runs)
        .values("run_id", "unit_key")
        .annotate(cost=Sum("cost_usd"), latency_ms=Sum("latency_ms"))
    )
    subset_of: dict[int, str] = {}
    if subset != "overall":
        subset_of = dict(
            Response.objects.filter(instruction__benchmark=benchmark).values_list(
                "pk", "instruction__subset"
            )
        )
    totals: dict[str, list] = {}
    for row in per_unit:
        if subset != "overall":
            response_id = _unit_response(row["unit_key"])
            if response_id is None or subset_of.get(response_id) != subset:
                continue
        total = totals.setdefault(runs[row["run_id"]], [Decimal(0), 0])
        total[0] += row["cost"] or Decimal(0)
        total[1] += row["latency_ms"] or 0
    return {
        name: SourceCost(round(float(cost), 4), round(latency_ms / 60_000, 2))
        for name, (cost, latency_ms) in totals.items()
    }


def _unit_response(unit_key: str) -> int | None:
    """Return the response id of a judge unit key ("judge:r<response id>"), else None."""
    prefix, _, rest = unit_key.partition(":r")
    return int(rest) if prefix == "judge" and rest.isdigit() else None


def source_costs(*, benchmark: Benchmark) -> dict[str, dict[str, SourceCost]]:
    """Return {subset: {source name: SourceCost}} for every source with anything recorded."""
    by_kind = _annotators_of_kind(benchmark)
    return {
        subset: {
            **_expert_costs(benchmark, subset, by_kind[AnnotatorKind.EXPERT]),
            **_crowd_cost(benchmark, subset, by_kind[AnnotatorKind.CROWD]),
            **_judge_costs(benchmark, subset),
        }
        for subset in SUBSETS
    }
