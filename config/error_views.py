"""Error pages that must work with the database down: they render no template and read no row."""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.views import defaults

UNAVAILABLE = (
    "<!doctype html><html lang=en><meta charset=utf-8><title>Briefly unavailable</title>"
    "<h1>Briefly unavailable</h1><p>The database is not answering, so this request was not "
    "completed and nothing of it was saved. Please try again in a minute.</p></html>"
)
RETRY_AFTER_SECONDS = 30


def server_error(request: HttpRequest) -> HttpResponse:
    """Answer 503 with Retry-After when the database is unreachable, else Django's plain 500."""
    error = sys.exc_info()[1]
    if isinstance(error, OperationalError | InterfaceError):
        response = HttpResponse(UNAVAILABLE, status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return defaults.server_error(request)
