"""Errors that users can cause on the measuring side."""


class EvaluationError(Exception):
    """Base class: a report, judge run or export that cannot be done as asked."""

    http_status = 400


class JudgeConfigError(EvaluationError):
    """A judge configuration cannot be used as it stands (unknown back-end, missing API key)."""


class JudgeRunError(EvaluationError):
    """A judge run cannot be created or started as asked."""


class JudgePermissionError(EvaluationError):
    """Only admins may start runs that spend money."""

    http_status = 403


class JudgeNotFoundError(EvaluationError):
    http_status = 404


class ReportError(EvaluationError):
    """A report or export cannot be made as asked (unknown benchmark, option or format)."""


class JudgeCallError(Exception):
    """A call to a judge back-end failed. Not a user's mistake: recorded on the conversation."""


class ReportExportError(EvaluationError):
    """The export storage (S3 or the export folder) refused or failed a write."""

    http_status = 503
