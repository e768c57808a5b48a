"""Rate limits of the REST API (DRF throttles), their rates from the environment.

Every API view is limited per user (per address for anonymous requests, which only the
unauthenticated endpoints such as the schema ever reach: the others refuse them first). The
annotator's hot path (claim, read, submit, return a task) has a scope of its own with a higher
rate, so an annotator working quickly is never stopped by the general limit. A refused request
answers 429 with Retry-After. Logins are limited separately (django-axes, annotate/login.py).

Pages are limited with `page_rate_check` and the same counters, per user when logged in, else per
address: the crowd worker pages, which have no login (scope "crowd-pages" on every worker page,
and "crowd-starts" on a self-hosted link's start, which makes a participant and claims a task;
their open claims per address are bounded apart, annotate.crowd.services.addresses),
the upload forms (scope "uploads", annotate.http.uploads_limited), making an API token
(scope "api-tokens", the API tokens page), and through annotate.http.rate_limited: the
annotator's work pages (a task's claim, submit and return, a verbalizer answer and its change,
every revision session and re-rating action) on the API's "annotator-work" counter, an
endpoint's test call on "model-calls", and the downloads of every label or answer of a project,
set or study on "exports" (annotate.http.exports_limited). The audit of every way in:
docs/rate-limits.md.

Every other page is counted by one middleware (annotate.http.PageRateLimitMiddleware), on the
same counters: per user on scope "pages" (PAGE_RATE: lists, reports, forms, the admin site,
the login page per address), or on scope "polls" (POLL_RATE) for what a page asks for again and
again while work runs (a run's progress JSON, a page that reloads itself every 2 s), so a page
left open does not use up its user's clicks. A view says which with `page_limit`: "polls", or
OWN_LIMIT when it counts every request it is sent itself (the crowd worker pages, figures, the
annotator's work, which keeps its benchmarked single counter), or NO_LIMIT (the health check
only); DRF views are counted by their throttles, the API's progress views on "polls"
(PollThrottle) instead of the user rate. A request that matches no URL pattern (a 404 no view
answered: a guessed address) counts on "pages" too. tests/config/test_rate_limit_coverage.py walks every
URL and fails on one without a limit.

Two kinds of action are limited per user with `user_rate_limited`, which reads the user's window
before the action and counts the action only once it was accepted, so a request refused for its
input (an empty instruction, a run with nothing left to do) uses up nothing:
- the annotator's actions of a revision session that send a model call (scope "model-calls",
  MODEL_CALL_RATE: starting a session, a new instruction, a retry), so neither a busy annotator
  nor a failing endpoint retried without end uses up the endpoint's shared pacing;
- starting or running again an engine run (scope "run-starts", RUN_START_RATE), counted inside
  the engine (annotate.engine.services.runs.engine_run_start), so every page and API that starts
  a run, whatever its kind, meets the same counter, admins included; the console (management
  commands, user None) is not limited;
- asking for a report export or the aggregated-labels CSV (scope "exports", EXPORT_RATE: the
  report page's Export, which builds the report, draws every figure and writes a zip to
  storage, and the CSV of the benchmark's every label).

Figure downloads are counted per user with `figure_rate_check` (scope "figures", FIGURE_RATE):
every figure of the InFoBench, revision and verbalizer reports, the images the report pages
load and their downloads as the figure APIs alike, on one counter. A figure not in the cache is
drawn (matplotlib) on the request; the rate is set far above a report page's own loading (at
most five images a page).

A request with a wrong API token is refused while it is authenticated, before any throttle runs:
those failures are counted per address on their own (scope "api-bad-tokens",
annotate.login.LimitedTokenAuthentication), and an address over the limit gets 429 without its
token being looked at.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from django.core.exceptions import ImproperlyConfigured
from rest_framework import throttling
from rest_framework.settings import api_settings

from annotate.errors import RateLimitedError

ANNOTATOR_WORK_SCOPE = "annotator-work"
CROWD_PAGES_SCOPE = "crowd-pages"
CROWD_STARTS_SCOPE = "crowd-starts"
UPLOADS_SCOPE = "uploads"
API_TOKENS_SCOPE = "api-tokens"
API_BAD_TOKENS_SCOPE = "api-bad-tokens"
MODEL_CALLS_SCOPE = "model-calls"
RUN_STARTS_SCOPE = "run-starts"
EXPORTS_SCOPE = "exports"
FIGURES_SCOPE = "figures"
PAGES_SCOPE = "pages"
POLLS_SCOPE = "polls"
# A view's `page_limit` besides a scope: it counts every request itself, or (health) nothing.
OWN_LIMIT = "own"
NO_LIMIT = "none"
# The refusal's words for what scopes "exports" and "annotator-work" count.
EXPORTS_WHAT = "report exports and label downloads"
ANNOTATOR_WORK_WHAT = "work requests"
PAGE_LIMIT_WHAT = {PAGES_SCOPE: "page requests", POLLS_SCOPE: "progress checks"}


class _RatesFromSettings:
    """Read the rate when a request is limited, not when the class is imported (DRF's
    THROTTLE_RATES is fixed at import), so a test's settings change it."""

    scope: str

    def get_rate(self) -> str | None:
        try:
            return api_settings.DEFAULT_THROTTLE_RATES[self.scope]
        except KeyError:
            raise ImproperlyConfigured(f"No throttle rate for scope {self.scope!r}.") from None


