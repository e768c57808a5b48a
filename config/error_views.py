"""Error pages that must work with the database down: they render no template and read no row."""

from __future__ import annotations

import sys

from django.core.exceptions import PermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
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


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Answer a role error with a 403 page in the site's layout, naming the user's roles."""
    roles: list[str] = []
    if request.user.is_authenticated:
        roles = sorted(request.user.groups.values_list("name", flat=True))
    message = str(exception) if exception and str(exception) else ""
    context = {"exception": message, "roles": roles}
    return render(request, "403.html", context, status=403)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """Answer a refused form (its security token is out of date) in the site's layout.

    The usual cause is a login or logout in another tab, which replaces the token the open page
    was sent with. Django's own page speaks of hijacked browsers and cookie settings, and an
    annotator who sees it after Submit takes their answers for lost; a task's answers are kept
    in this browser, so going back and reloading sends them again.
    """
    return render(request, "403_csrf.html", status=403)


def admin_login(request: HttpRequest) -> HttpResponse:
    """The admin's login: our one login page for visitors, a 403 page for a logged-in non-admin.

    Django's admin sends a logged-in user without staff rights to its login form, which would
    show a researcher a bare login page; they are logged in already, only not as an admin.
    """
    if request.user.is_authenticated and request.user.is_staff:
        next_url = request.GET.get("next", "")
        safe = url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()})
        return redirect(next_url if next_url and safe else reverse("admin:index"))
    if request.user.is_authenticated:
        raise PermissionDenied("The administration is for admins (staff accounts) only.")
    query = request.META.get("QUERY_STRING", "")
    return redirect(reverse("login") + (f"?{query}" if query else ""))
