"""Writes of judge runs: create one, execute it (threads here, or one Celery task per
conversation), persist the answers as they arrive, finish it."""

from __future__ import annotations

import queue
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import F, Model, QuerySet
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
MAX_BATCH = 500
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


def _works(run: JudgeRun, conversations: QuerySet[JudgeConversation]) -> list[ConversationWork]:
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
    now = connection.ops.adapt_datetimefield_value(timezone.now())  # created_at of every row
    _insert_rows(
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
    _insert_rows(
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
                answer.latency_ms,
                answer.retries,
                label_of[(question_id, response_of[answer.conversation_id])],
                now,
            )
            for answer, question_id, value, first in rows
        ],
        on_conflict="DO NOTHING",
    )


def _insert_rows(
    model: type[Model], field_names: Sequence[str], rows: Sequence[tuple], *, on_conflict: str
) -> None:
    """Insert rows of database-ready values with one `INSERT ... ON CONFLICT` statement.

    bulk_create builds a model instance and prepares every field of every row in Python: for
    the judge that cost a third as much CPU as the HTTP calls themselves, on the thread whose
    GIL the workers need. These rows are plain values already (datetimes adapted by the
    caller). ON CONFLICT means the same on PostgreSQL and SQLite, the databases we run on.
    """
    fields = [model._meta.get_field(name) for name in field_names]
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = ", ".join(quote(field.column) for field in fields)
    values = ", ".join(["%s"] * len(fields))
    # Names from model metadata and a clause from this module; the values go as parameters.
    sql = f"INSERT INTO {table} ({columns}) VALUES ({values}) ON CONFLICT {on_conflict}"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


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

    Worker threads only talk to the API; this thread stores their answers every BATCH_SECONDS,
    so nothing answered is lost on a stop (the workers end after their call, and all of it is
    stored) and a crash loses at most the last fraction of a second of answers.
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


def _ended_event(futures: Sequence[Future]) -> threading.Event:
    """Return an event that is set once every future is done.

    Cheaper than `concurrent.futures.wait` at every batch, which takes every future's lock.
    """
    ended, lock, left = threading.Event(), threading.Lock(), [len(futures)]

    def one_done(_future: Future) -> None:
        with lock:
            left[0] -= 1
            if not left[0]:
                ended.set()

    if not futures:
        ended.set()
    for future in futures:
        future.add_done_callback(one_done)
    return ended


def _drain(run, events: queue.Queue, futures, on_progress) -> None:
    """Store what the workers answered every BATCH_SECONDS (at once when they have all ended),
    one transaction per batch of at most MAX_BATCH events.

    This thread sleeps between batches instead of waking for every answer: each wake-up would
    take the GIL from the worker threads, and each batch has a fixed cost in queries.
    """
    ended = _ended_event(futures)
    while True:
        all_ended = ended.wait(BATCH_SECONDS)
        batch = []
        while True:
            try:
                batch.append(events.get_nowait())
            except queue.Empty:
                break
        for start in range(0, len(batch), MAX_BATCH):
            chunk = batch[start : start + MAX_BATCH]
            judge_events_store(run=run, events=chunk)
            if on_progress:
                on_progress(sum(len(e.question_ids) for e in chunk if isinstance(e, Answered)))
        if all_ended and events.empty():
            return


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
    (work,) = _works(run, JudgeConversation.objects.filter(pk=conversation.pk))
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