class _WindowRead:
    """Read a throttle's window for `self.key` without counting (DRF's `allow_request` reads
    and counts at once); `throttle_success` then counts one."""

    def window_full(self) -> bool:
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        return len(self.history) >= self.num_requests


class UserRateThrottle(_RatesFromSettings, throttling.UserRateThrottle):
    pass


class AnonRateThrottle(_RatesFromSettings, throttling.AnonRateThrottle):
    pass


class AnnotatorWorkThrottle(_RatesFromSettings, throttling.UserRateThrottle):
    """The annotator's hot path: replaces the user limit on those views with a higher rate."""

    scope = ANNOTATOR_WORK_SCOPE


class PollThrottle(_RatesFromSettings, throttling.UserRateThrottle):
    """An API view a client polls while work runs (a run's or a project's progress): replaces
    the user limit with the polls' rate (scope "polls", the pages' polling counter)."""

    scope = POLLS_SCOPE


class UploadThrottle(_RatesFromSettings, throttling.UserRateThrottle):
    """An API import counts against the user's upload limit, the same counter as the upload
    pages (scope "uploads"), on top of the general per-user limit."""

    scope = UPLOADS_SCOPE

    def allow_request(self, request, view) -> bool:
        if request.method != "POST":  # only a file sent is an upload (a GET answers 405)
            return True
        return super().allow_request(request, view)


class PageRateThrottle(_RatesFromSettings, throttling.UserRateThrottle):
    """One scope's limit for pages: per user when logged in, else per client address (DRF's
    UserRateThrottle keys, under this scope)."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        super().__init__()


class UserActionThrottle(_RatesFromSettings, _WindowRead, throttling.SimpleRateThrottle):
    """One scope's limit for one user, without a request (a service's, a page's or the API's
    user): the same cache key as PageRateThrottle's for that user logged in."""

    def __init__(self, scope: str, user) -> None:
        self.scope = scope
        super().__init__()
        self.key = self.cache_format % {"scope": scope, "ident": user.pk}


@contextlib.contextmanager
def user_rate_limited(
    *, user, scope: str, what: str = "requests", outcome: str = ""
) -> Iterator[None]:
    """Refuse the action done in the block with RateLimitedError when `user` has used up the
    rate of `scope`; count it only when the block ends without an error (an action refused,
    for its input or anything else, is not counted). `what` and `outcome` word the refusal:
    "Too many <what> from your account (at most <rate>)... <outcome>"."""
    limit = UserActionThrottle(scope, user)
    if limit.window_full():
        raise RateLimitedError(
            retry_after=max(1, round(limit.wait() or 1)),
            per_user=True,
            what=what,
            rate=limit.rate,
            outcome=outcome,
        )
    yield
    limit.window_full()  # read again: the user's other requests may have counted meanwhile
    limit.throttle_success()


def client_address(request) -> str:
    """The client's address as the page and API limits count it (TRUSTED_PROXY_COUNT)."""
    return PageRateThrottle(CROWD_PAGES_SCOPE).get_ident(request)


def page_rate_check(request, *, scope: str, what: str | None = None, outcome: str = "") -> None:
    """Count a page request of `scope` (per user, or address); raise RateLimitedError over it
    (naming `what` was counted and the rate, when `what` is given, and `outcome`: what the
    refusal left undone)."""
    throttle = PageRateThrottle(scope)
    if not throttle.allow_request(request, None):
        named = {"what": what, "rate": throttle.rate} if what else {}
        raise RateLimitedError(
            retry_after=max(1, round(throttle.wait() or 1)),
            per_user=request.user.is_authenticated,
            outcome=outcome,
            **named,
        )


def page_limit(scope: str) -> Callable[[Callable], Callable]:
    """Mark a page view for PageRateLimitMiddleware: counted on `scope` ("polls"), OWN_LIMIT (the
    view counts every request itself), or NO_LIMIT. Unmarked pages count on "pages"."""

    def mark(view: Callable) -> Callable:
        view.page_limit = scope
        return view

    return mark


def polled(view: Callable) -> Callable:
    """Mark a page asked for again and again while work runs (a progress JSON, a page that
    reloads itself): counted on scope "polls" (POLL_RATE), not on its user's page requests."""
    return page_limit(POLLS_SCOPE)(view)


def page_limit_of(view) -> str | None:
    """What counts a request to `view` (a URL pattern's callback): the scope the middleware
    counts it on, OWN_LIMIT, NO_LIMIT, or None for a DRF view (its throttle classes count it)."""
    if getattr(view, "cls", None) is not None:  # DRF's APIView.as_view sets it
        return None
    return getattr(view, "page_limit", PAGES_SCOPE)


def figure_rate_check(request) -> None:
    """Count one figure download of the request's user (scope "figures", FIGURE_RATE), from a
    report page or the API (a Django or a DRF request); raise RateLimitedError over it."""
    page_rate_check(request, scope=FIGURES_SCOPE, what="figure downloads")


class BadTokenThrottle(_RatesFromSettings, _WindowRead, throttling.SimpleRateThrottle):
    """Failed API token authentications, per client address (never per user: there is none).

    `over` only reads the count; `failed` adds one. The request's user is never asked for: this
    runs while the request is being authenticated."""

    scope = API_BAD_TOKENS_SCOPE

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def over(self, request) -> bool:
        self.key = self.get_cache_key(request, None)
        return self.window_full()

    def failed(self, request) -> None:
        self.over(request)
        self.throttle_success()  # records this failure in the address's window
