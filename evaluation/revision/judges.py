"""The KIWI classifiers and rating judge (paper §4.2, §4.3, §5; appendix A.3-A.5).

A run classifies a study's rated turns with Table 10's prompt (instruction categories, every
turn) or Table 11's (error categories, neutral/bad turns), or judges the test split's turns good
or bad with the A.5 zero-shot prompt or the few-shot prompt whose examples are the k training
turns with the most BM25-similar instructions. Calls go through annotate.revision.llm (the
engine seam); each prediction is stored as it arrives, so a rerun skips finished turns.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import numpy as np
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from annotate.engine.client import JsonText
from annotate.engine.models import Endpoint, EngineRun
from annotate.engine.services.runs import (
    engine_run_check_may_start,
    engine_run_create,
    engine_run_execute,
    engine_run_start,
)
from annotate.errors import AnnotateError
from annotate.revision import llm
from annotate.revision.models import ErrorCategory, InstructionCategory, Study, Turn
from annotate.revision.prompting import Prompt, prompt_file
from annotate.revision.retrieval import BM25Index
from evaluation.errors import JudgeRunError
from evaluation.revision.models import (
    JudgeTask,
    RevisionJudgeRun,
    RevisionPrediction,
    RunStatus,
    ShotMode,
)
from evaluation.revision.report_data import turns_read
from evaluation.stats.revision import split_indices, split_min_items

logger = logging.getLogger(__name__)
PROMPTS = Path(__file__).resolve().parent / "prompts"
PROMPT_NAMES = {
    JudgeTask.INSTRUCTION_CATEGORY: "instruction-category-v1",
    JudgeTask.ERROR_CATEGORY: "error-category-v1",
    ShotMode.ZERO: "rating-judge-zero-shot-v1",
    ShotMode.ONE: "rating-judge-few-shot-v1",
    ShotMode.K: "rating-judge-few-shot-v1",
}
CATEGORIES = {
    JudgeTask.INSTRUCTION_CATEGORY: InstructionCategory.values,
    JudgeTask.ERROR_CATEGORY: ErrorCategory.values,
}


def parse_label(task: str, reply: str) -> str:
    """Return the label a reply names: good/bad for the judge, a category otherwise; "" if none.

    The judge's reply counts by its first word ("good", "bad"; "neutral" is bad, as in §5).
    A category is the longest category name the reply contains, ignoring case.
    """
    text = reply.strip().lower()
    if task == JudgeTask.RATING:
        first = re.match(r"[#*\s]*([a-z]+)", text)
        word = first.group(1) if first else ""
        return {"good": "good", "bad": "bad", "neutral": "bad"}.get(word, "")
    for category in sorted(CATEGORIES[task], key=len, reverse=True):
        if category in text:
            return category
    return ""


def judge_run_create(
    *,
    study: Study,
    task: str,
    mode: str = "",
    shots: int = 0,
    endpoint_name: str = "",
    seed: int = 0,
    user: AbstractBaseUser | None = None,
    now: datetime,
) -> RevisionJudgeRun:
    """Create a run; a rating judge stores its seeded train/dev/test split of the rated turns."""
    if task not in JudgeTask.values:
        raise JudgeRunError(f"unknown task {task!r}: expected one of {', '.join(JudgeTask.values)}")
    split: dict = {}
    if task == JudgeTask.RATING:
        if mode not in ShotMode.values:
            raise JudgeRunError(f"mode must be one of {', '.join(ShotMode.values)}")
        shots = {ShotMode.ZERO: 0, ShotMode.ONE: 1}.get(mode, shots)
        if mode == ShotMode.K and shots < 1:
            raise JudgeRunError("a k-shot judge needs --shots of at least 1")
        split = rating_split(study=study, seed=seed)
        if shots > (trained := len(split["train"])):
            # The prompt would hold every training turn, fewer than k, while the run and Table 5
            # said k-shot (k = shots).
            raise JudgeRunError(
                f"k = {shots} examples, but the split of seed {seed} has only {trained} "
                f"training turns to draw them from: choose k of at most {trained}",
                field="shots",
            )
    else:
        mode, shots = "", 0
    return RevisionJudgeRun.objects.create(
        study=study,
        task=task,
        mode=mode,
        shots=shots,
        endpoint_name=endpoint_name,
        prompt_version=PROMPT_NAMES[mode or task],
        seed=seed,
        split=split,
        created_by=user,
        created_at=now,
    )


def rating_split(*, study: Study, seed: int) -> dict[str, list[int]]:
    """Split the study's rated turns (by id) into train/dev/test as the paper: 888/186/186."""
    ids = turns_read(study=study).turn_id
    if len(ids) < (fewest := split_min_items()):
        raise JudgeRunError(
            f"the study needs at least {fewest} rated turns of finished sessions for a "
            f"train/dev/test split with a test turn; it has {len(ids)}"
        )
    train, dev, test = split_indices(len(ids), np.random.default_rng(seed))
    return {
        name: [int(ids[i]) for i in part]
        for name, part in zip(("train", "dev", "test"), (train, dev, test), strict=True)
    }


