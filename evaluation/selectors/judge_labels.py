"""What a new judge run would overwrite: the judge's labels on the responses it would judge.

A judge's labels live under its one annotator, one per question and response, so a second run
over the same responses asks every question again on its endpoint (paid, maybe) and replaces
the first run's labels (`judge_answers_store` updates them in place).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from annotate.models import Label
from annotate.templatetags.money import usd
from evaluation.models import JudgeCall, JudgeConversation, JudgeRun


@dataclass(frozen=True)
class LabelsBefore:
    """The judge's labels on some of the responses a new run would judge."""

    responses_labelled: int  # responses with at least one label of the judge
    responses_total: int  # responses the new run judges
    run_ids: tuple[int, ...]  # the judge's earlier runs that wrote them, oldest first

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
    """The judge's labels on the responses `run` judges, written before it; None when there
    are none (a first run, or responses the judge never saw). Three queries."""
    responses = JudgeConversation.objects.filter(run=run).values("response_id")
    labelled = (
        Label.objects.filter(annotator_id=run.config.annotator_id, response_id__in=responses)
        .values("response_id")
        .distinct()
        .count()
    )
    if not labelled:
        return None
    run_ids = (
        JudgeCall.objects.filter(
            conversation__run__config_id=run.config_id,
            conversation__response_id__in=responses,
            label__isnull=False,
        )
        .exclude(conversation__run=run)
        .values_list("conversation__run_id", flat=True)
        .distinct()
        .order_by("conversation__run_id")
    )
    return LabelsBefore(
        responses_labelled=labelled,
        responses_total=JudgeConversation.objects.filter(run=run).count(),
        run_ids=tuple(run_ids),
    )
