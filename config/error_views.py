"""Error pages that must work with the database down: they render no template and read no row."""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

from django.core.exceptions import PermissionDenied
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse
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
    return render(request, "403_csrf.html", {"login_next": _page_left(request)}, status=403)


def _page_left(request: HttpRequest) -> str:
    """Where the refused form's "Log in" link returns to: the page the form was on, when the
    browser named it (Referer, same-origin as the site's referrer policy sends it) and it is a
    page of this site, else the annotator's dashboard.

    The page, not the address the form posted to: start-next, Return this task and log-out take
    a POST, and after logging in a GET of them shows nothing (or is refused). A page the browser
    showed was fetched with a GET. Only its path is kept, and checked as a `next` again: the
    path of "https://site//evil.example/" would send the login to another host.
    """
    referer = request.META.get("HTTP_REFERER", "")
    hosts = {request.get_host()}
    if url_has_allowed_host_and_scheme(
        referer, allowed_hosts=hosts, require_https=request.is_secure()
    ):
        path = urlsplit(referer).path
        if url_has_allowed_host_and_scheme(path, allowed_hosts=hosts) and _a_page_to_return_to(
            path
        ):
            return path
    return reverse("work:dashboard")


def _a_page_to_return_to(path: str) -> bool:
    """Whether `path` is one of the site's pages, other than those of logging in and out."""
    try:
        resolve(path)
    except Resolver404:
        return False
    logging_in_or_out = ("login", "logout", "admin:login", "admin:logout")
    return path not in {reverse(name) for name in logging_in_or_out}


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
