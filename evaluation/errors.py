"""Errors that users can cause on the measuring side."""


class EvaluationError(Exception):
    """Base class: a report, judge run or export that cannot be done as asked."""

    http_status = 400


class JudgeConfigError(EvaluationError):
    """A judge configuration cannot be created or used as asked (a name taken, an unknown
    back-end); `field` names the form field at fault (None: the values together), so a page can
    show the message beside it."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class JudgeRunError(EvaluationError):
    """A judge run cannot be created or started as asked; `field`, when set, names the form
    field at fault."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class JudgeRunBusyError(JudgeRunError):
    """Another run of the judge, started and not ended, still writes labels on responses the
    run would judge (a conflict with what runs, not bad input); nothing was started."""

    http_status = 409


class JudgeReplaceNotConfirmedError(JudgeRunError):
    """A start over the judge's labels without "replace", or with "replace" and a `seen` that is
    not what it replaces now (`stale`, 409: another run ended since the estimate was shown, or
    the page showed none); nothing was started. The message names the API's fields;
    `page_message` says the same to a page, whose checkbox the error stands beside."""

    def __init__(self, *, warning: str, seen: str, stale: bool) -> None:
        self.warning, self.seen, self.stale = warning, seen, stale
        self.http_status = 409 if stale else 400
        if stale:
            message = (
                f"What starting replaces is not what replace_seen said: {warning} Nothing was "
                f"started: send replace_seen {seen!r} with replace to start it."
            )
        else:
            message = (
                f"{warning} Nothing was started: confirm the replacement (field 'replace') to "
                "start it."
            )
        super().__init__(message, field="replace")

    @property
    def page_message(self) -> str:
        if self.stale:
            return (
                f"What starting replaces is not what the page showed: {self.warning} Nothing "
                "was started: tick “Replace earlier labels” again to start it."
            )
        return f"{self.warning} Nothing was started: tick “Replace earlier labels” to start it."


class JudgePermissionError(EvaluationError):
    """Only admins may start runs that spend money: the refusal is about the judge chosen
    (`field`, as the API names its input; the run page's own field is `config`)."""

    http_status = 403
    field = "judge"


class JudgeNotFoundError(EvaluationError):
    http_status = 404


class JudgeRunChoiceNotFoundError(JudgeNotFoundError):
    """A run's judge or benchmark, asked for by name, is not stored: `field` ("judge" or
    "benchmark") says which, `name` what was asked for."""

    def __init__(self, *, field: str, name: str) -> None:
        self.field, self.name = field, name
        super().__init__(f"Field '{field}': no {field} named {name!r}.")


class ReportError(EvaluationError):
    """A report or export cannot be made as asked (unknown benchmark, option or format)."""


class JudgeCallError(Exception):
    """A call to a judge back-end failed. Not a user's mistake: recorded on the conversation."""


class ReportExportError(EvaluationError):
    """The export storage (S3 or the export folder) refused or failed a write."""

    http_status = 503