def judge_units(run: RevisionJudgeRun) -> list[int]:
    """Return the ids of the turns the run labels, in id order."""
    turns = Turn.objects.filter(session__study=run.study, session__status="finished").exclude(
        rating=""
    )
    if run.task == JudgeTask.RATING:
        return sorted(run.split["test"])
    if run.task == JudgeTask.ERROR_CATEGORY:
        turns = turns.exclude(rating="good")
    return list(turns.order_by("id").values_list("id", flat=True))


def _judge_fields(turn: Turn) -> dict[str, str]:
    return {
        "question": turn.session.question.text,
        "previous_answer": turn.previous_answer,
        "instruction": turn.instruction,
        "answer": turn.answer,
    }


class ExamplePicker:
    """Pick test turns' few-shot examples: the k training turns with the most BM25-similar
    instructions, best first.

    Reads the run's split and builds the BM25 index of the training instructions once; `pick`
    ranks only the test turns asked for, so a run ranks its first calls' turns before sending
    them and the rest while those calls are out. A turn's picks do not depend on which other
    turns are ranked with it.
    """

    def __init__(self, run: RevisionJudgeRun) -> None:
        # The split's turns are the study's: reading them all costs less than an IN list of
        # a thousand ids.
        instructions = dict(
            Turn.objects.filter(session__study_id=run.study_id).values_list("id", "instruction")
        )
        train = sorted(pk for pk in run.split.get("train", []) if pk in instructions)
        self.train_ids = train
        self.test = {pk: instructions[pk] for pk in run.split.get("test", []) if pk in instructions}
        self.shots = run.shots
        self.index = training_index(tuple(instructions[pk] for pk in train))

    def pick(self, turn_ids) -> dict[str, list[int]]:
        """{test turn id (as text, a JSON key): [training turn ids]}, in turn id order; ties
        keep the training turns' id order, and turns with the same instruction get the same
        examples."""
        instructions = list(dict.fromkeys(self.test[turn] for turn in turn_ids))
        ranked = zip(instructions, self.index.top_many(instructions, self.shots), strict=True)
        best = {instruction: [self.train_ids[i] for i in order] for instruction, order in ranked}
        return {str(turn): best[self.test[turn]] for turn in sorted(turn_ids)}


@functools.lru_cache(maxsize=4)
def training_index(instructions: tuple[str, ...]) -> BM25Index:
    """The BM25 index of a split's training instructions, kept for the next runs on the same
    ones (the zero-, one- and k-shot judges of one seed, a run started again, an estimate and
    then the run): 5 ms of the 888 instructions' tokens and columns before a run's first call.
    Keyed on the texts themselves, in order, so an edited instruction or another split gets an
    index of its own."""
    return BM25Index(instructions)


def examples_pick(run: RevisionJudgeRun) -> dict[str, list[int]]:
    """Each test turn's k training turns with the most BM25-similar instructions, best first
    (`ExamplePicker.pick` of every test turn)."""
    picker = ExamplePicker(run)
    return picker.pick(picker.test)


def judge_run_examples_add(*, run_id: int, picks: dict[str, list[int]]) -> None:
    """Add picked examples to those stored on the run, kept in test turn order.

    A run through the engine picks its turns' examples as it loads them (`ExamplePicker`) and
    stores them with its results; the row is locked so that chunks of one run in several
    processes add to each other's picks instead of overwriting them.
    """
    with transaction.atomic():
        stored = (
            RevisionJudgeRun.objects.select_for_update()
            .values_list("examples", flat=True)
            .get(pk=run_id)
        )
        merged = {**picks, **stored}  # a pick stored already stays as it was
        merged = {turn: merged[turn] for turn in sorted(merged, key=int)}
        if merged != stored or list(merged) != list(stored):
            RevisionJudgeRun.objects.filter(pk=run_id).update(examples=merged)


def judge_run_examples_store(*, run: RevisionJudgeRun) -> dict[str, list[int]]:
    """Pick and store a few-shot judge's examples, unless every test turn has them already.

    Called when the run starts, in the background (never in the request that launches it): by
    the offline fake, and when the engine splits the run into Celery chunks, so that the chunks
    share one ranking. A run started again keeps the examples it had. Return the stored
    examples.
    """
    if not run.shots:
        return {}
    if run.examples and all(str(turn) in run.examples for turn in run.split.get("test", [])):
        return run.examples
    run.examples = examples_pick(run)
    RevisionJudgeRun.objects.filter(pk=run.pk).update(examples=run.examples)
    return run.examples


