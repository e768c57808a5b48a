"""Cost and time of each label source of a benchmark (paper Table 4), from what was recorded.

- Expert: hours on task (the assignments' active time) × the hourly rate.
- Crowd: reward × submitted assignments × (1 + platform fee).
- LLM judge: prompt and completion tokens of its recorded calls × the configuration's prices.
- Time: first claim to last submission of the source's assignments; for a judge, its runs' duration
  shared out over subsets by their share of the calls.

A source with nothing recorded (labels that were imported, say) gets None, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, F, Max, Min, Sum

from annotate.models import Assignment, AssignmentStatus, Benchmark
from evaluation.models import JudgeCall, JudgeRun

SUBSETS = ("easy", "hard", "overall")
PAID_STATUSES = [AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED]


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
    return Assignment.objects.filter(
        task__instruction__benchmark=benchmark, status__in=PAID_STATUSES, **_subset_filter(subset)
    )


def _expert_costs(benchmark: Benchmark, subset: str) -> dict[str, SourceCost]:
    rate = float(settings.EXPERT_HOURLY_RATE_USD)
    rows = (
        _assignments(benchmark, subset)
        .filter(annotator__kind="expert")
        .values("annotator__name")
        .annotate(seconds=Sum("active_seconds"), first=Min("claimed_at"), last=Max("submitted_at"))
    )
    costs = {
        r["annotator__name"]: SourceCost(
            round(r["seconds"] / 3600 * rate, 2), _minutes(r["first"], r["last"])
        )
        for r in rows
    }
    if costs:
        span = _assignments(benchmark, subset).filter(annotator__kind="expert")
        bounds = span.aggregate(first=Min("claimed_at"), last=Max("submitted_at"))
        costs["expert-majority"] = SourceCost(
            round(sum(c.cost_usd or 0 for c in costs.values()), 2),
            _minutes(bounds["first"], bounds["last"]),
        )
    return costs


def _crowd_cost(benchmark: Benchmark, subset: str) -> dict[str, SourceCost]:
    crowd = _assignments(benchmark, subset).filter(annotator__kind="crowd")
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
    calls = JudgeCall.objects.filter(conversation__run__benchmark=benchmark)
    config = "conversation__run__config"
    by_judge = calls.values(f"{config}__annotator__name").annotate(
        prompt=Sum(F("prompt_tokens") * F(f"{config}__price_prompt_per_1k")),
        completion=Sum(F("completion_tokens") * F(f"{config}__price_completion_per_1k")),
        calls=Count("id"),
    )
    if subset != "overall":
        all_calls = {
            r[f"{config}__annotator__name"]: r["calls"]
            for r in calls.values(f"{config}__annotator__name").annotate(calls=Count("id"))
        }
        by_judge = by_judge.filter(conversation__response__instruction__subset=subset)
    costs = {}
    for row in by_judge:
        name = row[f"{config}__annotator__name"]
        cost = float((row["prompt"] or 0) + (row["completion"] or 0)) / 1000
        minutes = _judge_minutes(benchmark, name)
        if minutes is not None and subset != "overall":
            minutes = round(minutes * row["calls"] / all_calls[name], 2)
        costs[name] = SourceCost(round(cost, 4), minutes)
    return costs


def _judge_minutes(benchmark: Benchmark, annotator_name: str) -> float | None:
    runs = JudgeRun.objects.filter(
        benchmark=benchmark,
        config__annotator__name=annotator_name,
        started_at__isnull=False,
        finished_at__isnull=False,
    ).values_list("started_at", "finished_at")
    spans = [(finished - started).total_seconds() for started, finished in runs]
    return round(sum(spans) / 60, 2) if spans else None


def source_costs(*, benchmark: Benchmark) -> dict[str, dict[str, SourceCost]]:
    """Return {subset: {source name: SourceCost}} for every source with anything recorded."""
    return {
        subset: {
            **_expert_costs(benchmark, subset),
            **_crowd_cost(benchmark, subset),
            **_judge_costs(benchmark, subset),
        }
        for subset in SUBSETS
    }
