"""What starting a judge run would overwrite: the judge's labels on the questions it would ask.

A judge's labels live under its one annotator, one per question and response, so a second run
over the same responses asks every question again on its endpoint (paid, maybe) and replaces
the first run's labels (`judge_answers_store` updates them in place). So does running an
earlier run again after a later one judged its responses: it asks what it had left and
overwrites the later run's labels there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from django.db.models import Count, Q, QuerySet
from django.template.defaultfilters import pluralize

from annotate.engine.models import RunStatus as EngineRunStatus
from annotate.models import Label
from annotate.templatetags.money import usd_at_most
from evaluation.models import ConversationStatus, JudgeCall, JudgeConversation, JudgeRun


@dataclass(frozen=True)
class LabelsBefore:
    """The judge's labels on some of the responses a run would judge (new, or again)."""

    responses_labelled: int  # responses with at least one label the run would overwrite
    responses_total: int  # responses the run judges (a resumed run: those it has left)
    run_ids: tuple[int, ...]  # the judge's other runs that wrote them, oldest first
    # Of responses_labelled, those with a label no run wrote (imported under the judge's
    # annotator): no run to credit them to.
    responses_imported: int = 0
    # What the warning says, as a page (or an API caller) sends it back with "replace": a start
    # whose labels changed since it was shown (another run ended meanwhile) is asked again.
    seen: str = field(init=False)

    def __post_init__(self) -> None:
        runs = ".".join(str(pk) for pk in self.run_ids)
        said = f"{self.responses_labelled}/{self.responses_total}/{self.responses_imported}/{runs}"
        object.__setattr__(self, "seen", said)

    def warning(self, cost_usd: Decimal) -> str:
        """The sentence every way of starting the run shows before anything is spent. The cost
        is the run's worst case, all of its responses, not only those it replaces."""
        written_by = []
        if self.run_ids:
            plural = "s" if len(self.run_ids) > 1 else ""
            written_by.append(f"run{plural} " + ", ".join(f"#{pk}" for pk in self.run_ids))
        if self.responses_imported:
            written_by.append(f"{self.responses_imported} imported")
        total = self.responses_total
        return (
            f"{self.responses_labelled} of {total} responses already have labels from this "
            f"judge ({'; '.join(written_by)}); starting replaces them; the run ({total} "
            f"response{pluralize(total)}) costs at most {usd_at_most(cost_usd)}."
        )


def judge_run_labels_before(*, run: JudgeRun) -> LabelsBefore | None:
    """The judge's labels that starting `run` (new, or again) would overwrite; None when there
    are none. A run asks only its missing work: the questions its unfinished conversations have
    not answered, so a resumed run's own answers (and labels) are not counted and resuming a run
    nobody else judged asks nothing. A new run's work is all of it. Four queries."""
    unfinished = JudgeConversation.objects.filter(run=run).exclude(status=ConversationStatus.DONE)
    replaced = Label.objects.filter(
        annotator_id=run.config.annotator_id,
        response_id__in=unfinished.values("response_id"),
    ).exclude(pk__in=_labels_written_by(run))
    labelled = replaced.values("response_id").distinct().count()
    if not labelled:
        return None
    run_ids = (
        JudgeCall.objects.filter(label__in=replaced)
        .exclude(conversation__run=run)
        .values_list("conversation__run_id", flat=True)
        .distinct()
        .order_by("conversation__run_id")
    )
    imported = replaced.filter(judge_calls__isnull=True).values("response_id").distinct().count()
    return LabelsBefore(
        responses_labelled=labelled,
        responses_total=unfinished.count(),
        run_ids=tuple(run_ids),
        responses_imported=imported,
    )


def judge_runs_writing(*, run: JudgeRun) -> list[tuple[int, str, int]]:
    """The judge's other runs started and not ended (queued: pending with a start asked, or
    running) that still write labels on responses `run` would judge, oldest first: (judge run
    id, engine status, responses shared). Two runs writing the same labels at once would both
    be paid and leave a mix of their answers. One query."""
    unfinished = JudgeConversation.objects.filter(run=run).exclude(status=ConversationStatus.DONE)
    started = Q(run__engine_run__status=EngineRunStatus.RUNNING) | Q(
        run__engine_run__status=EngineRunStatus.PENDING, run__engine_run__heartbeat__isnull=False
    )
    shared = (
        JudgeConversation.objects.filter(started, run__config_id=run.config_id)
        .exclude(run=run)
        .exclude(status=ConversationStatus.DONE)
        .filter(response_id__in=unfinished.values("response_id"))
        .values_list("run_id", "run__engine_run__status")
        .annotate(responses=Count("response_id", distinct=True))
        .order_by("run_id")
    )
    return list(shared)


def _labels_written_by(run: JudgeRun) -> QuerySet[JudgeCall]:
    """The labels of the questions `run` answered already, which it does not ask again (null
    links left out: NOT IN over a NULL matches nothing)."""
    return JudgeCall.objects.filter(conversation__run=run, label__isnull=False).values("label_id")
