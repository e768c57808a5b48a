"""Writes of judge runs: create one (with its engine run), start or execute it through the
engine, store the answers the engine's calls bring (evaluation.judges.protocol), finish it."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import F, QuerySet
from django.template.defaultfilters import pluralize
from django.utils import timezone

from annotate.engine.bulk import rows_insert
from annotate.engine.errors import EngineCostNotConfirmedError, EngineRunDoneError
from annotate.engine.models import EngineRun
from annotate.engine.models import RunStatus as EngineRunStatus
from annotate.engine.services import (
    AgainWarning,
    RunEstimate,
    engine_run_create,
    engine_run_estimate,
    engine_run_estimate_new,
    engine_run_execute,
    engine_run_start,
)
from annotate.errors import AnnotateError, NotFoundError, PermissionDeniedError, RateLimitedError
from annotate.models import Benchmark, Instruction, Label, Question, Response, System
from annotate.roles import is_admin, is_researcher
from annotate.selectors.benchmarks import responses_missing_refusal
from annotate.selectors.instructions import SelectionError, instructions_select
from evaluation.errors import (
    JudgeNotFoundError,
    JudgePermissionError,
    JudgeReplaceNotConfirmedError,
    JudgeRunBusyError,
    JudgeRunError,
)
from evaluation.judges.conversation import Answered, ConversationWork, Failed, Finished
from evaluation.judges.official import OFFICIAL_PROMPT_VERSION, prompt_version_for
from evaluation.judges.prompting import (
    DEFAULT_PROMPT_VERSION,
    available_prompt_versions,
    load_prompt,
)
from evaluation.judges.request_params import request_params
from evaluation.models import (
    ConversationStatus,
    JudgeCall,
    JudgeConfig,
    JudgeConversation,
    JudgeProtocol,
    JudgeRun,
    RunStatus,
)
from evaluation.selectors.judge_labels import (
    LabelsBefore,
    judge_run_labels_before,
    judge_runs_writing,
)
from evaluation.services.judge_configs import judge_spends_money


def _check_may_start(*, user: AbstractBaseUser | None, config: JudgeConfig) -> None:
    """Researchers may run the offline fake (it bills nobody); only admins may spend money.
    None = the console."""
    if user is None:
        return
    if not is_researcher(user):
        raise JudgeNotFoundError("No such page.")
    if judge_spends_money(config=config) and not is_admin(user):
        raise JudgePermissionError(
            f"Judge {config.name!r} calls a paid API: only an admin may start it."
        )


def _select_instructions(**kwargs) -> tuple[list[int], str]:
    try:
        return instructions_select(**kwargs)
    except SelectionError as error:
        raise JudgeRunError(str(error), field=error.field) from None


def _check_responses_exist(*, systems: list[System], instruction_ids: list[int]) -> None:
    """Refuse a run some chosen system would leave out, as a project refuses it: silently
    judging the others would show the run complete."""
    instructions = Instruction.objects.filter(pk__in=instruction_ids).order_by("position", "id")
    refusal = responses_missing_refusal(
        systems=systems, instructions=list(instructions.only("id", "external_id"))
    )
    if refusal:
        raise JudgeRunError(refusal, field="systems")


@transaction.atomic
def judge_run_create(
    *,
    config: JudgeConfig,
    benchmark: Benchmark,
    systems: Iterable[System],
    user: AbstractBaseUser | None = None,
    subset: str | None = None,
    instruction_ids: Sequence[str] | None = None,
    sample: int | None = None,
    seed: int = 0,
    prompt_version: str | None = None,
    spending_cap_usd: Decimal | None = None,
) -> JudgeRun:
    """Create a run of `config` on the responses of `systems` to the chosen instructions.

    Instructions: all of the benchmark, or a subset (easy/hard), or the given external ids,
    optionally narrowed to a seeded random sample. One conversation per existing response.
    The prompt version defaults to DEFAULT_PROMPT_VERSION; the official protocol always uses
    the official prompt. The engine stops the run before a call would pass `spending_cap_usd`.
    """
    _check_may_start(user=user, config=config)
    systems = list(systems)
    if not systems:
        raise JudgeRunError("Choose at least one system.")
    if config.protocol == JudgeProtocol.OFFICIAL and prompt_version not in (
        None,
        OFFICIAL_PROMPT_VERSION,
    ):
        raise JudgeRunError(
            f"The official protocol uses the prompt {OFFICIAL_PROMPT_VERSION}, "
            f"not {prompt_version!r}."
        )
    prompt_version = prompt_version_for(config.protocol, prompt_version, DEFAULT_PROMPT_VERSION)
    if prompt_version not in available_prompt_versions():
        raise JudgeRunError(f"Unknown prompt version {prompt_version!r}.", field="prompt_version")
    if not load_prompt(prompt_version).supports(config.protocol):
        raise JudgeRunError(
            f"The prompt {prompt_version} has no sections for the {config.protocol} protocol."
        )
    chosen, described = _select_instructions(
        benchmark=benchmark, subset=subset, external_ids=instruction_ids, sample=sample, seed=seed
    )
    _check_responses_exist(systems=systems, instruction_ids=chosen)
    responses = list(
        Response.objects.filter(instruction_id__in=chosen, system__in=systems).values_list(
            "id", flat=True
        )
    )
    if not responses:  # no instruction chosen (an empty subset)
        names = ", ".join(system.name for system in systems)
        raise JudgeRunError(f"No responses of {names} to the chosen instructions of {benchmark}.")
    run = JudgeRun.objects.create(
        config=config,
        benchmark=benchmark,
        protocol=config.protocol,
        prompt_version=prompt_version,
        selection=described,
        created_by=user if user is not None and user.is_authenticated else None,
    )
    run.systems.set(systems)
    if described != "all":
        run.instructions.set(chosen)
    JudgeConversation.objects.bulk_create(
        JudgeConversation(run=run, response_id=response_id) for response_id in responses
    )
    try:
        run.engine_run = engine_run_create(
            kind="judge",
            endpoint=config.endpoint,
            params={
                "judge_run_id": run.pk,
                "prompt_version": prompt_version,
                "request_params": request_params(
                    config.protocol, temperature=config.endpoint.temperature
                ),
            },
            created_by=run.created_by,
            spending_cap_usd=spending_cap_usd,
            description=f"Judge run #{run.pk}: {config.name} on {benchmark.name} ({described})",
        )
    except AnnotateError as error:  # a negative cap, an unset API key: nothing is kept
        # The judge is what the user chose; its endpoint follows from it.
        field = getattr(error, "field", None)
        field = "judge" if field == "endpoint" else field
        raise JudgeRunError(str(error), field=field) from None
    run.save(update_fields=["engine_run"])
    return run


@dataclass(frozen=True)
class JudgeRunEstimate(RunEstimate):
    """A new judge run's estimate, with the judge's labels it would replace."""

    labels_before: LabelsBefore | None = None

    @property
    def replace_warning(self) -> str:
        """What starting it replaces and costs ("" when it replaces nothing)."""
        return self.labels_before.warning(self.cost_usd) if self.labels_before else ""


def judge_run_estimate_new(*, create: Callable[[], JudgeRun]) -> JudgeRunEstimate:
    """Estimate the run `create()` makes, leaving nothing behind (`engine_run_estimate_new`),
    and say which of its responses the judge labelled already."""
    before: list[LabelsBefore | None] = []

    def made() -> EngineRun:
        run = create()
        before.append(judge_run_labels_before(run=run))
        return run.engine_run

    estimate = engine_run_estimate_new(create=made)
    return JudgeRunEstimate(**vars(estimate), labels_before=before[0])


def judge_run_again_warning(*, run: JudgeRun) -> AgainWarning:
    """What starting `run` (new, or again: its missing work) replaces and costs (`text`, ""
    when it overwrites no label of the judge), as the estimate says it
    (`JudgeRunEstimate.replace_warning`), with what a page sends back with "replace" to hold
    it to what it showed (`seen`: `LabelsBefore.seen`, "" when it shows no warning)."""
    before = judge_run_labels_before(run=run)
    if before is None:
        return AgainWarning()
    cost = engine_run_estimate(run=run.engine_run).cost_usd
    return AgainWarning(text=before.warning(cost), seen=before.seen)


def judge_run_check_start(*, run: JudgeRun, replace: bool, seen: str | None = None) -> None:
    """Refuse to start `run` (new, or again) while another run of its judge still writes labels
    on its responses (JudgeRunBusyError, 409), or over labels of its judge unless `replace` says
    so (JudgeReplaceNotConfirmedError, field "replace"): the run asks those questions again,
    paid on a paid endpoint, and overwrites them. With `seen` (what the page or the API caller
    was shown, `LabelsBefore.seen`), `replace` holds only for those labels: others written since
    are asked about again. A resume that only fills in its own missing answers passes.

    Call it in the transaction that makes or starts the run, which a refusal rolls back: it
    locks the judge's row first, so two starts of one judge check one after the other and the
    second sees the first run started."""
    _judge_config_lock(config_id=run.config_id)
    writing = judge_runs_writing(run=run)
    if writing:
        raise JudgeRunBusyError(_busy_refusal(writing))
    if replace and seen is None:
        return
    before = judge_run_labels_before(run=run)
    if before is None or (replace and seen == before.seen):
        return
    warning = before.warning(engine_run_estimate(run=run.engine_run).cost_usd)
    raise JudgeReplaceNotConfirmedError(warning=warning, seen=before.seen, stale=replace)


def _judge_config_lock(*, config_id: int) -> None:
    """Lock the judge's row till the transaction ends. FOR NO KEY UPDATE: the run just made
    holds FOR KEY SHARE on it (its foreign key), which FOR UPDATE would wait for in the other
    start while that one waits for ours (a deadlock)."""
    list(
        JudgeConfig.objects.select_for_update(no_key=True)
        .filter(pk=config_id)
        .values_list("pk", flat=True)
    )


def _busy_refusal(writing: list[tuple[int, str, int]]) -> str:
    runs = ", ".join(
        f"#{pk} ({'running' if status == EngineRunStatus.RUNNING else 'queued'}, {shared} "
        f"response{pluralize(shared)})"
        for pk, status, shared in writing
    )
    plural = "s" if len(writing) > 1 else ""
    return (
        f"Judge run{plural} {runs} of this judge still judge{'' if plural else 's'} responses "
        "this run would: two runs writing the same labels at once would each be paid and leave "
        f"a mix of their answers. Nothing was started: wait for {'them' if plural else 'it'} "
        f"to end (or stop {'them' if plural else 'it'} on {'their' if plural else 'its'} "
        "page), then start this one."
    )


def judge_run_get(*, run_id: int) -> JudgeRun:
    try:
        return JudgeRun.objects.select_related(
            "config__endpoint", "benchmark", "engine_run__endpoint"
        ).get(pk=run_id)
    except JudgeRun.DoesNotExist:
        raise JudgeNotFoundError(f"No judge run {run_id}.") from None


# --- Storing what the engine's calls answered -------------------------------------------------


def judge_works(
    run: JudgeRun, conversations: QuerySet[JudgeConversation]
) -> list[ConversationWork]:
    """Return the work of each conversation, in pk order, from three flat queries.

    Plain rows rather than model instances with prefetches: this runs before the first call is
    sent, so its time adds to the run's wall time whole.
    """
    rows = list(
        conversations.order_by("pk").values_list(
            "pk", "response__text", "response__instruction_id", "response__instruction__input_text"
        )
    )
    conversation_ids = [row[0] for row in rows]
    questions: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for instruction_id, question_id, text in (
        Question.objects.filter(instruction_id__in={row[2] for row in rows})
        .order_by("instruction_id", "position")
        .values_list("instruction_id", "pk", "text")
    ):
        questions[instruction_id].append((question_id, text))
    answered: dict[int, dict[int, str]] = defaultdict(dict)
    for conversation_id, question_id, raw_reply in JudgeCall.objects.filter(
        conversation_id__in=conversation_ids
    ).values_list("conversation_id", "question_id", "raw_reply"):
        answered[conversation_id][question_id] = raw_reply
    return [
        ConversationWork(
            conversation_id=conversation_id,
            protocol=run.protocol,
            input_text=input_text,
            response_text=response_text,
            questions=questions[instruction_id],
            answered=answered[conversation_id],
        )
        for conversation_id, response_text, instruction_id, input_text in rows
    ]


def judge_answers_store(run: JudgeRun, answers: Sequence[Answered]) -> None:
    """Store the labels and answer rows of answers not stored yet, in a fixed number of queries.

    A question already answered in its conversation (a redelivered task racing the first) keeps
    its first answer and label; both calls stay in the engine's accounting, since both were paid.
    A call answering several questions stores its tokens and latency on its first question's row.
    """
    response_of = dict(
        JudgeConversation.objects.filter(
            pk__in={answer.conversation_id for answer in answers}
        ).values_list("pk", "response_id")
    )
    stored = set(
        JudgeCall.objects.filter(
            conversation_id__in=response_of,
            question_id__in={q for a in answers for q in a.question_ids},
        ).values_list("conversation_id", "question_id")
    )
    rows = []  # (answer, question id, value, first question of the call)
    for answer in answers:
        for index, (question_id, value) in enumerate(
            zip(answer.question_ids, answer.parsed, strict=True)
        ):
            key = (answer.conversation_id, question_id)
            if key not in stored:
                stored.add(key)
                rows.append((answer, question_id, value, index == 0))
    if not rows:
        return
    annotator_id = run.config.annotator_id
    now = connection.ops.adapt_datetimefield_value(timezone.now())  # created_at of every row
    rows_insert(
        Label,
        ["question", "response", "annotator", "value", "created_at"],
        [
            (question_id, response_of[answer.conversation_id], annotator_id, value, now)
            for answer, question_id, value, _ in rows
        ],
        on_conflict="(question_id, response_id, annotator_id) DO UPDATE SET value = EXCLUDED.value",
    )
    label_of = {
        (question_id, response_id): pk
        for pk, question_id, response_id in Label.objects.filter(
            annotator_id=annotator_id,
            response_id__in=set(response_of.values()),
            question_id__in={row[1] for row in rows},
        ).values_list("pk", "question_id", "response_id")
    }
    rows_insert(
        JudgeCall,
        [
            "conversation",
            "question",
            "raw_reply",
            "parsed",
            "prompt_version",
            "prompt_tokens",
            "completion_tokens",
            "usage_estimated",
            "latency_ms",
            "retries",
            "engine_call",
            "label",
            "created_at",
        ],
        [
            (
                answer.conversation_id,
                question_id,
                answer.raw_reply,
                value,
                run.prompt_version,
                answer.prompt_tokens if first else 0,
                answer.completion_tokens if first else 0,
                answer.usage_estimated,
                answer.latency_ms if first else 0,
                answer.retries,
                answer.engine_call.pk if answer.engine_call is not None else None,
                label_of[(question_id, response_of[answer.conversation_id])],
                now,
            )
            for answer, question_id, value, first in rows
        ],
        on_conflict="DO NOTHING",
    )


def judge_ends_store(ends: Sequence[Failed | Finished]) -> None:
    now = timezone.now()
    done = [end.conversation_id for end in ends if isinstance(end, Finished)]
    if done:
        JudgeConversation.objects.filter(pk__in=done).update(
            status=ConversationStatus.DONE, error="", updated_at=now
        )
    for end in ends:
        if isinstance(end, Failed):
            JudgeConversation.objects.filter(pk=end.conversation_id).update(
                status=ConversationStatus.FAILED, error=end.error, updated_at=now
            )
    for end in ends:
        if isinstance(end, Finished) and end.not_asked:
            JudgeConversation.objects.filter(pk=end.conversation_id).update(
                questions_not_asked=end.not_asked
            )
    stopped = [end.conversation_id for end in ends if isinstance(end, Finished) and end.not_asked]
    if stopped:
        _unasked_labels_delete(stopped)
    kept_going = [end.conversation_id for end in ends if end.kept_going]
    if kept_going:
        JudgeConversation.objects.filter(pk__in=kept_going).update(
            kept_going_after_unparseable=True
        )


@transaction.atomic
def _unasked_labels_delete(conversation_ids: list[int]) -> None:
    """Delete the judge's labels on the questions a conversation stopped early never asked (the
    official protocol's early stop): there only an earlier run of the judge, which this one
    replaces, can have answered, and the official script's file of this run has no entry for
    them. Kept, they counted in every DRFR beside this run's answers, a ratio of no run. The
    earlier run's calls keep their replies (their label link becomes null)."""
    rows = JudgeConversation.objects.filter(pk__in=conversation_ids).values_list(
        "pk", "run__config__annotator_id", "response_id"
    )
    for conversation_id, annotator_id, response_id in rows:
        asked = JudgeCall.objects.filter(conversation_id=conversation_id).values("question_id")
        Label.objects.filter(annotator_id=annotator_id, response_id=response_id).exclude(
            question_id__in=asked
        ).delete()


