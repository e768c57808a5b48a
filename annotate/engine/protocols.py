"""What a run kind (a protocol) provides, and the registry that finds it by kind.

A protocol is a class named in the setting ENGINE_PROTOCOLS = {kind: "dotted.path.Class"}, so
the engine never imports the apps that use it. See docs/engine.md for a worked example.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from annotate.engine.errors import EngineRunError

if TYPE_CHECKING:
    from annotate.engine.client import RetryPolicy
    from annotate.engine.models import EngineCall, EngineRun


class UnitFailed(Exception):  # noqa: N818 - a signal from a protocol, not a programming error
    """Raised by a protocol's execute (or by ctx.chat) to fail one unit with a message.

    `value` reaches the protocol's store() as the failed result's value.
    """

    def __init__(self, message: str, *, value: Any = None) -> None:
        super().__init__(message)
        self.value = value


@dataclass(frozen=True)
class UnitEstimate:
    """What one unit will cost at most: its calls and their prompts' tokens (estimated)."""

    calls: int
    prompt_tokens: int
    completion_tokens: int | None = None  # None: the endpoint's max_tokens, else a default


@dataclass
class UnitResult:
    """What one unit came to, handed to the protocol's `store` with its calls already saved."""

    key: str
    calls: list[EngineCall] = field(default_factory=list)
    value: Any = None
    error: str = ""
    finished: bool = True  # False: stopped before the end, the unit stays pending

    @property
    def failed(self) -> bool:
        return bool(self.error)


class RunProtocol(Protocol):
    """A run kind. Only `units` and `execute` are required; see docs/engine.md."""

    def units(self, run: EngineRun) -> list[str]:
        """Return the content keys of every unit of the run (stable across reruns)."""
        ...

    def execute(self, run: EngineRun, unit_key: str, ctx: RunContext) -> Any:
        """Do one unit in a worker thread through ctx.chat; return a value for `store`."""
        ...


class RunContext:
    """What a protocol's execute gets: the unit's loaded work and a way to make calls.

    `chat` sends through the endpoint's limiter and retries and returns the EngineCall (saved by
    the engine together with the unit's result). A call that ends in error fails the unit
    (UnitFailed) unless `allow_error=True`.
    """

    def __init__(
        self,
        *,
        run: EngineRun,
        unit_key: str,
        work: Any,
        send: Callable[..., EngineCall],
        stop: threading.Event,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.run, self.unit_key, self.work = run, unit_key, work
        self.calls: list[EngineCall] = []
        self._send, self._stop = send, stop
        self._policy = policy

    @property
    def max_retries(self) -> int:
        """The endpoint's retry budget, for a protocol that must retry what the engine does not
        (a reference script that retries every failed call)."""
        return self._policy.max_retries if self._policy else 0

    def wait_before_retry(self, attempt: int) -> None:
        """Wait as the engine waits before its retry number `attempt` (from 1): the endpoint's
        retry policy (exponential backoff with jitter, its injectable sleep)."""
        if self._policy is not None:
            self._policy.sleep(self._policy.backoff(attempt, None))

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def stop_event(self) -> threading.Event:
        """Set when the run is stopping (for code that waits on an Event)."""
        return self._stop

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        purpose: str = "",
        params: Mapping[str, Any] | None = None,
        allow_error: bool = False,
    ) -> EngineCall:
        if self._stop.is_set():
            raise UnitStopped
        call = self._send(messages=messages, unit_key=self.unit_key, purpose=purpose, params=params)
        self.calls.append(call)
        if call.status == "error" and not allow_error:
            raise UnitFailed(call.error)
        return call


class UnitStopped(Exception):  # noqa: N818 - control flow: the run was asked to stop
    """The run is stopping: the unit stays pending for the next start."""


@cache
def _protocol_class(path: str) -> type:
    return import_string(path)


def protocol_for(kind: str) -> RunProtocol:
    """Return a protocol instance for a run kind, from the ENGINE_PROTOCOLS setting."""
    path = settings.ENGINE_PROTOCOLS.get(kind)
    if not path:
        raise EngineRunError(
            f"Unknown run kind {kind!r}: expected one of {', '.join(settings.ENGINE_PROTOCOLS)}."
        )
    try:
        return _protocol_class(path)()
    except ImportError as error:
        raise EngineRunError(f"Cannot load the protocol of {kind!r} ({path}): {error}") from None
