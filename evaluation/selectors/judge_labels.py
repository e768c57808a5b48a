"""What starting a judge run would overwrite: the judge's labels on the questions it would ask.

A judge's labels live under its one annotator, one per question and response, so a second run
over the same responses asks every question again on its endpoint (paid, maybe) and replaces
the first run's labels (`judge_answers_store` updates them in place). So does running an
earlier run again after a later one judged its responses: it asks what it had left and
overwrites the later run's labels there.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import QuerySet

from annotate.models import Label
from annotate.templatetags.money import usd
from evaluation.models import ConversationStatus, JudgeCall, JudgeConversation, JudgeRun


@dataclass(frozen=True)
class LabelsBefore:
    """The judge's labels on some of the responses a run would judge (new, or again)."""

    responses_labelled: int  # responses with at least one label the run would overwrite
    responses_total: int  # responses the run judges (a resumed run: those it has left)
    run_ids: tuple[int, ...]  # the judge's other runs that wrote them, oldest first

    def warning(self, cost_usd: Decimal) -> str:
        """The sentence every way of starting the run shows before anything is spent."""
        if not self.run_ids:
            written_by = "imported, no run"
        else:
            plural = "s" if len(self.run_ids) > 1 else ""
            written_by = f"run{plural} " + ", ".join(f"#{pk}" for pk in self.run_ids)
        return (
            f"{self.responses_labelled} of {self.responses_total} responses already have labels "
            f"from this judge ({written_by}); starting replaces them and costs about "
            f"{usd(cost_usd)}."
        )


def judge_run_labels_before(*, run: JudgeRun) -> LabelsBefore | None:
    """The judge's labels that starting `run` (new, or again) would overwrite; None when there
    are none. A run asks only its missing work: the questions its unfinished conversations have
    not answered, so a resumed run's own answers (and labels) are not counted and resuming a run
    nobody else judged asks nothing. A new run's work is all of it. Three queries."""
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
    return LabelsBefore(
        responses_labelled=labelled,
        responses_total=unfinished.count(),
        run_ids=tuple(run_ids),
    )


def _labels_written_by(run: JudgeRun) -> QuerySet[JudgeCall]:
    """The labels of the questions `run` answered already, which it does not ask again (null
    links left out: NOT IN over a NULL matches nothing)."""
    return JudgeCall.objects.filter(conversation__run=run, label__isnull=False).values("label_id")