def judge_run_mark_started(run: JudgeRun) -> None:
    """Set the run running and put failed conversations back in line (a rerun retries them)."""
    with transaction.atomic():
        JudgeConversation.objects.filter(run=run, status=ConversationStatus.FAILED).update(
            status=ConversationStatus.PENDING, error=""
        )
        JudgeConversation.objects.filter(run=run, status=ConversationStatus.PENDING).update(
            attempts=F("attempts") + 1
        )
        JudgeRun.objects.filter(pk=run.pk).update(
            status=RunStatus.RUNNING,
            started_at=run.started_at or timezone.now(),
            finished_at=None,
        )


def judge_run_on_finish(*, run_id: int, engine_run: EngineRun) -> JudgeRun:
    """The engine run ended (done, failed, stopped or reaped): the judge run takes its status.

    One status for both pages: a judge run is done, failed or stopped exactly when its engine
    run is, so the page never waits on a run nobody works on; its conversations say what is
    left, and running it again asks only that.
    """
    status = _STATUS_OF_ENGINE.get(engine_run.status, RunStatus.FAILED)
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=run_id)
        run.status = status
        run.finished_at = engine_run.finished_at or timezone.now()
        run.save(update_fields=["status", "finished_at"])
        return run


_STATUS_OF_ENGINE = {
    EngineRunStatus.DONE: RunStatus.DONE,
    EngineRunStatus.FAILED: RunStatus.FAILED,
    EngineRunStatus.CANCELLED: RunStatus.CANCELLED,
}


