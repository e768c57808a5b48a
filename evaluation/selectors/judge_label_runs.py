"""Which runs of a judge its labels on a benchmark come from, and whether they mix an unfinished
replacement with the run it replaces.

A run over responses the judge labelled already overwrites each label as soon as its question
is answered (services.judge_runs.judge_answers_store), so a replacing run stopped or failed
part-way leaves the judge's labels from two runs (some responses, even some questions of one
response, by the new run, the rest by the old) until it is resumed. A label's run is the run of
its latest answer (JudgeCall.label: every run that set it keeps its answer row, in the order
written). Labels no run wrote (imported under the judge's annotator) belong to no run.

Labels from several runs that all finished are not mixed in this sense: each finished run
answered every question of its responses (a run over some instructions, then one over others).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Count, Q
from django.template.defaultfilters import pluralize

from evaluation.models import (
    ConversationStatus,
    JudgeCall,
    JudgeConfig,
    JudgeConversation,
    JudgeRun,
    RunStatus,
)


@dataclass(frozen=True)
class LabelRun:
    """One run that set some of the judge's labels as they stand on the benchmark."""

    run_id: int
    status: str  # the live status (JudgeRun.live_status)
    status_display: str
    responses_done: int  # its conversations done
    responses_total: int  # its conversations
    # Responses where it overwrote an earlier run's labels, per earlier run id.
    replaced: dict[int, int] = field(default_factory=dict)
    # Responses of `replaced` where it has not finished its conversation: some of their labels
    # are its, the others the earlier run's.
    answered_in_part: int = 0

    @property
    def finished(self) -> bool:
        return self.status == RunStatus.DONE

    @property
    def active(self) -> bool:
        return self.status in (RunStatus.PENDING, RunStatus.RUNNING)

    def described(self) -> str:
        """'#12 (stopped, 40 of 90 responses) replaced #9 on 40 responses'."""
        text = (
            f"#{self.run_id} ({self.status_display.lower()}, {self.responses_done} of "
            f"{self.responses_total} response{pluralize(self.responses_total)})"
        )
        replaced = ", ".join(
            f"#{pk} on {count} response{pluralize(count)}"
            for pk, count in sorted(self.replaced.items(), reverse=True)
        )
        return f"{text} replaced {replaced}" if replaced else text


@dataclass(frozen=True)
class JudgeLabelRuns:
    """The runs a judge's labels on one benchmark come from, newest first."""

    annotator_id: int
    runs: list[LabelRun]

    @property
    def unfinished(self) -> list[LabelRun]:
        """The unfinished runs among them that replaced another run's labels."""
        return [run for run in self.runs if not run.finished and run.replaced]

    @property
    def mixed(self) -> bool:
        """Whether the labels come from more than one run, an unfinished one replacing another:
        the judge's figures then belong to no single run."""
        return len(self.runs) > 1 and bool(self.unfinished)

    def note(self) -> str:
        """What the report says of a mixed judge (its figures provisional, its Table 4 cost by
        the rule of docs/reports.md); "" when its labels are not mixed."""
        if not self.mixed:
            return ""
        parts = [run.described() for run in self.runs if run.replaced]
        todo = "; ".join(
            f"wait for run #{run.run_id} to finish"
            if run.active
            else f"resume run #{run.run_id} to finish"
            for run in self.unfinished
        )
        in_part = sum(run.answered_in_part for run in self.unfinished)
        cost = (
            "Until then its figures are provisional, and its cost and time in Table 4 are those "
            "of the run that last finished each response"
        )
        if in_part:
            cost += (
                f" ({in_part} response{pluralize(in_part)} answered only in part by the "
                f"unfinished run: costed by the earlier run that finished "
                f"{'it' if in_part == 1 else 'them'})"
            )
        return f"labels from {len(self.runs)} runs: {'; '.join(parts)}; {todo}. {cost}."


def judge_label_runs(
    *, benchmark_id: int, annotator_ids: Collection[int] | None = None
) -> dict[int, JudgeLabelRuns]:
    """Return {judge's annotator id: JudgeLabelRuns} for each judge with labels a run wrote on
    the benchmark (those of `annotator_ids` alone when given). One query when no run wrote any,
    else three; the answer rows (one per question a run answered) are aggregated in the
    database, which returns a few rows per run, never one per answer."""
    set_by: set[int] = set()  # runs that set a label as it stands
    annotator_of: dict[int, int] = {}  # run: its judge's annotator
    replaced: dict[int, dict[int, int]] = {}  # run: {earlier run: responses}
    in_part: dict[int, int] = {}  # run: responses it replaced and has not finished
    for run_id, annotator_id, earlier_id, responses, unfinished in _label_run_rows(
        benchmark_id=benchmark_id, annotator_ids=annotator_ids
    ):
        set_by.add(run_id)
        annotator_of[run_id] = annotator_id
        if earlier_id is not None:
            replaced.setdefault(run_id, {})[earlier_id] = responses
        elif unfinished:
            in_part[run_id] = unfinished
    if not set_by:
        return {}
    return _by_judge(set_by, replaced, in_part, annotator_of)


