"""The engine protocol of the KIWI classifiers and judge (run kind "revision-judge").

One unit per turn of a RevisionJudgeRun. `load` reads the slice's turns and, for a few-shot
judge, ranks their examples by BM25 (the index of the training instructions built once per
run) unless the run has them stored, then reads the training turns those examples name (plain
values). The engine loads the first calls' units before sending and the rest while those calls
are out, so only the first slice is ranked before the first call; the picks are stored on the
run with the first batch of results. Split into Celery chunks, the run picks every example once
when it is dispatched (`on_dispatch`), for all chunks. Each worker thread builds its unit's
prompt text just before its call; `estimate` counts the same text for an estimate. `store`
writes the parsed predictions in the engine's transaction. docs/engine.md has the contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.urls import reverse

from annotate.engine.bulk import rows_insert
from annotate.engine.client import estimate_prompt_tokens
from annotate.engine.protocols import RunContext, UnitEstimate, UnitResult
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


@dataclass
class _Examples:
    """A few-shot judge run's examples in one execution: the blocks its units read, the
    picker (built on the first pick the run has not stored) and the picks not stored yet."""

    blocks: judges.ExampleBlocks
    picker: judges.ExamplePicker | None = None
    unsaved: dict[str, list[int]] = field(default_factory=dict)


def _judge(run) -> RevisionJudgeRun:
    return RevisionJudgeRun.objects.select_related("study").get(pk=run.params["judge_run"])


def _turn_id(key: str) -> int:
    return int(key.rsplit(":turn", 1)[1])


class RevisionJudgeProtocol:
    """Label every unit turn of the judge run named by run.params["judge_run"]."""

    unit_name = "turns"

    def __init__(self) -> None:
        self._examples: dict[int, _Examples] = {}  # the latest judge run's only: no growth
        self._tasks: dict[int, str] = {}  # judge run id -> its task, read once per run

    def units(self, run) -> list[str]:
        judge = _judge(run)
        prefix = f"revision-judge:{judge.pk}:{judge.prompt_version}"
        return [f"{prefix}:turn{turn_id}" for turn_id in judges.judge_units(judge)]

    def on_start(self, run) -> None:
        judges.judge_run_on_start(run_id=run.params["judge_run"])

    def on_dispatch(self, run) -> None:
        judges.judge_run_examples_store(run=_judge(run))

    def on_finish(self, run) -> None:
        judges.judge_run_on_finish(run_id=run.params["judge_run"], engine_run=run)

    def title(self, run) -> str:
        """What the run page calls this engine run: the study's own run, by its number."""
        judge = (
            RevisionJudgeRun.objects.select_related("study")
            .filter(pk=run.params["judge_run"])
            .first()
        )
        if judge is None:
            return ""
        return f"{judge.get_task_display()}: run #{judge.pk} of {judge.study.name}"

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
        blocks = self._example_blocks(judge, ids) if judge.shots else None
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

    def _example_blocks(self, judge: RevisionJudgeRun, ids: list[int]) -> judges.ExampleBlocks:
        """The run's example blocks, holding those of `ids`: their stored picks, else picked
        now and stored with the next batch of results (`_examples_save`)."""
        examples = self._examples.get(judge.pk)
        if examples is None:
            examples = _Examples(judges.ExampleBlocks(dict(judge.examples)))
            self._examples = {judge.pk: examples}
        missing = [turn for turn in ids if str(turn) not in examples.blocks.picks]
        if missing:
            if examples.picker is None:
                examples.picker = judges.ExamplePicker(judge)
            picks = examples.picker.pick(missing)
            examples.unsaved.update(picks)
            examples.blocks.picks.update(picks)  # new keys: workers read only theirs
        examples.blocks.load(ids)
        return examples.blocks

    def _examples_save(self, judge_id: int) -> None:
        examples = self._examples.get(judge_id)
        if examples is not None and examples.unsaved:
            judges.judge_run_examples_add(run_id=judge_id, picks=examples.unsaved)
            examples.unsaved = {}

    def estimate(self, run, unit_key: str, work: JudgeWork) -> UnitEstimate:
        """One call a turn, its prompt (few-shot examples included) counted as a sent one."""
        return UnitEstimate(calls=1, prompt_tokens=estimate_prompt_tokens(work.messages()))

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
        self._examples_save(judge_id)
