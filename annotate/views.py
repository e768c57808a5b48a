"""Pages of the annotation side. Views parse input, call a selector or service, render."""

import secrets

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from annotate import help as help_pages
from annotate.errors import AnnotateError, NotFoundError, RateLimitedError
from annotate.filters import PAGE_SIZE, BenchmarkFilter, InstructionFilter, LabelFilter
from annotate.http import error_page
from annotate.roles import (
    ADMIN,
    ANNOTATOR,
    RESEARCHER,
    RESEARCHERS_ONLY,
    has_role,
    is_researcher,
    require_role,
)
from annotate.selectors import benchmarks as benchmark_selectors
from annotate.selectors import labels as label_selectors
from annotate.selectors.identities import identity_scope
from annotate.services import api_tokens
from annotate.throttling import API_TOKENS_SCOPE, page_rate_check


def _require_researcher(request: HttpRequest) -> None:
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    context = {
        "is_researcher": is_researcher(request.user),
        "is_annotator": has_role(request.user, ANNOTATOR),
        "is_admin": has_role(request.user, ADMIN),
    }
    return render(request, "annotate/home.html", context)


@login_required
def help_index(request: HttpRequest) -> HttpResponse:
    return render(request, "annotate/help.html", {"pages": help_pages.HELP_PAGES})


@login_required
def help_page(request: HttpRequest, slug: str) -> HttpResponse:
    try:
        page = help_pages.help_page_get(slug)
        html, sections = help_pages.help_page_html(page)
    except NotFoundError:
        raise Http404 from None
    context = {
        "pages": help_pages.HELP_PAGES,
        "page": page,
        "html": html,
        "sections": sections,
    }
    return render(request, "annotate/help.html", context)


@login_required
def benchmark_list(request: HttpRequest) -> HttpResponse:
    _require_researcher(request)
    found = BenchmarkFilter(request.GET, queryset=benchmark_selectors.benchmark_list_with_counts())
    page = Paginator(found.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"filter": found, "page": page, "benchmarks": page.object_list}
    return render(request, "annotate/benchmark_list.html", context)


@login_required
def benchmark_detail(request: HttpRequest, benchmark_id: int) -> HttpResponse:
    _require_researcher(request)
    try:
        benchmark = benchmark_selectors.benchmark_get(benchmark_id=benchmark_id)
    except NotFoundError:
        raise Http404 from None
    found = InstructionFilter(
        request.GET, queryset=benchmark_selectors.benchmark_instructions(benchmark=benchmark)
    )
    page = Paginator(found.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "benchmark": benchmark,
        "summary": benchmark_selectors.benchmark_summary(benchmark=benchmark),
        "filter": found,
        "page": page,
        "instructions": page.object_list,
    }
    return render(request, "annotate/benchmark_detail.html", context)


@login_required
def instruction_detail(
    request: HttpRequest, benchmark_id: int, instruction_id: int
) -> HttpResponse:
    _require_researcher(request)
    try:
        benchmark = benchmark_selectors.benchmark_get(benchmark_id=benchmark_id)
        instruction = benchmark_selectors.instruction_with_work(
            benchmark=benchmark,
            instruction_id=instruction_id,
            scope=identity_scope(user=request.user),
        )
    except NotFoundError:
        raise Http404 from None
    context = {
        "benchmark": benchmark,
        "instruction": instruction,
        "matrix": benchmark_selectors.instruction_label_matrix(instruction=instruction),
    }
    return render(request, "annotate/instruction_detail.html", context)


@login_required
def label_list(request: HttpRequest, benchmark_id: int) -> HttpResponse:
    """Every label of a benchmark, filtered and paginated, each saying whether it counts."""
    _require_researcher(request)
    try:
        benchmark = benchmark_selectors.benchmark_get(benchmark_id=benchmark_id)
    except NotFoundError:
        raise Http404 from None
    annotators = label_selectors.label_annotators(
        benchmark=benchmark, scope=identity_scope(user=request.user)
    )
    found = LabelFilter(
        request.GET,
        queryset=label_selectors.benchmark_labels(benchmark=benchmark),
        annotators=annotators,
        systems=label_selectors.benchmark_systems(benchmark=benchmark),
    )
    page = Paginator(found.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "benchmark": benchmark,
        "filter": found,
        "page": page,
        "rows": label_selectors.label_rows(labels=list(page.object_list), annotators=annotators),
    }
    return render(request, "annotate/label_list.html", context)


