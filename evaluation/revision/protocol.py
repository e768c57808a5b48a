"""The engine protocol of the KIWI classifiers and judge (run kind "revision-judge").

One unit per turn of a RevisionJudgeRun; the prompts are built in `load` (one read for all
units, few-shot examples picked by BM25 there), worker threads only call the model, and `store`
writes the parsed predictions in the engine's transaction. docs/engine.md has the contract.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from annotate.engine.protocols import RunContext, UnitResult
from annotate.revision.models import Turn
from evaluation.revision import judges
from evaluation.revision.models import RevisionJudgeRun, RevisionPrediction


def _judge(run) -> RevisionJudgeRun:
    return RevisionJudgeRun.objects.select_related("study").get(pk=run.params["judge_run"])


def _turn_id(key: str) -> int:
    return int(key.rsplit(":turn", 1)[1])


class RevisionJudgeProtocol:
    """Label every unit turn of the judge run named by run.params["judge_run"]."""

    def __init__(self) -> None:
        # The engine loads a run's units in slices; the few-shot index is built once per run.
        self._pickers: dict[int, judges.ShotPicker] = {}

    def units(self, run) -> list[str]:
        judge = _judge(run)
        prefix = f"revision-judge:{judge.pk}:{judge.prompt_version}"
        return [f"{prefix}:turn{turn_id}" for turn_id in judges.judge_units(judge)]

    def on_start(self, run) -> None:
        judges.judge_run_on_start(run_id=run.params["judge_run"])

    def on_finish(self, run) -> None:
        judges.judge_run_on_finish(run_id=run.params["judge_run"], engine_run=run)

    def results_url(self, run) -> str:
        """Where the run's labels are read: the study's report ("" once the judge run is deleted)."""
        study_id = (
            RevisionJudgeRun.objects.filter(pk=run.params["judge_run"])
            .values_list("study_id", flat=True)
            .first()
        )
        return reverse("revision-reports:report", args=[study_id]) if study_id else ""

    def done_units(self, run, keys) -> set[str]:
        done = set(
            RevisionPrediction.objects.filter(run_id=run.params["judge_run"])
            .exclude(label="")
            .values_list("turn_id", flat=True)
        )
        return {key for key in keys if _turn_id(key) in done}

    def load(self, run, keys) -> dict[str, Any]:
        judge = _judge(run)
        prompt = judges.prompt_file(judges.PROMPTS, judge.prompt_version)
        picker = None
        if judge.shots:
            picker = self._pickers.get(judge.pk) or judges.ShotPicker(judge)
            self._pickers[judge.pk] = picker
        turns = Turn.objects.select_related("session__question").in_bulk(
            [_turn_id(k) for k in keys]
        )
        if picker is not None:
            picker.prepare([turn.instruction for turn in turns.values()])
        return {
            key: (judge.task, judges.judge_messages(judge, turns[_turn_id(key)], prompt, picker))
            for key in keys
        }

    def execute(self, run, unit_key: str, ctx: RunContext) -> str:
        task, messages = ctx.work
        return ctx.chat(messages, purpose=task).reply

    def store(self, run, results: list[UnitResult]) -> None:
        """Write the batch's predictions at once (replacing earlier failed or unread ones)."""
        judge = _judge(run)
        rows = [
            RevisionPrediction(
                run=judge,
                turn_id=_turn_id(result.key),
                label=judges.parse_label(judge.task, result.value or ""),
                reply=result.value or "",
            )
            for result in results
            if result.finished and not result.failed
        ]
        RevisionPrediction.objects.filter(
            run=judge, turn_id__in=[row.turn_id for row in rows]
        ).delete()
        RevisionPrediction.objects.bulk_create(rows)
