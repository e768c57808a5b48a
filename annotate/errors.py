"""Errors that users can cause, with a message a person can act on."""


class AnnotateError(Exception):
    """Base class: bad input or a request that cannot be done; nothing was written."""

    http_status = 400


class FieldInputError(AnnotateError):
    """A value given to a service is refused; `field` names the form field it came from (None:
    the values together), so a page can show the message beside that field."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class ImportFileError(AnnotateError):
    """A file to import is unreadable or wrong; the message names file, line and field."""

    def __init__(self, path: str, line: int | None, field: str | None, problem: str) -> None:
        self.path, self.line, self.field, self.problem = path, line, field, problem
        where = path if line is None else f"{path}, line {line}"
        if field:
            where += f", field '{field}'"
        super().__init__(f"{where}: {problem}")


class ImportFileProblems(ImportFileError):
    """Several lines of a file are wrong: each one named, in the order found.

    `line`, `field` and `problem` are the first one's, for callers that show only one.
    `stopped`: the reading stopped at these, so there may be more; `more`: how many more wrong
    lines were found but not named.
    """

    def __init__(
        self, path: str, problems: list[ImportFileError], *, stopped: bool, more: int = 0
    ) -> None:
        first = problems[0]
        self.path, self.line, self.field = path, first.line, first.field
        self.problem = first.problem
        self.problems, self.more = problems, more
        count = f"{len(problems) + more:,} wrong lines"
        if stopped:
            count = f"the first {count} (there may be more)"
        found = "\n".join(f"- {str(p).removeprefix(path + ', ')}" for p in problems)
        if more:
            found += f"\nand {more:,} more"
        AnnotateError.__init__(self, f"{path}: {count}:\n{found}")


class NotFoundError(AnnotateError):
    """Missing, or not yours: both answer 404 so nobody learns what exists. `field` names the
    input that asked for it, when there is one (an API answers it beside the message)."""

    http_status = 404

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class SystemNotFoundError(NotFoundError):
    """Systems asked for by name are not stored; `missing` lists their names, sorted."""

    def __init__(self, missing: list[str]) -> None:
        self.missing = missing
        named = ", ".join(map(repr, missing))
        super().__init__(f"Field 'systems': no system named {named}.", field="systems")


class ConflictError(AnnotateError):
    """The request contradicts work already stored (a different resubmission, say). `field`
    names the input at fault, when there is one (an API answers it beside the message)."""

    http_status = 409

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class RateLimitedError(AnnotateError):
    """Too many requests from one user or address; `retry_after` is how many seconds to wait.
    `what` names the requests counted, `rate` their limit ("30/hour"), `outcome` what the
    refusal left undone ("Nothing was started."). `title` is the refusal in a few words, for
    a page's title and heading ("Too many requests: try again in 40 s")."""

    http_status = 429

    def __init__(
        self,
        *,
        retry_after: int,
        per_user: bool = False,
        what: str = "requests",
        rate: str | None = None,
        outcome: str = "",
    ) -> None:
        self.retry_after = retry_after
        self.title = f"Too many requests: try again in {_wait(retry_after)}"
        who = "your account" if per_user else "your address"
        at_most = f" (at most {rate})" if rate else ""
        told = (
            f"Too many {what} from {who}{at_most}. Please wait {_wait(retry_after)} and try again."
        )
        super().__init__(f"{told} {outcome}".rstrip())


def _wait(seconds: int) -> str:
    """The wait in words: seconds under two minutes ("40 s"), else minutes rounded up ("12 min")."""
    if seconds < 120:
        return f"{seconds} s"
    return f"{-(-seconds // 60)} min"


class PermissionDeniedError(AnnotateError):
    http_status = 403


class WorkerBlockedError(PermissionDeniedError):
    """A crowd worker an admin blocked asks for a task: the page says what became of their work."""


class ProjectSetupError(FieldInputError):
    """A project or batch cannot be created as asked (unknown instruction, missing response...);
    `field` names the input at fault (the API answers it beside the message)."""


class NoWorkError(AnnotateError):
    """No task is left that this annotator may claim."""

    http_status = 404


class SubmissionError(AnnotateError):
    """A submission is incomplete or has a bad value; `missing` lists the unanswered fields,
    `others` the problems besides them (the message says both)."""

    def __init__(
        self, message: str, *, missing: list[str] | None = None, others: list[str] | None = None
    ) -> None:
        self.missing = missing or []
        self.others = others or []
        super().__init__(message)


class AssignmentNotLiveError(AnnotateError):
    """The assignment was returned or rejected, so it takes no submission."""


class BatchClosedError(AssignmentNotLiveError):
    """A claim past its time in a batch that was deactivated: the batch takes no more work
    (a live claim may still be finished)."""

    http_status = 410


class CrowdPlatformError(AnnotateError):
    """A crowd platform refused a call or could not be reached; `code` is the platform's code."""

    http_status = 502
    transient = False

    def __init__(self, message: str, *, code: str = "", operation: str = "") -> None:
        self.code, self.operation = code, operation
        super().__init__(message)


class TransientPlatformError(CrowdPlatformError):
    """Throttled, timed out or a server error: the same call may succeed if tried again later."""

    http_status = 503
    transient = True


class HitAlreadyExistsError(CrowdPlatformError):
    """A HIT with this UniqueRequestToken exists already (an earlier try got through)."""

    http_status = 409


class AlreadyProcessedError(CrowdPlatformError):
    """The platform has already done the call with this idempotency token."""

    http_status = 409


class StudyClosedError(AnnotateError):
    """A self-hosted study link that takes no more workers (closed, or its cap is reached)."""

    http_status = 410


class PublishError(FieldInputError):
    """A batch cannot be published as asked (no tasks, nothing left to publish, bad settings,
    nothing to pay with...); `field` names the input at fault when there is one."""


class AnnotatorKindError(AnnotateError):
    """An annotator's kind cannot be set as asked (an LLM judge, two kinds in one benchmark)."""