# A label's run is that of its latest answer row (the highest id: rows are written in order),
# the runs it replaced those of its other rows: one window over each label's rows finds both, in
# one sort (the same text on SQLite: named windows since 3.28, Django asks for 3.31). The rows
# are then made distinct per (the run that set the label, its judge's annotator, the row's own
# run when that is another, else NULL, the response: every row of a label answers the label's,
# the response again when the setting run replaced the label and has not finished that
# response's conversation, else NULL) and counted per run and earlier run. A (run, earlier run)
# group has one row per response the run replaced the earlier one on (all its labels were
# replaced, so the last column is the same for all of a response's labels); a (run, NULL)
# group's non-NULL last column is one per response replaced and not finished. DISTINCT before
# the count lets PostgreSQL hash the 200,000 rows of docs/benchmarks.md, not sort them again.
_LABEL_RUNS_SQL = """
SELECT setter_run, annotator_id, earlier_run, COUNT(earlier_run), COUNT(unfinished_response)
FROM (SELECT DISTINCT setter_run, annotator_id, earlier_run, response_id, unfinished_response
FROM (
    SELECT v.response_id, g.annotator_id,
        FIRST_VALUE(v.run_id) OVER label_rows AS setter_run,
        CASE WHEN v.run_id <> FIRST_VALUE(v.run_id) OVER label_rows THEN v.run_id END
            AS earlier_run,
        CASE
            WHEN FIRST_VALUE(v.status) OVER label_rows <> %s
                AND MIN(v.run_id) OVER label_rows <> MAX(v.run_id) OVER label_rows
            THEN v.response_id
        END AS unfinished_response
    FROM {call} c
    JOIN {conversation} v ON v.id = c.conversation_id
    JOIN {run} r ON r.id = v.run_id
    JOIN {config} g ON g.id = r.config_id
    WHERE r.benchmark_id = %s AND c.label_id IS NOT NULL{annotators}
    WINDOW label_rows AS (
        PARTITION BY c.label_id ORDER BY c.id DESC
        ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
    )
) answers) responses
GROUP BY setter_run, annotator_id, earlier_run
"""


def _label_run_rows(*, benchmark_id: int, annotator_ids: Collection[int] | None):
    params: list = [benchmark_id]
    annotators = ""
    if annotator_ids is not None:
        ids = list(annotator_ids)
        if not ids:
            return []
        annotators = f" AND g.annotator_id IN ({', '.join(['%s'] * len(ids))})"
        params += ids
    sql = _LABEL_RUNS_SQL.format(
        call=JudgeCall._meta.db_table,
        conversation=JudgeConversation._meta.db_table,
        run=JudgeRun._meta.db_table,
        config=JudgeConfig._meta.db_table,
        annotators=annotators,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [ConversationStatus.DONE.value, *params])
        return cursor.fetchall()


def _by_judge(set_by, replaced, in_part, annotator_of) -> dict[int, JudgeLabelRuns]:
    runs = JudgeRun.objects.filter(pk__in=set_by).select_related("engine_run")
    counts = {
        row["run_id"]: row
        for row in JudgeConversation.objects.filter(run_id__in=set_by)
        .values("run_id")
        .annotate(total=Count("id"), done=Count("id", filter=Q(status=ConversationStatus.DONE)))
        .order_by()
    }
    judges: dict[int, list[LabelRun]] = {}
    for run in sorted(runs, key=lambda run: -run.pk):
        count = counts.get(run.pk, {"total": 0, "done": 0})
        judges.setdefault(annotator_of[run.pk], []).append(
            LabelRun(
                run_id=run.pk,
                status=run.live_status,
                status_display=run.live_status_display,
                responses_done=count["done"],
                responses_total=count["total"],
                replaced=replaced.get(run.pk, {}),
                answered_in_part=in_part.get(run.pk, 0),
            )
        )
    return {pk: JudgeLabelRuns(annotator_id=pk, runs=found) for pk, found in judges.items()}


def judge_run_mixed_note(*, run: JudgeRun) -> str:
    """What the page of an unfinished (stopped or failed) run says when it replaced part of an
    earlier run's labels and left the rest: the benchmark's labels of its judge are mixed until
    it is resumed; "" otherwise (and, without a query, for a run done or still working)."""
    if run.live_status not in (RunStatus.FAILED, RunStatus.CANCELLED):
        return ""
    annotator_id = run.config.annotator_id
    found = judge_label_runs(benchmark_id=run.benchmark_id, annotator_ids=[annotator_id])
    runs = found.get(annotator_id)
    if runs is None or not runs.mixed:
        return ""
    this = next((each for each in runs.unfinished if each.run_id == run.pk), None)
    if this is None:
        return ""
    return (
        f"The labels of this judge on {run.benchmark.name} are mixed until this run is resumed: "
        f"{runs.note()}"
    )