class ExampleBlocks:
    """The few-shot example text of test turns, from picks {test turn id: [training turn ids]}.

    `load(test turn ids)` reads the training turns those test turns use (plain values) and
    formats each training turn's example once; `text(test turn id)` joins its k examples.
    """

    def __init__(self, picks: dict[str, list[int]]) -> None:
        self.picks = picks
        self.example = prompt_file(PROMPTS, "rating-judge-example-v1")
        self.blocks: dict[int, JsonText] = {}

    def load(self, turn_ids) -> None:
        needed = {i for turn in turn_ids for i in self.picks[str(turn)]} - self.blocks.keys()
        rows = Turn.objects.filter(pk__in=needed).values_list(
            "id", "session__question__text", "previous_answer", "instruction", "answer", "rating"
        )
        for pk, question, previous_answer, instruction, answer, rating in rows:
            fields = {  # as _judge_fields(turn), in its order
                "question": question,
                "previous_answer": previous_answer,
                "instruction": instruction,
                "answer": answer,
            }
            rating = "good" if rating == "good" else "bad"
            block = self.example.messages(**fields, rating=rating)[-1]["content"]
            self.blocks[pk] = JsonText(block + "\n\n")  # its JSON form made once, when used

    def text(self, turn_id: int) -> JsonText:
        return JsonText.join([self.blocks[i] for i in self.picks[str(turn_id)]])


def unit_messages(
    task: str, prompt: Prompt, values: dict[str, str], examples: str = ""
) -> list[dict]:
    """The messages of one unit: `values` has the turn's question, previous_answer,
    instruction, answer and comment."""
    if task == JudgeTask.INSTRUCTION_CATEGORY:
        return prompt.messages(question=values["question"], instruction=values["instruction"])
    if task == JudgeTask.ERROR_CATEGORY:
        return prompt.messages(instruction=values["instruction"], comment=values["comment"])
    fields = {
        name: values[name] for name in ("question", "previous_answer", "instruction", "answer")
    }
    return prompt.messages(**fields, examples=examples)  # filled in this order, as always


def _turn_values(turn: Turn) -> dict[str, str]:
    return {**_judge_fields(turn), "comment": turn.comment}


def judge_messages(
    run: RevisionJudgeRun, turn: Turn, prompt: Prompt, blocks: ExampleBlocks | None
) -> list[dict]:
    examples = blocks.text(turn.pk) if blocks is not None and run.shots else ""
    return unit_messages(run.task, prompt, _turn_values(turn), examples)


def judge_unit_execute(
    run: RevisionJudgeRun, turn: Turn, prompt: Prompt, blocks: ExampleBlocks | None
) -> None:
    """Label one turn and store the prediction (a second store of the same turn is ignored)."""
    try:
        reply = llm.chat(
            endpoint_name=run.endpoint_name,
            messages=judge_messages(run, turn, prompt, blocks),
            purpose=run.task,
            unit_key=f"revision-judge-{run.pk}-turn-{turn.pk}",
        )
    except llm.ModelCallError as error:
        RevisionPrediction.objects.get_or_create(run=run, turn=turn, defaults={"error": str(error)})
        return
    RevisionPrediction.objects.get_or_create(
        run=run, turn=turn, defaults={"label": parse_label(run.task, reply), "reply": reply}
    )


def _execute_local(run: RevisionJudgeRun) -> None:
    """The offline fake model: one call after the other, no engine run."""
    done = set(run.predictions.exclude(label="").values_list("turn_id", flat=True))
    run.predictions.filter(label="").delete()
    todo = [t for t in judge_units(run) if t not in done]
    prompt = prompt_file(PROMPTS, run.prompt_version)
    blocks = None
    if run.shots:
        blocks = ExampleBlocks(judge_run_examples_store(run=run))
        blocks.load(todo)
    turns = Turn.objects.select_related("session__question").in_bulk(todo)
    for turn_id in todo:
        judge_unit_execute(run, turns[turn_id], prompt, blocks)


def _engine_run_attach(
    run: RevisionJudgeRun, endpoint: Endpoint, spending_cap_usd: Decimal | None = None
) -> EngineRun:
    """Create the engine run (kind "revision-judge") that makes the run's calls, and link it."""
    try:
        engine_run = engine_run_create(
            kind="revision-judge",
            endpoint=endpoint,
            params={"judge_run": run.pk},
            created_by=run.created_by,
            spending_cap_usd=spending_cap_usd,
            description=f"KIWI {run.task} run #{run.pk} {run.mode} on {run.study.name}".replace(
                "  ", " "
            ),
        )
    except AnnotateError as error:  # a negative cap, an unset API key (field "endpoint")
        raise JudgeRunError(str(error), field=getattr(error, "field", None)) from None
    RevisionJudgeRun.objects.filter(pk=run.pk).update(engine_run=engine_run)
    run.engine_run = engine_run
    return engine_run


