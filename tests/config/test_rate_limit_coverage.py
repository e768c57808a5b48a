"""Every way in is rate-limited: every URL pattern (the admin site's included) has a limit, and
the pages that had none before — staff and researcher pages, the admin, the progress a page
polls — answer 429 with Retry-After past their limit and not below it.

Time is passed in through the throttles' timer; the test settings raise every rate, so each
test here sets low ones.
"""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from rest_framework.throttling import SimpleRateThrottle

from annotate.throttling import NO_LIMIT, OWN_LIMIT, page_limit_of
from evaluation.services.judge_runs import judge_run_create
from tests.evaluation.judge_helpers import make_benchmark, make_judge

# The only ways in with no limit at all, each with its reason. Static files never reach a URL
# pattern (WhiteNoise answers them first), so they are not here.
NOT_LIMITED = {
    # Load balancers' health check: a limit per address would be shared by everyone behind a
    # proxy, so a flood would take the node out of service; its cost is bounded instead
    # (config/health.py).
    "health",
}


def _patterns(resolver: URLResolver, prefix: str = "", namespace: str = ""):
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from _patterns(pattern, prefix + str(pattern.pattern), inner)
        else:
            assert isinstance(pattern, URLPattern)
            name = f"{namespace}{pattern.name}" if pattern.name else None
            yield prefix + str(pattern.pattern), name, pattern.callback


def test_every_url_pattern_has_a_rate_limit():
    """A new page is counted on "pages" unless it says otherwise; this fails on a new page
    marked NO_LIMIT that is not listed above, on an API view without throttles, and on a
    scope with no rate in settings."""
    rates = django_settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    unlimited = []
    for route, name, view in _patterns(get_resolver()):
        scope = page_limit_of(view)
        if scope is None:  # a DRF view: its throttles count it
            throttles = view.cls().get_throttles()
            if not throttles:
                unlimited.append(route)
            for throttle in throttles:
                assert throttle.get_rate(), route  # raises for a scope without a rate
        elif scope == NO_LIMIT:
            if name not in NOT_LIMITED:
                unlimited.append(route)
        elif scope != OWN_LIMIT:
            assert scope in rates, f"{route}: no rate for scope {scope!r}"
    assert unlimited == []
    # Pages are counted by the middleware, after authentication (per user when logged in).
    middleware = django_settings.MIDDLEWARE
    limiter = middleware.index("annotate.http.PageRateLimitMiddleware")
    assert limiter > middleware.index("django.contrib.auth.middleware.AuthenticationMiddleware")


def test_the_admin_site_is_covered_by_the_walk():
    admin_routes = [
        route for route, _, _ in _patterns(get_resolver()) if route.startswith("admin/")
    ]
    assert "admin/" in admin_routes and len(admin_routes) > 50


@pytest.fixture
def rates(settings, monkeypatch):
    """Set low rates for some scopes; the clock is `now[0]`."""
    now = [1_000_000.0]
    monkeypatch.setattr(SimpleRateThrottle, "timer", staticmethod(lambda: now[0]))
    cache.clear()

    def set_rates(**scopes: str) -> list[float]:
        low = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **scopes}
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": low}
        return now

    yield set_rates
    cache.clear()


def _refused_as_told(response, *, what: str, rate: str, wait: int) -> None:
    assert response.status_code == 429
    assert response["Retry-After"] == str(wait)
    told = f"Too many {what} from your account (at most {rate}). Please wait {wait} s"
    assert told in response.text


@pytest.mark.django_db
def test_a_staff_page_answers_429_past_its_limit_and_not_below(client, researcher, rates):
    now = rates(pages="3/minute")
    client.force_login(researcher)
    url = reverse("work:project-list")
    assert [client.get(url).status_code for _ in range(3)] == [200, 200, 200]
    now[0] += 20
    _refused_as_told(client.get(url), what="page requests", rate="3/minute", wait=40)
    now[0] += 40  # the first request has left the window
    assert client.get(url).status_code == 200


@pytest.mark.django_db
def test_the_refused_pages_title_says_what_happened_and_when_to_retry(client, researcher, rates):
    """A refused page was titled "Cannot do that", like any refusal: a tab or a bookmark said
    neither that the limit was hit nor for how long (the Retry-After the page is sent with)."""
    now = rates(pages="1/minute")
    client.force_login(researcher)
    client.get(reverse("work:project-list"))
    now[0] += 15
    refused = client.get(reverse("work:project-list"))
    assert refused.status_code == 429 and refused["Retry-After"] == "45"
    assert "<title>Too many requests: try again in 45 s · InFoBench annotation</title>" in (
        refused.text
    )
    assert "<h1>Too many requests: try again in 45 s</h1>" in refused.text


