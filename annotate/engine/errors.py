"""Errors of the model engine."""

from decimal import Decimal

from annotate.errors import AnnotateError, NotFoundError, PermissionDeniedError


class EngineError(AnnotateError):
    """An endpoint or run cannot be used or started as asked; nothing was written."""


class EndpointError(EngineError):
    """An endpoint's settings are invalid (unknown API-key variable, bad number...).

    `field` names the setting at fault (None: none in particular) and `reason` says what is
    wrong with it, so the form shows it beside that field and the command names its option;
    the message is "Field 'field': reason".
    """

    def __init__(self, reason: str, *, field: str | None = None) -> None:
        self.field, self.reason = field, reason
        super().__init__(f"Field '{field}': {reason}" if field else reason)


class EndpointNameTakenError(EndpointError):
    """The name given is an existing endpoint's (in any capitals): `endpoint` is that one, so
    the page can link to it."""

    def __init__(self, reason: str, *, endpoint) -> None:
        self.endpoint = endpoint
        super().__init__(reason, field="name")


class EngineRunError(EngineError):
    """A run cannot be created, started or estimated as asked; `field` names the input at fault
    (None: the values together), so a form shows the message beside it. `page_message` is how
    a page says it where the message names an API field the page shows as a form's box
    (default: the message). `http_status` overrides the class's (a protocol's refusal that is
    a conflict with what ran meanwhile, 409, rather than bad input)."""

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        page_message: str | None = None,
        http_status: int | None = None,
    ) -> None:
        self.field = field
        self.page_message = page_message or message
        if http_status is not None:
            self.http_status = http_status
        super().__init__(message)


class EngineRunDoneError(EngineRunError):
    """Run again was asked of a done run that has nothing left to do (a conflict with its state,
    not bad input); nothing was changed."""

    http_status = 409

    def __init__(self, run_id: int) -> None:
        super().__init__(f"Run {run_id} is done: nothing left to resume.")


class EngineCostNotConfirmedError(EngineRunError):
    """A run on an endpoint that spends money was started or run again without confirming what
    it would cost now (no total sent, or one the estimate no longer gives, its prices edited
    meanwhile); nothing was started. `total` is the cost now, when known."""

    http_status = 409

    def __init__(self, message: str, *, total: Decimal | None = None) -> None:
        self.total = total
        super().__init__(message)


class EngineStartRepeatedError(EngineRunError):
    """A confirmed paid Start sent again at once (a double click): the first one made the run,
    this one made nothing (annotate.engine.pages)."""

    http_status = 409


class EngineRunBusyError(EngineRunError):
    """Another run still writes what this one would (a judge's labels: its protocol's
    `check_again`); nothing was started (a conflict with what runs, not bad input)."""

    http_status = 409


class EngineRunEndedError(EngineRunError):
    """Stop was asked of a run that has ended already (a conflict with its state, not bad
    input); nothing was changed."""

    http_status = 409

    def __init__(self, run_id: int, status: str) -> None:
        super().__init__(f"Run {run_id} has ended ({status}): there is nothing to stop.")


class EngineNothingToDoError(EngineRunError):
    """A new run would call nothing: every unit it would do is done already. No run was made
    (a conflict with what is stored, not bad input)."""

    http_status = 409


class EngineChunkLeasedError(EngineError):
    """Another delivery of a chunk's task holds its lease and beats (or this one lost it): this
    one must send no call. `retry_in`: seconds after which that lease would be stale if it
    stopped beating, when the task should look again."""

    def __init__(self, chunk_id: int, *, retry_in: float) -> None:
        self.chunk_id, self.retry_in = chunk_id, retry_in
        super().__init__(
            f"Chunk {chunk_id} is held by another delivery of its task (or may be taken over "
            f"by one): this one sends no call and looks again in {retry_in:.0f} s."
        )


class EngineNotFoundError(NotFoundError):
    """No such endpoint or run (or not yours to see)."""


class EnginePermissionError(PermissionDeniedError):
    """Only admins may spend money: the refusal is about the endpoint chosen (`field`, for a
    form to show it beside that field)."""

    field = "endpoint"


class CallError(Exception):
    """One model call failed; recorded on the call (status error), never raised to a user."""


class CallTransientError(CallError):
    """Worth trying again: 429, 5xx, a timeout or a broken connection.

    `billed`: the request reached the server, which may have processed it and billed it (a
    timeout once it was sent, a broken stream, a 5xx but 503); False when the provider cannot
    have processed it (a refused connection, 429, 408, 503). `completion_tokens`: the reply's
    tokens received before it broke (estimated from its text), when some were.
    """

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        billed: bool = False,
        completion_tokens: int = 0,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.billed = billed
        self.completion_tokens = completion_tokens


class CallRejectedError(CallError):
    """The server refused the request as it stands (400, 401, 404...): asking again cannot help."""
