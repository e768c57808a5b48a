"""The engine protocol of the KIWI classifiers and judge (run kind "revision-judge").

One unit per turn of a RevisionJudgeRun. A few-shot judge's examples are picked by BM25 once,
when the run starts (`on_start`, in the background), and stored on the run; `load` reads the
slice's turns and the training turns their examples name (plain values); each worker thread
builds its unit's prompt text just before its call, so the first calls go out without waiting
for 186 prompts of 61 kB. `store` writes the parsed predictions in the engine's transaction.
docs/engine.md has the contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from annotate.engine.bulk import rows_insert
from annotate.engine.protocols import RunContext, UnitResult
from annotate.revision.models import Turn
from annotate.revision.prompting import Prompt
from evaluation.revision import judges
from evaluation.revision.models import RevisionJudgeRun, RevisionPrediction


@dataclass(frozen=True)
class JudgeWork:
    """One unit's loaded work; its messages are built in the worker thread that sends them."""

    task: str
    prompt: Prompt
    values: dict[str, str]
    blocks: judges.ExampleBlocks | None
    turn_id: int

    def messages(self) -> list[dict]:
        examples = self.blocks.text(self.turn_id) if self.blocks is not None else ""
        return judges.unit_messages(self.task, self.prompt, self.values, examples)


def _judge(run) -> RevisionJudgeRun:
    return RevisionJudgeRun.objects.select_related("study").get(pk=run.params["judge_run"])


def _turn_id(key: str) -> int:
    return int(key.rsplit(":turn", 1)[1])


class RevisionJudgeProtocol:
    """Label every unit turn of the judge run named by run.params["judge_run"]."""

    def __init__(self) -> None:
        # The engine loads a run's units in slices; each training turn's example is formatted
        # once per run.
        self._blocks: dict[int, judges.ExampleBlocks] = {}
        self._tasks: dict[int, str] = {}  # judge run id -> its task, read once per run

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
        ids = [_turn_id(key) for key in keys]
        blocks = None
        if judge.shots:
            picks = judge.examples
            if not all(str(turn) in picks for turn in ids):  # not started (an estimate)
                picks = judges.examples_pick(judge)
            blocks = self._blocks.get(judge.pk)
            if blocks is None or blocks.picks != picks:
                blocks = judges.ExampleBlocks(picks)
                self._blocks = {judge.pk: blocks}  # the latest run's only: no growth
            blocks.load(ids)
        rows = Turn.objects.filter(pk__in=ids).values_list(
            "id", "session__question__text", "previous_answer", "instruction", "answer", "comment"
        )
        values = {
            pk: {
                "question": question,
                "previous_answer": previous_answer,
                "instruction": instruction,
                "answer": answer,
                "comment": comment,
            }
            for pk, question, previous_answer, instruction, answer, comment in rows
        }
        return {
            key: JudgeWork(judge.task, prompt, values[turn], blocks, turn)
            for key, turn in zip(keys, ids, strict=True)
        }

    def execute(self, run, unit_key: str, ctx: RunContext) -> str:
        work: JudgeWork = ctx.work
        return ctx.chat(work.messages(), purpose=work.task).reply

    def store(self, run, results: list[UnitResult]) -> None:
        """Write the batch's predictions with one statement (replacing earlier failed or unread
        ones). It runs in the engine's writer, between the workers' calls: no per-row model
        work and no query for the judge run on every batch."""
        judge_id = run.params["judge_run"]
        task = self._tasks.get(judge_id)
        if task is None:
            task = self._tasks[judge_id] = _judge(run).task
        rows = [
            (judge_id, _turn_id(result.key), judges.parse_label(task, result.value or ""),
             result.value or "", "")
            for result in results
            if result.finished and not result.failed
        ]  # fmt: skip
        rows_insert(
            RevisionPrediction,
            ["run", "turn", "label", "reply", "error"],
            rows,
            on_conflict="(run_id, turn_id) DO UPDATE SET label = excluded.label, "
            "reply = excluded.reply, error = excluded.error",
        )
