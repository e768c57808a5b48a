"""Writes of judge runs: create one, execute it (threads here, or one Celery task per
conversation), persist every answer as soon as it arrives, finish it."""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F, Prefetch
from django.utils import timezone

from annotate.models import Benchmark, Instruction, Label, Question, Response, Subset, System
from annotate.roles import is_admin, is_researcher
from annotate.services.deferred_tasks import task_enqueue_on_commit
from config.celery import app as celery_app
from evaluation.errors import JudgeNotFoundError, JudgePermissionError, JudgeRunError
from evaluation.judges import JudgeBackend
from evaluation.judges.conversation import (
    Answered,
    CallPolicy,
    ConversationWork,
    Event,
    Failed,
    Finished,
    converse,
)
from evaluation.judges.limiter import RateLimiter
from evaluation.judges.prompting import DEFAULT_PROMPT_VERSION, available_prompt_versions
from evaluation.models import (
    ConversationStatus,
    JudgeCall,
    JudgeConfig,
    JudgeConversation,
    JudgeRun,
    RunStatus,
)
from evaluation.services.judge_configs import judge_backend_build, judge_backend_class

_THOUSAND = Decimal(1000)
BATCH_SECONDS = 0.25
_COST_PLACES = Decimal("0.000001")


def _check_may_start(*, user: AbstractBaseUser | None, config: JudgeConfig) -> None:
    """Researchers may run free back-ends; only admins may spend money. None = the console."""
    if user is None:
        return
    if not is_researcher(user):
        raise JudgeNotFoundError("No such page.")
    if judge_backend_class(config=config).spends_money and not is_admin(user):
        raise JudgePermissionError(
            f"Judge {config.name!r} calls a paid API: only an admin may start it."
        )


def _select_instructions(
    *,
    benchmark: Benchmark,
    subset: str | None,
    external_ids: Sequence[str] | None,
    sample: int | None,
    seed: int,
) -> tuple[list[int], str]:
    """Return the chosen instruction ids and a description of the choice."""
    instructions = Instruction.objects.filter(benchmark=benchmark)
    described = "all"
    if subset:
        if subset not in Subset.values:
            raise JudgeRunError(f"Unknown subset {subset!r}: expected easy or hard.")
        instructions = instructions.filter(subset=subset)
        described = f"subset {subset}"
    ids_by_external = dict(instructions.values_list("external_id", "id"))
    if external_ids:
        unknown = [item for item in external_ids if item not in ids_by_external]
        if unknown:
            raise JudgeRunError(
                f"No instruction {', '.join(unknown[:5])} in {benchmark.name}"
                + (f" ({described})." if subset else ".")
            )
        chosen = sorted({ids_by_external[item] for item in external_ids})
        described = f"{len(chosen)} chosen" + (f" from subset {subset}" if subset else "")
    else:
        chosen = sorted(ids_by_external.values())
    if sample is not None:
        if not 1 <= sample <= len(chosen):
            raise JudgeRunError(f"Sample size must be between 1 and {len(chosen)}, not {sample}.")
        chosen = sorted(random.Random(seed).sample(chosen, sample))
        described = f"sample of {sample} (seed {seed}) from {described}"
    return chosen, described


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
    prompt_version: str = DEFAULT_PROMPT_VERSION,
) -> JudgeRun:
    """Create a run of `config` on the responses of `systems` to the chosen instructions.

    Instructions: all of the benchmark, or a subset (easy/hard), or the given external ids,
    optionally narrowed to a seeded random sample. One conversation per existing response.
    """
    _check_may_start(user=user, config=config)
    systems = list(systems)
    if not systems:
        raise JudgeRunError("Choose at least one system.")
    if prompt_version not in available_prompt_versions():
        raise JudgeRunError(f"Unknown prompt version {prompt_version!r}.")
    chosen, described = _select_instructions(
        benchmark=benchmark, subset=subset, external_ids=instruction_ids, sample=sample, seed=seed
    )
    responses = list(
        Response.objects.filter(instruction_id__in=chosen, system__in=systems).values_list(
            "id", flat=True
        )
    )
    if not responses:
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
    return run


def judge_run_get(*, run_id: int) -> JudgeRun:
    try:
        return JudgeRun.objects.select_related("config", "benchmark").get(pk=run_id)
    except JudgeRun.DoesNotExist:
        raise JudgeNotFoundError(f"No judge run {run_id}.") from None


# --- Execution --------------------------------------------------------------------------------

_limiters: dict[tuple[int, int, int], RateLimiter] = {}
_limiters_lock = threading.Lock()


def _limiter_for(config: JudgeConfig) -> RateLimiter:
    """Return this process's limiter for a configuration, shared by its threads and tasks."""
    key = (config.pk, config.requests_per_minute, config.tokens_per_minute)
    with _limiters_lock:
        if key not in _limiters:
            _limiters[key] = RateLimiter(
                requests_per_minute=config.requests_per_minute,
                tokens_per_minute=config.tokens_per_minute,
            )
        return _limiters[key]


