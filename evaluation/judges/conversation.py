"""Ask one conversation's questions through the engine; report each answer as an event.

Nothing here touches the database: each call is an engine call (stored by the engine), each
answer an event the judge protocol stores, so a stop or a crash loses at most the calls in
flight, and a rerun passes the stored replies back in `ConversationWork.answered` to rebuild the
history and ask only what is missing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from annotate.engine.models import EngineCall
from evaluation.errors import JudgeCallError
from evaluation.judges import prompting as p
from evaluation.judges.official import continues_after, parse_official
from evaluation.judges.parsing import UNKNOWN, parse_answer, parse_numbered_answers


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
    engine_call: EngineCall | None = None


@dataclass(frozen=True)
class Failed:
    conversation_id: int
    error: str
    kept_going: bool


@dataclass(frozen=True)
class Finished:
    conversation_id: int
    kept_going: bool
    not_asked: int = 0  # questions left unasked on purpose (the official protocol's early stop)


Event = Answered | Failed | Finished


@dataclass
class CallPolicy:
    """How the judge's calls are made: `chat(messages)` makes one engine call (limiter,
    retries, storage and accounting are the engine's) and returns the EngineCall;
    `chat(messages, retry=True)` is the same call sent again after a failed one."""

    chat: Callable[..., EngineCall]
    # For the official protocol only, which retries what the engine returns as failed, as the
    # script does: the endpoint's retry budget and the engine's wait before retry n (from 1).
    max_retries: int = 0
    wait_before_retry: Callable[[int], None] = lambda attempt: None


def call_once(policy: CallPolicy, messages: Sequence[Mapping[str, str]]) -> EngineCall:
    """Return the answered call; raise JudgeCallError with the engine's message otherwise.

    A call that failed, was refused or came back empty is never read as an answer.
    """
    call = policy.chat(list(messages))
    if not call.answered:
        raise JudgeCallError(call.error or f"call {call.status}")
    return call


def call_like_the_script(
    policy: CallPolicy, history: list[dict]
) -> tuple[EngineCall, list[EngineCall]]:
    """Call as evaluation.py does, appending each reply to `history` as an assistant turn.

    Return (the answered call, the failed calls before it). The script retries any failed call
    (an HTTP 400 too) with the same messages; a reply whose content is null goes into the
    history as it is (the script appends before it reads) and the call is retried with it. An
    empty string is an answer (unparseable). The engine has already retried what it retries
    (429, 5xx, timeouts); this loop retries the rest, at most the endpoint's max_retries times
    with the engine's waits, then raises JudgeCallError (the script would retry for ever, 20 s
    apart).
    """
    failed: list[EngineCall] = []
    while True:
        call = policy.chat(list(history), retry=bool(failed))
        if call.answered or call.empty_reply:
            history.append({"role": "assistant", "content": call.reply})
            return call, failed
        if call.content_null:
            history.append({"role": "assistant", "content": None})
        failed.append(call)
        if len(failed) > policy.max_retries:
            raise JudgeCallError(
                f"gave up after {policy.max_retries} retries: {call.error or call.status}"
            )
        policy.wait_before_retry(len(failed))


def _answered(work: ConversationWork, ids: list[int], call: EngineCall, parsed) -> Answered:
    return Answered(
        conversation_id=work.conversation_id,
        question_ids=ids,
        raw_reply=call.reply,
        parsed=parsed,
        prompt_tokens=call.prompt_tokens,
        completion_tokens=call.completion_tokens,
        usage_estimated=call.usage_estimated,
        latency_ms=call.latency_ms,
        retries=call.retries,
        engine_call=call,
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
        self.not_asked = 0  # questions left unasked on purpose (official protocol)

    def ask(self, ids: list[int], messages: list[dict[str, str]], many: bool) -> str | None:
        """Ask once (with retries); emit the answer and return the reply, or None if stopped."""
        if self.stop.is_set():
            return None
        if self.unknown_before:
            self.kept_going = True
        call = call_once(self.policy, messages)
        if many:
            parsed = parse_numbered_answers(call.reply, len(self.work.questions))
            parsed = [parsed[i] for i, (qid, _) in enumerate(self.work.questions) if qid in ids]
        else:
            parsed = [parse_answer(call.reply)]
        self.emit(_answered(self.work, ids, call, parsed))
        return call.reply

    def note(self, reply: str) -> None:
        if parse_answer(reply) == UNKNOWN:
            self.unknown_before = True

    def turn(self, index: int, question: str) -> str:
        """Return the user turn asking question number `index` (from 0) of a multi-turn talk."""
        if index == 0:
            work = self.work
            return p.first_turn(
                self.prompt,
                input_text=work.input_text,
                response=work.response_text,
                question=question,
            )
        return p.next_turn(self.prompt, question=question)

    def multi_turn(self) -> bool:
        work, history = self.work, []
        for index, (qid, text) in enumerate(work.questions):
            history.append({"role": "user", "content": self.turn(index, text)})
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

    def official(self) -> bool:
        """Ask as evaluation.py does; after an unparseable answer leave the rest unasked and
        count them in `not_asked`. Return False when stopped.

        A rerun rebuilds the history from the stored answers; null replies retried before an
        answer are not stored as turns, so a conversation stopped half-way and resumed sends
        the history without them (a complete run matches the script byte for byte)."""
        work, history = self.work, []
        for index, (qid, text) in enumerate(work.questions):
            history.append({"role": "user", "content": self.turn(index, text)})
            reply = work.answered.get(qid)
            if reply is None:
                if self.stop.is_set():
                    return False
                reply = self._ask_like_the_script(qid, history)
            else:
                history.append({"role": "assistant", "content": reply})
            if not continues_after(parse_official(reply)):
                self.not_asked = len(work.questions) - index - 1
                return True
        return True

    def _ask_like_the_script(self, qid: int, history: list[dict]) -> str:
        call, failed = call_like_the_script(self.policy, history)
        self.emit(
            Answered(
                conversation_id=self.work.conversation_id,
                question_ids=[qid],
                raw_reply=call.reply,
                parsed=[parse_official(call.reply)],
                prompt_tokens=call.prompt_tokens,
                completion_tokens=call.completion_tokens,
                usage_estimated=call.usage_estimated,
                latency_ms=call.latency_ms,
                retries=len(failed) + call.retries,
                engine_call=call,
            )
        )
        return call.reply

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
    questions are still asked and `kept_going` says so. The `official` protocol stops there, as
    the script does, and Finished.not_asked counts the questions it left.
    """
    conversation = _Conversation(
        work, policy, emit, stop or threading.Event(), p.load_prompt(prompt_version)
    )
    run = {
        p.MULTI_TURN: conversation.multi_turn,
        p.INDEPENDENT: conversation.independent,
        p.ALL_IN_ONE: conversation.all_in_one,
        p.OFFICIAL: conversation.official,
    }[work.protocol]
    try:
        finished = run()
    except JudgeCallError as error:
        emit(Failed(work.conversation_id, str(error), conversation.kept_going))
        return
    if finished:
        emit(Finished(work.conversation_id, conversation.kept_going, conversation.not_asked))
