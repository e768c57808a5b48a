"""Ask one conversation's questions with retries and rate limits; report each answer as an event.

Nothing here touches the database: the caller persists the events (at once, one by one), so a
stop or a crash loses at most the call in flight, and a rerun passes the stored replies back in
`ConversationWork.answered` to rebuild the history and ask only what is missing.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from evaluation.errors import JudgeCallError, JudgeTransientError
from evaluation.judges import ChatReply, JudgeBackend, estimate_prompt_tokens
from evaluation.judges import prompting as p
from evaluation.judges.limiter import RateLimiter
from evaluation.judges.parsing import UNKNOWN, parse_answer, parse_numbered_answers

MAX_BACKOFF_SECONDS = 60.0
MAX_RETRY_AFTER_SECONDS = 300.0


@dataclass(frozen=True)
class ConversationWork:
    conversation_id: int
    protocol: str
    input_text: str
    response_text: str
    questions: Sequence[tuple[int, str]]  # (question id, text), in position order
    answered: Mapping[int, str] = field(default_factory=dict)  # question id -> stored raw reply


@dataclass(frozen=True)
class Answered:
    """One call answered: `parsed[i]` is the label for `question_ids[i]`."""

    conversation_id: int
    question_ids: list[int]
    raw_reply: str
    parsed: list[int]
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool
    latency_ms: int
    retries: int


@dataclass(frozen=True)
class Failed:
    conversation_id: int
    error: str
    kept_going: bool


@dataclass(frozen=True)
class Finished:
    conversation_id: int
    kept_going: bool


Event = Answered | Failed | Finished


@dataclass
class CallPolicy:
    """How calls are made: the back-end, shared limiter, retry budget, and injectable time."""

    backend: JudgeBackend
    limiter: RateLimiter
    max_retries: int = 5
    max_tokens: int = 16
    backoff_base: float = 1.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Return the wait before retry number `attempt` (from 1): the server's, else exponential."""
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER_SECONDS)
        ceiling = min(MAX_BACKOFF_SECONDS, self.backoff_base * 2 ** (attempt - 1))
        return ceiling * (0.5 + self.rng.random() / 2)


def call_with_retries(
    policy: CallPolicy, messages: Sequence[Mapping[str, str]]
) -> tuple[ChatReply, int, int]:
    """Return (reply, retries used, latency ms of the successful attempt).

    Retries only JudgeTransientError, at most policy.max_retries times; JudgeRejectedError and
    the last transient error propagate.
    """
    estimate = estimate_prompt_tokens(messages) + policy.max_tokens
    attempt = 0
    while True:
        policy.limiter.acquire(estimate)
        started = time.monotonic()
        try:
            reply = policy.backend.chat(messages)
        except JudgeTransientError as error:
            attempt += 1
            if attempt > policy.max_retries:
                raise JudgeTransientError(
                    f"gave up after {policy.max_retries} retries: {error}"
                ) from error
            policy.sleep(policy.backoff(attempt, error.retry_after))
            continue
        latency_ms = int((time.monotonic() - started) * 1000)
        policy.limiter.settle(
            estimated=estimate, actual=reply.prompt_tokens + reply.completion_tokens
        )
        return reply, attempt, latency_ms


def _answered(work: ConversationWork, ids: list[int], reply, retries, latency, parsed) -> Answered:
    return Answered(
        conversation_id=work.conversation_id,
        question_ids=ids,
        raw_reply=reply.text,
        parsed=parsed,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        usage_estimated=reply.usage_estimated,
        latency_ms=latency,
        retries=retries,
    )


class _Conversation:
    def __init__(self, work, policy, emit, stop, prompt):
        self.work, self.policy, self.emit, self.stop, self.prompt = (
            work,
            policy,
            emit,
            stop,
            prompt,
        )
        self.kept_going = False
        self.unknown_before = False  # an earlier answer was UNKNOWN

    def ask(self, ids: list[int], messages: list[dict[str, str]], many: bool) -> str | None:
        """Ask once (with retries); emit the answer and return the reply, or None if stopped."""
        if self.stop.is_set():
            return None
        if self.unknown_before:
            self.kept_going = True
        reply, retries, latency = call_with_retries(self.policy, messages)
        if many:
            parsed = parse_numbered_answers(reply.text, len(self.work.questions))
            parsed = [parsed[i] for i, (qid, _) in enumerate(self.work.questions) if qid in ids]
        else:
            parsed = [parse_answer(reply.text)]
        self.emit(_answered(self.work, ids, reply, retries, latency, parsed))
        return reply.text

    def note(self, reply: str) -> None:
        if parse_answer(reply) == UNKNOWN:
            self.unknown_before = True

    def multi_turn(self) -> bool:
        work, history = self.work, []
        for index, (qid, text) in enumerate(work.questions):
            if index == 0:
                content = p.first_turn(
                    self.prompt,
                    input_text=work.input_text,
                    response=work.response_text,
                    question=text,
                )
            else:
                content = p.next_turn(self.prompt, question=text)
            history.append({"role": "user", "content": content})
            reply = work.answered.get(qid)
            if reply is None:
                reply = self.ask([qid], list(history), many=False)
                if reply is None:
                    return False
            self.note(reply)
            history.append({"role": "assistant", "content": reply})
        return True

    def independent(self) -> bool:
        work = self.work
        for qid, text in work.questions:
            if qid in work.answered:
                self.note(work.answered[qid])
                continue
            content = p.first_turn(
                self.prompt, input_text=work.input_text, response=work.response_text, question=text
            )
            reply = self.ask([qid], [{"role": "user", "content": content}], many=False)
            if reply is None:
                return False
            self.note(reply)
        return True

    def all_in_one(self) -> bool:
        work = self.work
        missing = [qid for qid, _ in work.questions if qid not in work.answered]
        if not missing:
            return True
        content = p.all_in_one_turn(
            self.prompt,
            input_text=work.input_text,
            response=work.response_text,
            questions=[text for _, text in work.questions],
        )
        return self.ask(missing, [{"role": "user", "content": content}], many=True) is not None


def converse(
    work: ConversationWork,
    *,
    policy: CallPolicy,
    emit: Callable[[Event], None],
    stop: threading.Event | None = None,
    prompt_version: str = p.DEFAULT_PROMPT_VERSION,
) -> None:
    """Ask what `work` still misses, emitting Answered per call, then Finished or Failed.

    Emits nothing more if `stop` is set between calls (the conversation stays unfinished).
    An UNKNOWN answer does not end the conversation (the official script stops there); later
    questions are still asked and `kept_going` says so.
    """
    conversation = _Conversation(
        work, policy, emit, stop or threading.Event(), p.load_prompt(prompt_version)
    )
    run = {
        p.MULTI_TURN: conversation.multi_turn,
        p.INDEPENDENT: conversation.independent,
        p.ALL_IN_ONE: conversation.all_in_one,
    }[work.protocol]
    try:
        finished = run()
    except JudgeCallError as error:
        emit(Failed(work.conversation_id, str(error), conversation.kept_going))
        return
    if finished:
        emit(Finished(work.conversation_id, conversation.kept_going))