@pytest.mark.django_db
def test_the_task_page_is_counted_once_as_a_page_and_its_submit_on_the_work_rate(
    client, annotator_user, rates
):
    """The task page's GET had no limit at all; it now counts on the user's pages, once (not
    on the work rate too), and its submit stays on the work rate alone."""
    from annotate.services.assignments import annotator_for_user, assignment_claim_next
    from tests.factories import project_with_tasks

    now = rates(pages="2/minute", **{"annotator-work": "100/minute"})
    assignment = assignment_claim_next(
        annotator=annotator_for_user(user=annotator_user),
        project=project_with_tasks(instructions=1),
        now=timezone.now(),
    )
    client.force_login(annotator_user)
    url = reverse("work:assignment", args=[assignment.id])
    assert [client.get(url).status_code for _ in range(2)] == [200, 200]
    _refused_as_told(client.get(url), what="page requests", rate="2/minute", wait=60)
    # A submit is work, not a page: refused for its missing answers (400), not for the rate.
    assert client.post(url, {}).status_code == 400
    now[0] += 60
    assert client.get(url).status_code == 200


@pytest.mark.django_db
def test_the_admin_site_is_limited_per_user(client, admin_user, rates):
    now = rates(pages="2/minute")
    client.force_login(admin_user)
    assert [client.get("/admin/").status_code for _ in range(2)] == [200, 200]
    # One counter for the whole site, the admin's every page on it.
    refused = client.get("/admin/password_change/")
    _refused_as_told(refused, what="page requests", rate="2/minute", wait=60)
    now[0] += 60
    assert client.get("/admin/password_change/").status_code == 200


@pytest.mark.django_db
def test_the_login_page_is_limited_per_address(client, rates):
    rates(pages="2/minute")
    url = reverse("login")
    assert [client.get(url).status_code for _ in range(2)] == [200, 200]
    refused = client.get(url)
    assert refused.status_code == 429 and refused["Retry-After"] == "60"
    assert "from your address" in refused.text
    other = client.get(url, REMOTE_ADDR="198.51.100.20")
    assert other.status_code == 200


@pytest.mark.django_db
def test_addresses_no_page_has_are_counted_on_the_page_limit(client, rates):
    """Someone guessing addresses (an assignment's, a worker link's) got 404 however often
    they tried: each now counts on "pages" like a page, and past the limit they get 429."""
    now = rates(pages="3/minute")
    guesses = ["/annotate/assignments/x1/", "/crowd/work/guess/again/", "/no-such-page/"]
    assert [client.get(url).status_code for url in guesses] == [404, 404, 404]
    now[0] += 20
    refused = client.get("/annotate/assignments/x2/")
    assert refused.status_code == 429 and refused["Retry-After"] == "40"
    assert "Too many page requests from your address (at most 3/minute)" in refused.text
    # One budget with the pages: the login page is refused as well, another address is not.
    assert client.get(reverse("login")).status_code == 429
    assert client.get("/no-such-page/", REMOTE_ADDR="198.51.100.20").status_code == 404
    now[0] += 40
    assert client.get("/no-such-page/").status_code == 404


@pytest.mark.django_db
def test_a_logged_in_users_404s_count_on_their_pages(client, researcher, rates):
    rates(pages="2/minute")
    client.force_login(researcher)
    assert client.get("/api/annotate/no-such-thing/").status_code == 404
    assert client.get(reverse("work:project-list")).status_code == 200
    refused = client.get("/api/annotate/no-such-thing/", HTTP_ACCEPT="application/json")
    assert refused.status_code == 429 and refused["Retry-After"] == "60"
    assert "from your account" in refused.json()["detail"]


@pytest.mark.django_db
def test_a_404_is_counted_once(client, researcher, annotator_user, rates):
    """A view's 404 was counted on its limit already (the middleware's "pages", or the view's
    own); an address without its slash is counted as the page its redirect leads to."""
    rates(pages="2/minute")
    client.force_login(researcher)
    assert client.get(reverse("work:project-detail", args=[999_999])).status_code == 404
    assert client.get(reverse("work:project-list")).status_code == 200
    assert client.get(reverse("work:project-list")).status_code == 429
    cache.clear()
    client.force_login(annotator_user)
    assert client.get(reverse("work:assignment", args=[999_999])).status_code == 404
    assert client.get(reverse("work:dashboard")).status_code == 200
    assert client.get(reverse("work:dashboard")).status_code == 429
    cache.clear()
    slashless = reverse("work:dashboard").rstrip("/")
    assert client.get(slashless).status_code == 301
    assert client.get(reverse("work:dashboard")).status_code == 200
    assert client.get(reverse("work:dashboard")).status_code == 200


