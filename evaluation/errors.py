"""Errors that users can cause on the measuring side."""


class EvaluationError(Exception):
    """Base class: a report, judge run or export that cannot be done as asked."""

    http_status = 400
