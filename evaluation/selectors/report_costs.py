"""Cost and time of each label source of a benchmark (paper Table 4), from what was recorded.

- Expert: hours on task (the assignments' active time) × the hourly rate.
- Crowd: what the platform paid or will pay for the benchmark's work, by the publication
  page's "Spent so far" rule (annotate.crowd.selectors.crowd_paid_work_q): the counted work,
  and work counted nowhere that was paid all the same (a blocked worker's approved work, late
  work the platform approved, work rejected here that it approved: the paper's cost is what
  was paid on the platform). Each is priced at the reward and fee of the publication it came
  through (annotate.crowd.selectors.crowd_paid_per_assignment; MTurk's schedule at the rate of
  the assignment's HIT's MaxAssignments, 20% or 40% on HITs of 10 or more, at least $0.01, or
  the flat rate the publication stored; no fee for a self-hosted link), else the project's
  reward and today's fee, and the bonuses paid on it (20%, at least $0.01, or the flat rate).
- LLM judge: the cost of the engine calls that gave its labels as they stand (tokens × the
  endpoint's prices, as the engine priced each call; failed and retried calls included): per
  response, the calls of the latest run that finished it. A second run over the same responses
  replaces the first's labels, so the first's calls no longer count (they were paid, and the
  judge's runs list their cost; the paper's cost is that of labelling the benchmark once).
  Beside it, apart, what those same calls' failed attempts may have been billed
  (EngineCall.possibly_billed_usd: a timeout after sending, a broken stream, a 5xx; the engine's
  estimate, not in the cost).
- Time: for an expert (and the experts' majority), first claim to last submission of their
  assignments. For the crowd, what the paper took from the platform's statistics: the time
  during which at least one crowd worker was working on counted work, the length of the union
  of their counted assignments' spans (claim to submission), so idle time between them is not
  counted (days between batches, a publication resumed after its claims expired, a worker who
  picked up a HIT days later) and overlapping assignments count once. For a judge, the time its
  calls took: the sum of the engine calls' latencies (a run resumed after a pause counts only
  its calls).

A source with nothing recorded (labels that were imported, say) gets None, never 0. Sources are
keyed as the computed report keys them: an annotator's by `annotator_source(id)`, the majorities
by their names.

Whether an assignment is an expert's or a crowd worker's is the annotator's kind in this
benchmark (annotate.selectors.annotator_kinds: a project's override applies), the same
resolution as every other table of the report; an undecided annotator's work costs nothing here
because it counts nowhere. The report passes the kinds its labels were read with (`kinds`), so a
kind a researcher changes while the report is read moves a worker's labels and cost together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from operator import itemgetter

from django.conf import settings
from django.db.models import Count, Max, Min, Sum

from annotate.crowd.base import to_cents
from annotate.crowd.selectors import crowd_paid_per_assignment, crowd_paid_work_q
from annotate.engine.models import EngineCall, EngineRun
from annotate.models import AnnotatorKind, Assignment, Benchmark, Response
from annotate.selectors.annotator_kinds import annotators_counted
from annotate.selectors.results import (
    counted_assignments,
)
from evaluation.models import ConversationStatus, JudgeConversation, JudgeRun
from evaluation.selectors.report_data import annotator_source

SUBSETS = ("easy", "hard", "overall")
# Minutes are kept to 4 decimals (6 ms): a judge's few seconds of calls stay visible as such
# (0.0040, not 0.00 read as nothing); report_formats.hundredths_text decides how they are shown.
MINUTE_DIGITS = 4


@dataclass(frozen=True)
class SourceCost:
    cost_usd: float | None
    time_min: float | None
    # An LLM judge's only: the estimate of its counted calls' failed attempts the provider may
    # have billed, not in cost_usd (None for people, whose cost has no such part).
    possibly_billed_usd: float | None = None


def _minutes(first, last) -> float | None:
    if first is None or last is None:
        return None
    return round((last - first).total_seconds() / 60, MINUTE_DIGITS)


def _union_minutes(spans: Iterable[tuple[datetime | None, datetime | None]]) -> float | None:
    """Minutes covered by the union of the (first, last) spans: overlapping spans merged, the
    time between disjoint ones left out. None when no span has both ends (as _minutes).

    Sorted by the start alone and merged without a list of merged spans: a report's crowd has
    one span per assignment, hundreds of thousands of them. A span ending before it starts
    (imported or skewed clocks; the app's own claims and submissions cannot) covers no time
    rather than taking its length off the others'."""
    covered = timedelta(0)
    start = end = None
    for first, last in sorted((span for span in spans if None not in span), key=itemgetter(0)):
        last = max(first, last)
        if end is None or first > end:
            if end is not None:
                covered += end - start
            start, end = first, last
        elif last > end:
            end = last
    if end is None:
        return None
    return round((covered + (end - start)).total_seconds() / 60, MINUTE_DIGITS)


@dataclass
class _Work:
    """Counted assignments of one annotator (or one kind) in one subset, summed."""

    seconds: float = 0.0
    count: int = 0
    paid: Decimal = Decimal(0)  # crowd work: what it was paid, fees included
    first: datetime | None = None
    last: datetime | None = None

    def add(self, row: dict, *, paid: Decimal = Decimal(0)) -> None:
        self.seconds += row["seconds"] or 0
        self.count += row["count"]
        self.paid += paid
        if row["first"] is not None and (self.first is None or row["first"] < self.first):
            self.first = row["first"]
        if row["last"] is not None and (self.last is None or row["last"] > self.last):
            self.last = row["last"]


def _counted_work_by_annotator(benchmark: Benchmark) -> list[dict]:
    """The benchmark's counted assignments (rejected or unconfirmed work is unpaid), summed per
    annotator and subset: one query, whatever the data."""
    return list(
        counted_assignments()
        .filter(task__instruction__benchmark=benchmark)
        .values("annotator_id", "task__instruction__subset")
        .annotate(
            seconds=Sum("active_seconds"),
            count=Count("id"),
            first=Min("claimed_at"),
            last=Max("submitted_at"),
        )
        .order_by()
    )


def _crowd_spans(
    benchmark: Benchmark, crowd_ids: list[int]
) -> dict[str, list[tuple[datetime | None, datetime | None]]]:
    """The (claim, submission) span of each counted assignment of the crowd workers
    `crowd_ids`, per subset and overall: one query, whatever the data (none without ids).
    Read in claim order, so each list comes sorted and _union_minutes's sort is one pass."""
    spans: dict[str, list] = {subset: [] for subset in SUBSETS}
    rows = (
        counted_assignments()
        .filter(task__instruction__benchmark=benchmark, annotator_id__in=crowd_ids)
        .order_by("claimed_at")
        .values_list("task__instruction__subset", "claimed_at", "submitted_at")
    )
    for subset, claimed, submitted in rows:
        span = (claimed, submitted)
        spans[subset].append(span)
        spans["overall"].append(span)
    return spans


def _assignment_costs(
    benchmark: Benchmark, given: Mapping[int, str | None]
) -> tuple[dict[str, dict[str, SourceCost]], dict[int, str | None]]:
    """Experts by the hour (each, and their majority), crowd workers per paid assignment; and
    the kind each annotator with an assignment went by (None: not decided), `given`'s for those
    it names."""
    rows = _counted_work_by_annotator(benchmark)
    # What the crowd was paid, per worker and subset, by the publication page's rule (what the
    # platform paid or will pay, crowd_paid_work_q): the counted work, and work counted nowhere
    # that was paid all the same (a blocked worker's, late work the platform approved, work
    # rejected here that it auto-approved). Kinds first, of every annotator with an assignment
    # of the benchmark (the counted work's and the paid work's among them: a kind is each
    # annotator's own, so asking for more changes none), then only the crowd's work is priced:
    # an in-house expert's is paid by the hour and an undecided annotator's counts nowhere.
    # Their ids need no pass of the counting and paying rules over the assignments.
    work = Assignment.objects.filter(
        crowd_paid_work_q(), task__instruction__benchmark=benchmark
    ).order_by()
    with_work = Assignment.objects.filter(task__instruction__benchmark=benchmark).order_by()
    ids = {row["annotator_id"] for row in rows} | set(
        with_work.values_list("annotator_id", flat=True).distinct()
    )
    kinds = annotators_counted(benchmark_id=benchmark.pk, annotator_ids=ids - given.keys())
    kinds.update({pk: kind for pk, kind in given.items() if pk in ids and kind is not None})
    crowd_ids = sorted(pk for pk, kind in kinds.items() if kind == AnnotatorKind.CROWD)
    paid: dict = {}
    if crowd_ids:
        paid = crowd_paid_per_assignment(
            work.filter(annotator_id__in=crowd_ids),
            by=("annotator_id", "task__instruction__subset"),
        )
    spans = _crowd_spans(benchmark, crowd_ids)
    experts: dict[str, dict[str, _Work]] = {subset: {} for subset in SUBSETS}
    crowd: dict[str, _Work] = {subset: _Work() for subset in SUBSETS}
    for row in rows:
        kind = kinds.get(row["annotator_id"])
        for subset in (row["task__instruction__subset"], "overall"):
            if kind == AnnotatorKind.EXPERT:
                source = annotator_source(row["annotator_id"])
                experts[subset].setdefault(source, _Work()).add(row)
            elif kind == AnnotatorKind.CROWD:
                crowd[subset].add(row)
    for (_, subset), amount in paid.items():
        for each in (subset, "overall"):
            crowd[each].paid += amount
    costs = {
        subset: {**_expert_costs(experts[subset]), **_crowd_cost(crowd[subset], spans[subset])}
        for subset in SUBSETS
    }
    return costs, {pk: kinds.get(pk) for pk in ids}


def _expert_costs(experts: dict[str, _Work]) -> dict[str, SourceCost]:
    rate = float(settings.EXPERT_HOURLY_RATE_USD)
    costs = {
        source: SourceCost(round(work.seconds / 3600 * rate, 2), _minutes(work.first, work.last))
        for source, work in experts.items()
    }
    if costs:
        firsts = [work.first for work in experts.values() if work.first is not None]
        lasts = [work.last for work in experts.values() if work.last is not None]
        costs["expert-majority"] = SourceCost(
            round(sum(c.cost_usd or 0 for c in costs.values()), 2),
            _minutes(min(firsts, default=None), max(lasts, default=None)),
        )
    return costs


def _crowd_cost(crowd: _Work, spans: list[tuple]) -> dict[str, SourceCost]:
    """The Decimal sum of the payments' prices (each whole cents: pricing.paid_with_fee),
    as the publication page's "Spent so far" adds them, made a float only at the end; the time
    during which at least one crowd worker was working on counted work (the module's Time).
    A subset whose only crowd work counts nowhere but was paid (rejected here, approved on the
    platform) still costs what was paid, so the subsets add up to the overall cost."""
    if not crowd.count and not crowd.paid:
        return {}
    cost = float(to_cents(crowd.paid))
    return {"crowd-majority": SourceCost(cost, _union_minutes(spans))}


def _judge_costs(benchmark: Benchmark, subset: str) -> dict[str, SourceCost]:
    """Cost and time of each judge's engine calls on the subset's responses.

    One source for both: the engine's stored calls of the judge's runs (EngineCall.cost_usd,
    priced at the endpoint's prices when made, and latency_ms), failed and retried calls
    included, since they were paid for and took time. A call answering several questions (all
    in one) is one call. A unit (one conversation) is keyed by its response, "judge:r<id>".
    Per (judge, response), only the calls of the latest run that finished the response count:
    its labels are the ones stored (a later run writes over an earlier one's).
    """
    runs = dict(
        JudgeRun.objects.filter(benchmark=benchmark, engine_run__isnull=False).values_list(
            "engine_run_id", "config__annotator_id"
        )
    )
    if not runs:
        return {}
    # (engine run, response) of each (judge, response)'s latest finished conversation.
    latest: dict[tuple[int, int], tuple[int, int]] = {}
    for judge_run_id, engine_run_id, annotator_id, response_id in JudgeConversation.objects.filter(
        run__engine_run_id__in=runs, status=ConversationStatus.DONE
    ).values_list("run_id", "run__engine_run_id", "run__config__annotator_id", "response_id"):
        key = (annotator_id, response_id)
        if key not in latest or latest[key][0] < judge_run_id:
            latest[key] = (judge_run_id, engine_run_id)
    counted = {
        (engine_run_id, response_id) for (_, response_id), (_, engine_run_id) in latest.items()
    }
    per_unit = (
        EngineCall.objects.filter(run_id__in=runs)
        .values("run_id", "unit_key")
        .annotate(
            cost=Sum("cost_usd"),
            billed=Sum("possibly_billed_usd"),
            latency_ms=Sum("latency_ms"),
        )
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
        response_id = _unit_response(row["unit_key"])
        if (row["run_id"], response_id) not in counted:
            continue
        if subset != "overall" and subset_of.get(response_id) != subset:
            continue
        total = totals.setdefault(runs[row["run_id"]], [Decimal(0), 0, Decimal(0)])
        total[0] += row["cost"] or Decimal(0)
        total[1] += row["latency_ms"] or 0
        total[2] += row["billed"] or Decimal(0)
    # Calls stored before the engine kept possibly billed amounts per call (engine 0010) carry
    # 0 while their run's total says more: that judge's amount is not known, not nothing.
    unknown = {runs[run_id] for run_id in _runs_billed_before_per_call(runs)}
    return {
        annotator_source(annotator_id): SourceCost(
            round(float(cost), 4),
            round(latency_ms / 60_000, MINUTE_DIGITS),
            None if annotator_id in unknown else round(float(billed), 4),
        )
        for annotator_id, (cost, latency_ms, billed) in totals.items()
    }


def _runs_billed_before_per_call(run_ids) -> set[int]:
    """The runs whose possibly billed total is more than their calls' (their calls were stored
    before EngineCall.possibly_billed_usd existed). One query when no run has any."""
    totals = dict(
        EngineRun.objects.filter(pk__in=run_ids, possibly_billed_usd__gt=0).values_list(
            "pk", "possibly_billed_usd"
        )
    )
    if not totals:
        return set()
    by_calls = dict(
        EngineCall.objects.filter(run_id__in=totals)
        .values("run_id")
        .annotate(billed=Sum("possibly_billed_usd"))
        .values_list("run_id", "billed")
    )
    return {run_id for run_id, total in totals.items() if total > (by_calls.get(run_id) or 0)}


def _unit_response(unit_key: str) -> int | None:
    """Return the response id of a judge unit key ("judge:r<response id>"), else None."""
    prefix, _, rest = unit_key.partition(":r")
    return int(rest) if prefix == "judge" and rest.isdigit() else None


def source_costs(
    *, benchmark: Benchmark, kinds: Mapping[int, str | None] | None = None
) -> dict[str, dict[str, SourceCost]]:
    """Return {subset: {source key: SourceCost}} for every source with anything recorded.

    `kinds` ({annotator id: kind, None for not decided}: the report's
    BenchmarkArrays.kinds_read) are the kinds the report's counted answers went by: the
    annotators it names are costed by them, not by kinds read again, so a kind changed while
    the report is read cannot count a worker's labels in the crowd majority and their work in
    an expert's cost (or nowhere)."""
    return source_costs_and_kinds(benchmark=benchmark, kinds=kinds)[0]


def source_costs_and_kinds(
    *, benchmark: Benchmark, kinds: Mapping[int, str | None] | None = None
) -> tuple[dict[str, dict[str, SourceCost]], dict[int, str | None]]:
    """source_costs, and the kind each annotator with an assignment on the benchmark was costed
    by (None: not decided), for a report that read its costs beside its labels to check that
    both went by the same kinds."""
    assignments, used = _assignment_costs(benchmark, kinds or {})
    costs = {
        subset: {
            **assignments[subset],
            **_judge_costs(benchmark, subset),
        }
        for subset in SUBSETS
    }
    return costs, used