def _judge_run():
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,), systems=("a",))
    return judge_run_create(config=make_judge(backend="fake"), benchmark=benchmark, systems=systems)


@pytest.mark.django_db
def test_a_polled_progress_answers_429_past_its_limit_and_not_below(client, researcher, rates):
    """A run page asks for its progress every second or two: those count on "polls", apart
    from the user's pages, so a page left open neither uses up the clicks nor is stopped by
    them."""
    now = rates(pages="1/minute", polls="4/minute")
    run = _judge_run()
    client.force_login(researcher)
    url = reverse("engine:run-progress", args=[run.engine_run_id])
    assert [client.get(url).status_code for _ in range(4)] == [200, 200, 200, 200]
    now[0] += 30
    _refused_as_told(client.get(url), what="progress checks", rate="4/minute", wait=30)
    # The user's page counter is its own: untouched by the polls, used up on its own.
    assert client.get(reverse("work:project-list")).status_code == 200
    assert client.get(reverse("work:project-list")).status_code == 429
    now[0] += 30
    assert client.get(url).status_code == 200


@pytest.mark.django_db
def test_a_polling_script_is_refused_in_json_and_a_browser_with_the_error_page(
    client, researcher, rates
):
    """The run page's script asks for JSON: past POLL_RATE it gets the message and the wait
    as JSON (the error page's HTML broke its parsing: it showed nothing and kept asking); a
    browser opening the same address gets the error page."""
    rates(polls="1/minute")
    run = _judge_run()
    client.force_login(researcher)
    url = reverse("engine:run-progress", args=[run.engine_run_id])
    assert client.get(url, HTTP_ACCEPT="application/json").status_code == 200
    refused = client.get(url, HTTP_ACCEPT="application/json")
    assert refused.status_code == 429 and refused["Retry-After"] == "60"
    assert refused["Content-Type"] == "application/json"
    told = "Too many progress checks from your account (at most 1/minute). Please wait 60 s"
    assert told in refused.json()["detail"] and refused.json()["retry_after"] == 60
    page = client.get(url, HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    assert page.status_code == 429 and page["Content-Type"].startswith("text/html")
    assert told in page.text


@pytest.mark.django_db
def test_the_limits_page_offers_the_way_back(client, researcher, rates):
    """Refused, a page offers itself again (a GET) or the page its form was on (a POST),
    never a page of another site."""
    rates(pages="1/minute")
    client.force_login(researcher)
    url = reverse("work:project-list") + "?page=2"
    client.get(url)
    again = client.get(url)
    assert again.status_code == 429
    assert f'<a href="{url}">Try this page again</a>' in again.text
    came_from = "http://testserver" + reverse("work:project-list")
    sent = client.post(reverse("work:project-list"), HTTP_REFERER=came_from)
    assert sent.status_code == 429
    assert f'<a href="{came_from}">Back to the page you came from</a>' in sent.text
    elsewhere = client.post(reverse("work:project-list"), HTTP_REFERER="https://evil.example/")
    assert elsewhere.status_code == 429 and "evil.example" not in elsewhere.text


@pytest.mark.django_db
def test_the_apis_progress_is_on_the_polls_rate_not_the_user_rate(client, researcher, rates):
    rates(user="1/minute", polls="3/minute")
    run = _judge_run()
    client.force_login(researcher)
    url = reverse("api-judge-run-progress", args=[run.pk])
    assert [client.get(url).status_code for _ in range(3)] == [200, 200, 200]
    refused = client.get(url)
    assert refused.status_code == 429 and refused["Retry-After"] == "60"


def test_the_served_application_loads_with_the_page_limit_first():
    """config.wsgi loads the middleware before any URL, so annotate.http was the first module
    to import DRF's views, whose settings then asked annotate.http for its JSON parser before
    it was defined: the server did not start. A fresh process, as a server starts it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    started = subprocess.run(
        [sys.executable, "-c", "from config.wsgi import application"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr[-2000:]