@transaction.atomic
def judge_run_prepare(
    *,
    study: Study,
    task: str,
    endpoint: Endpoint,
    user: AbstractBaseUser | None,
    mode: str = "",
    shots: int = 0,
    seed: int = 0,
    spending_cap_usd: Decimal | None = None,
    now: datetime,
) -> RevisionJudgeRun:
    """Create a run on an engine endpoint with its engine run, not started yet.

    The engine's rule decides who may spend: researchers the offline fake (it bills nobody),
    admins any endpoint (user None: the console). The engine stops the run before a call would
    pass `spending_cap_usd`.
    """
    engine_run_check_may_start(user=user, endpoint=endpoint)
    run = judge_run_create(
        study=study,
        task=task,
        mode=mode,
        shots=shots,
        endpoint_name=endpoint.name,
        seed=seed,
        user=user,
        now=now,
    )
    if not judge_units(run):
        raise JudgeRunError(_NOTHING_TO_LABEL[task])
    _engine_run_attach(run, endpoint, spending_cap_usd)
    return run


@transaction.atomic
def judge_run_launch(*, user: AbstractBaseUser, **arguments) -> RevisionJudgeRun:
    """Create a run as `judge_run_prepare` does (the same keyword arguments) and start it in
    the background; return at once.

    The run starts once this transaction commits (a Celery worker, else a thread), never in
    the caller; its engine run's page shows the progress.
    """
    run = judge_run_prepare(user=user, **arguments)
    engine_run_start(run=run.engine_run, user=user)
    return run


_NOTHING_TO_LABEL = {
    JudgeTask.INSTRUCTION_CATEGORY: "the study has no rated turn of a finished session to classify",
    JudgeTask.ERROR_CATEGORY: "the study has no neutral or bad turn of a finished session",
    JudgeTask.RATING: "the test split is empty",
}


def judge_run_on_start(*, run_id: int) -> None:
    """The engine is about to start the run's calls: mark it running.

    Its examples are picked as its units are loaded, not here: the BM25 ranking of every test
    turn came before the first call.
    """
    RevisionJudgeRun.objects.filter(pk=run_id).update(
        status=RunStatus.RUNNING, error="", finished_at=None
    )


def judge_run_on_finish(*, run_id: int, engine_run: EngineRun) -> None:
    """The engine run ended: the judge run is done with it, or failed with its reason."""
    done = engine_run.status == "done"
    RevisionJudgeRun.objects.filter(pk=run_id).update(
        status=RunStatus.DONE if done else RunStatus.FAILED,
        error="" if done else (engine_run.error or engine_run.status),
        finished_at=engine_run.finished_at or timezone.now(),
    )


def _execute_engine(run: RevisionJudgeRun, on_progress: Callable[[int], None] | None) -> str:
    """Through the engine (limiter, retries, concurrency, cost); return its error, if any."""
    try:
        endpoint = Endpoint.objects.get(name=run.endpoint_name)
    except Endpoint.DoesNotExist:
        raise JudgeRunError(f"no engine endpoint is named {run.endpoint_name!r}") from None
    engine_run = run.engine_run or _engine_run_attach(run, endpoint)
    engine_run = engine_run_execute(run_id=engine_run.pk, on_progress=on_progress)
    return "" if engine_run.status == "done" else engine_run.error or engine_run.status


def judge_run_execute(
    *, run_id: int, on_progress: Callable[[int], None] | None = None
) -> RevisionJudgeRun:
    """Label every unit of the run not labelled yet; the run ends done, or failed with a reason.

    `on_progress(ended)` is the engine's (turns ended since the last call); the offline fake,
    which has no engine run, never calls it.
    """
    run = RevisionJudgeRun.objects.select_related("study", "engine_run").get(pk=run_id)
    RevisionJudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    try:
        error = _execute_engine(run, on_progress) if run.endpoint_name else ""
        if not run.endpoint_name:
            _execute_local(run)
    except Exception as exc:
        logger.exception("revision judge run %s failed", run.pk)
        RevisionJudgeRun.objects.filter(pk=run.pk).update(
            status=RunStatus.FAILED, error=str(exc)[:2000], finished_at=timezone.now()
        )
        raise
    failed = run.predictions.exclude(error="").count()
    if failed and not error:
        error = f"{failed} model calls failed; run it again to retry them"
    RevisionJudgeRun.objects.filter(pk=run.pk).update(
        status=RunStatus.FAILED if error else RunStatus.DONE,
        error=error,
        finished_at=timezone.now(),
    )
    run.refresh_from_db()
    return run