def _call_policy(
    config: JudgeConfig, backend: JudgeBackend | None, sleep: Callable[[float], None]
) -> CallPolicy:
    return CallPolicy(
        backend=backend or judge_backend_build(config=config),
        limiter=_limiter_for(config),
        max_retries=config.max_retries,
        max_tokens=config.max_tokens,
        sleep=sleep,
    )


def _works(run: JudgeRun, conversations: Iterable[JudgeConversation]) -> list[ConversationWork]:
    conversations = (
        JudgeConversation.objects.filter(pk__in=[c.pk for c in conversations])
        .select_related("response__instruction")
        .prefetch_related(
            Prefetch(
                "response__instruction__questions",
                queryset=Question.objects.order_by("position"),
            ),
            Prefetch(
                "calls",
                queryset=JudgeCall.objects.only("conversation_id", "question_id", "raw_reply"),
            ),
        )
    )
    works = []
    for conversation in conversations.order_by("pk"):
        instruction = conversation.response.instruction
        works.append(
            ConversationWork(
                conversation_id=conversation.pk,
                protocol=run.protocol,
                input_text=instruction.input_text,
                response_text=conversation.response.text,
                questions=[(q.pk, q.text) for q in instruction.questions.all()],
                answered={call.question_id: call.raw_reply for call in conversation.calls.all()},
            )
        )
    return works


def _cost(config: JudgeConfig, prompt_tokens: int, completion_tokens: int) -> Decimal:
    cost = (
        Decimal(prompt_tokens) * config.price_prompt_per_1k
        + Decimal(completion_tokens) * config.price_completion_per_1k
    ) / _THOUSAND
    return cost.quantize(_COST_PLACES)


def _store_answers(run: JudgeRun, answers: Sequence[Answered]) -> None:
    """Store the calls and labels of answers not stored yet, in a fixed number of queries.

    A question already answered in its conversation (a redelivered task racing the first) keeps
    its first answer and label; the tokens of both calls count, since both were paid for.
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
    Label.objects.bulk_create(
        [
            Label(
                question_id=question_id,
                response_id=response_of[answer.conversation_id],
                annotator_id=annotator_id,
                value=value,
            )
            for answer, question_id, value, _ in rows
        ],
        update_conflicts=True,
        unique_fields=["question", "response", "annotator"],
        update_fields=["value"],
    )
    label_of = {
        (question_id, response_id): pk
        for pk, question_id, response_id in Label.objects.filter(
            annotator_id=annotator_id,
            response_id__in=set(response_of.values()),
            question_id__in={row[1] for row in rows},
        ).values_list("pk", "question_id", "response_id")
    }
    JudgeCall.objects.bulk_create(
        [
            JudgeCall(
                conversation_id=answer.conversation_id,
                question_id=question_id,
                raw_reply=answer.raw_reply,
                parsed=value,
                prompt_version=run.prompt_version,
                prompt_tokens=answer.prompt_tokens if first else 0,
                completion_tokens=answer.completion_tokens if first else 0,
                usage_estimated=answer.usage_estimated,
                latency_ms=answer.latency_ms,
                retries=answer.retries,
                label_id=label_of[(question_id, response_of[answer.conversation_id])],
            )
            for answer, question_id, value, first in rows
        ],
        ignore_conflicts=True,
    )


def _store_ends(ends: Sequence[Failed | Finished]) -> None:
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
    kept_going = [end.conversation_id for end in ends if end.kept_going]
    if kept_going:
        JudgeConversation.objects.filter(pk__in=kept_going).update(
            kept_going_after_unparseable=True
        )


def judge_events_store(*, run: JudgeRun, events: Sequence[Event]) -> None:
    """Persist answers and conversation ends in one transaction; add their tokens and cost."""
    answers = [event for event in events if isinstance(event, Answered)]
    ends = [event for event in events if not isinstance(event, Answered)]
    with transaction.atomic():
        if answers:
            _store_answers(run, answers)
            locked = JudgeRun.objects.select_for_update().get(pk=run.pk)
            locked.prompt_tokens += sum(answer.prompt_tokens for answer in answers)
            locked.completion_tokens += sum(answer.completion_tokens for answer in answers)
            locked.cost_usd = _cost(run.config, locked.prompt_tokens, locked.completion_tokens)
            locked.save(update_fields=["prompt_tokens", "completion_tokens", "cost_usd"])
        if ends:
            _store_ends(ends)


def _mark_started(run: JudgeRun) -> None:
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


def judge_run_finish_if_complete(*, run_id: int) -> JudgeRun:
    """Mark the run done (or done with errors) once no conversation is pending."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=run_id)
        statuses = set(run.conversations.values_list("status", flat=True).distinct())
        if ConversationStatus.PENDING in statuses or run.status == RunStatus.CANCELLED:
            return run
        run.status = RunStatus.FAILED if ConversationStatus.FAILED in statuses else RunStatus.DONE
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "finished_at"])
        return run