# The key of a token just made waits for the page after the redirect, shown once, in two
# halves that say nothing alone: the session, a database row kept for weeks and in backups
# (knox stores only a hash of a key), holds the key XOR a random pad; a cookie of the tokens
# page, gone once read or after a few minutes, holds the pad.
NEW_API_TOKEN_SESSION_KEY = "api_token_new_key"
NEW_API_TOKEN_COOKIE = "api_token_pad"
NEW_API_TOKEN_COOKIE_SECONDS = 300


@never_cache  # the page after "create" holds the key
@login_required
@require_http_methods(["GET", "POST"])
def api_token_list(request: HttpRequest) -> HttpResponse:
    """The user's own API tokens: create one (its key shown once), revoke one or all.

    Every POST redirects (a reload of the page after it sends nothing again); the new key is
    kept for the next GET only, half in the session and half in a cookie."""
    if request.method == "POST":
        return _api_token_action(request)
    context = {
        "tokens": api_tokens.api_token_list(user=request.user),
        "new_key": _key_joined(
            request.session.pop(NEW_API_TOKEN_SESSION_KEY, None),
            request.COOKIES.get(NEW_API_TOKEN_COOKIE),
        ),
        "password_revocation": api_tokens.api_token_password_revocation_notice(user=request.user),
    }
    response = render(request, "annotate/api_tokens.html", context)
    if NEW_API_TOKEN_COOKIE in request.COOKIES:
        response.delete_cookie(NEW_API_TOKEN_COOKIE, path=reverse("api-tokens"))
    return response


def _api_token_action(request: HttpRequest) -> HttpResponse:
    action = request.POST.get("action")
    if action == "create":
        try:
            page_rate_check(request, scope=API_TOKENS_SCOPE)
        except RateLimitedError as error:
            return error_page(request, error)
        _, new_key = api_tokens.api_token_create(user=request.user)
        return _redirect_with_key(request, new_key)
    if action == "revoke":
        try:
            api_tokens.api_token_revoke(user=request.user, token_id=request.POST.get("token", ""))
        except NotFoundError as error:
            return error_page(request, error)
        messages.success(request, "Token revoked.")
    elif action == "revoke-all":
        count = api_tokens.api_token_revoke_all(user=request.user)
        messages.success(request, f"{count} token(s) revoked.")
    else:
        return error_page(request, AnnotateError("Choose create, revoke or revoke-all."))
    return redirect("api-tokens")


def _redirect_with_key(request: HttpRequest, key: str) -> HttpResponse:
    """Redirect to the tokens page, the new key's halves in the session and a cookie."""
    raw = key.encode()
    pad = secrets.token_bytes(len(raw))
    request.session[NEW_API_TOKEN_SESSION_KEY] = _xor(raw, pad).hex()
    response = redirect("api-tokens")
    response.set_cookie(
        NEW_API_TOKEN_COOKIE,
        pad.hex(),
        max_age=NEW_API_TOKEN_COOKIE_SECONDS,
        path=reverse("api-tokens"),
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Strict",
    )
    return response


def _key_joined(masked: str | None, pad: str | None) -> str | None:
    """Return the key of the session's half and the cookie's, None unless both are there."""
    try:
        halves = bytes.fromhex(masked or ""), bytes.fromhex(pad or "")
    except ValueError:  # a cookie not of our making
        return None
    # A key kept whole in the session (before the halves) has no cookie: dropped unseen.
    if not halves[0] or len(halves[0]) != len(halves[1]):
        return None
    key = _xor(*halves)
    return key.decode("ascii") if key.isascii() else None


def _xor(data: bytes, pad: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, pad, strict=True))