# --- Running: through the engine -------------------------------------------------------------


def judge_run_execute(
    *,
    run_id: int,
    stop: threading.Event | None = None,
    on_progress: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> JudgeRun:
    """Ask every missing question of the run in this thread's engine executor (the console and
    the engine's task use it); `on_progress(n)` counts conversations ended."""
    run = judge_run_get(run_id=run_id)
    engine_run = engine_run_execute(
        run_id=run.engine_run_id, stop=stop, on_progress=on_progress, sleep=sleep
    )
    if engine_run.status == "failed" and engine_run.error and not engine_run.units_failed:
        raise JudgeRunError(engine_run.error)  # the run could not start (a missing API key...)
    return judge_run_get(run_id=run.pk)


def judge_run_resume(*, run: JudgeRun, user: AbstractBaseUser | None) -> None:
    """Start a stopped or failed run again; only missing work runs. (Run again checks first,
    through the engine's `check_again`, that it overwrites no later run's labels unconfirmed.)

    Who may start a run on its engine run's endpoint may (a paid one: only an admin): the run's
    own endpoint, not the one its judge has now (an admin may have moved the judge since).
    """
    judge_run_start(run=run, user=user)


def judge_run_start(*, run: JudgeRun, user: AbstractBaseUser | None = None) -> None:
    """Start the run in the background after this transaction commits (a Celery worker when a
    broker is configured, else a thread of this process); returns at once."""
    try:
        engine_run_start(run=run.engine_run, user=user)
    except (RateLimitedError, EngineCostNotConfirmedError):  # answered as they are (429, 409)
        raise
    except NotFoundError as error:
        raise JudgeNotFoundError(str(error)) from None
    except PermissionDeniedError as error:
        raise JudgePermissionError(str(error)) from None
    except EngineRunDoneError:  # named by the judge run the user asked about
        raise JudgeRunError(f"Judge run {run.pk} is done: nothing left to resume.") from None
    except AnnotateError as error:
        raise JudgeRunError(str(error)) from None