def _pause_if_stopped(run: JudgeRun) -> None:
    """A stopped run with questions left waits as pending until it is run again."""
    if run.conversations.filter(status=ConversationStatus.PENDING).exists():
        JudgeRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
            status=RunStatus.PENDING
        )


def judge_run_execute(
    *,
    run_id: int,
    stop: threading.Event | None = None,
    on_progress: Callable[[int], None] | None = None,
    backend: JudgeBackend | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> JudgeRun:
    """Ask every missing question of the run, `config.concurrency` conversations at a time.

    Worker threads only talk to the API; this thread stores each answer the moment it arrives
    (batching whatever has already queued up), so nothing answered is lost on a stop or crash.
    `on_progress(n)` is called with the number of calls stored since the last call.
    """
    run = judge_run_get(run_id=run_id)
    if run.status == RunStatus.CANCELLED:
        raise JudgeRunError(f"Judge run {run.pk} was cancelled.")
    policy = _call_policy(run.config, backend, sleep)
    _mark_started(run)
    works = _works(run, run.conversations.filter(status=ConversationStatus.PENDING))
    # Longest conversations first: its questions are sequential, so one started last would
    # stretch the run's tail while the other workers sit idle.
    works.sort(key=lambda work: len(work.questions) - len(work.answered), reverse=True)
    stop = stop or threading.Event()
    events: queue.Queue[Event] = queue.Queue()
    with ThreadPoolExecutor(
        max_workers=run.config.concurrency, thread_name_prefix=f"judge-run-{run.pk}"
    ) as pool:
        futures = [
            pool.submit(
                converse,
                work,
                policy=policy,
                emit=events.put,
                stop=stop,
                prompt_version=run.prompt_version,
            )
            for work in works
        ]
        try:
            _drain(run, events, futures, on_progress)
        except BaseException:
            stop.set()  # Ctrl-C or a database error: let the workers end after their call
            raise
    for future in futures:
        future.result()  # a bug in a worker surfaces here instead of vanishing
    _pause_if_stopped(run)
    return judge_run_finish_if_complete(run_id=run.pk)


def _drain(run, events: queue.Queue, futures, on_progress) -> None:
    """Store events as they come, gathering those that arrive within BATCH_SECONDS of each
    other into one transaction (fewer commits leave the GIL to the worker threads)."""
    while True:
        try:
            batch = [events.get(timeout=0.05)]
        except queue.Empty:
            if all(future.done() for future in futures) and events.empty():
                return
            continue
        deadline = time.monotonic() + BATCH_SECONDS
        while len(batch) < 500:
            try:
                batch.append(events.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                break
        judge_events_store(run=run, events=batch)
        if on_progress:
            on_progress(sum(len(e.question_ids) for e in batch if isinstance(e, Answered)))


def judge_conversation_execute(
    *, conversation_id: int, backend: JudgeBackend | None = None
) -> JudgeRun | None:
    """Ask one conversation's missing questions in this thread (a Celery task's work).

    Safe to run twice: a finished conversation is skipped, and an answer stored by a concurrent
    duplicate is kept once (unique per conversation and question).
    """
    conversation = (
        JudgeConversation.objects.select_related("run__config").filter(pk=conversation_id).first()
    )
    if conversation is None or conversation.status == ConversationStatus.DONE:
        return None
    run = conversation.run
    if run.status == RunStatus.CANCELLED:
        return run
    policy = _call_policy(run.config, backend, time.sleep)
    (work,) = _works(run, [conversation])
    converse(
        work,
        policy=policy,
        emit=lambda event: judge_events_store(run=run, events=[event]),
        prompt_version=run.prompt_version,
    )
    return judge_run_finish_if_complete(run_id=run.pk)


def judge_run_resume(*, run: JudgeRun, user: AbstractBaseUser | None) -> None:
    """Start a stopped or failed run again (same rights as creating it); only missing work runs."""
    _check_may_start(user=user, config=run.config)
    if run.status == RunStatus.CANCELLED:
        raise JudgeRunError(f"Judge run {run.pk} was cancelled.")
    judge_run_start(run=run)


def judge_run_start(*, run: JudgeRun) -> None:
    """Start the run after this transaction commits: one Celery task per pending conversation
    when tasks go to workers, else one in-process task that runs them concurrently."""
    from evaluation import tasks  # tasks import this module

    if celery_app.conf.task_always_eager:
        task_enqueue_on_commit(task=tasks.judge_run_task, args=(run.pk,))
        return
    _mark_started(run)
    pending = list(
        run.conversations.filter(status=ConversationStatus.PENDING).values_list("pk", flat=True)
    )
    for conversation_id in pending:
        task_enqueue_on_commit(task=tasks.judge_conversation_task, args=(conversation_id,))
