"""The REST API's rate limits: 429 with Retry-After over the limit, per user, per address, and
the annotator's hot path on its own higher limit. Time is passed in through the throttles' timer.

The test settings raise every rate so no other test meets a limit; each test here sets low ones.
"""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from tests.factories import project_with_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock(settings, monkeypatch):
    """Rates of 2 a minute per user, 1 per anonymous address, 3 for the annotator's work."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {
            **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],
            "user": "2/minute",
            "anon": "1/minute",
            "annotator-work": "3/minute",
        },
    }
    cache.clear()
    now = [1_000_000.0]
    monkeypatch.setattr(SimpleRateThrottle, "timer", staticmethod(lambda: now[0]))
    yield now
    cache.clear()


def api_for(user):
    client = APIClient()
    client.force_login(user)
    return client


def test_over_the_user_limit_the_api_answers_429_with_retry_after(clock, researcher):
    client = api_for(researcher)
    url = reverse("annotate-api:benchmark-list")
    assert [client.get(url).status_code for _ in range(2)] == [200, 200]
    clock[0] += 20
    refused = client.get(url)
    assert refused.status_code == 429
    # The first of the two requests leaves the one-minute window 40 s from now.
    assert refused["Retry-After"] == "40"
    clock[0] += 40
    assert client.get(url).status_code == 200


def test_the_annotators_task_endpoints_have_their_own_higher_limit(clock, annotator_user):
    project = project_with_tasks(instructions=1, systems=1, questions=1)
    client = api_for(annotator_user)
    assignment = client.post(reverse("annotate-api:claim", args=[project.id])).json()["assignment"]
    url = reverse("annotate-api:assignment", args=[assignment])
    # Claim + 2 reads = 3 on the hot path: past the user rate (2) but within its own (3).
    assert [client.get(url).status_code for _ in range(2)] == [200, 200]
    refused = client.get(url)
    assert refused.status_code == 429 and refused["Retry-After"] == "60"


def test_anonymous_requests_are_limited_per_address(clock):
    client = APIClient()
    assert client.get(reverse("api-schema")).status_code == 200
    refused = client.get(reverse("api-schema"))
    assert refused.status_code == 429 and refused["Retry-After"] == "60"


def test_a_made_up_forwarded_for_header_is_not_a_new_address(clock, worker_rates):
    """The limits count REMOTE_ADDR, as the login limit does: a client that sends another
    X-Forwarded-For with each request is still one address, on the API and the worker pages."""
    client = APIClient()
    assert client.get(reverse("api-schema"), HTTP_X_FORWARDED_FOR="198.51.100.1").status_code == 200
    refused = client.get(reverse("api-schema"), HTTP_X_FORWARDED_FOR="198.51.100.2")
    assert refused.status_code == 429
    worker_rates(pages="1/minute")
    join = reverse("crowd:selfhosted-join", args=["no-such-link"])
    assert client.get(join, HTTP_X_FORWARDED_FOR="198.51.100.3").status_code == 404
    assert client.get(join, HTTP_X_FORWARDED_FOR="198.51.100.4").status_code == 429


def test_a_refused_worker_pages_title_says_when_to_retry(clock, worker_rates):
    worker_rates(pages="1/minute")
    client = APIClient()
    join = reverse("crowd:selfhosted-join", args=["no-such-link"])
    assert client.get(join).status_code == 404
    refused = client.get(join)
    assert refused.status_code == 429 and refused["Retry-After"] == "60"
    assert "<title>Too many requests: try again in 60 s</title>" in refused.text


def test_behind_a_trusted_proxy_each_client_is_limited_on_its_own(clock, worker_rates, settings):
    """Behind the reverse proxy of docs/deploy.md every request's REMOTE_ADDR is the proxy's:
    with NUM_PROXIES fixed at 0, every crowd worker shared one address, so 60 self-hosted
    starts an hour (CROWD_RATE_STARTS) held for a whole study. TRUSTED_PROXY_COUNT=1 counts
    the address the proxy appended to X-Forwarded-For, not one the client wrote before it."""
    import subprocess
    import sys
    from pathlib import Path

    read = "import config.settings.base as s; print(s.REST_FRAMEWORK['NUM_PROXIES'])"
    env = {"PATH": "/usr/bin:/bin", "TRUSTED_PROXY_COUNT": "1"}
    found = subprocess.run(
        [sys.executable, "-c", read],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert found.stdout.strip() == "1", found.stderr
    worker_rates(pages="1/minute")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    join = reverse("crowd:selfhosted-join", args=["no-such-link"])
    proxy = APIClient(REMOTE_ADDR="127.0.0.1")
    assert proxy.get(join, HTTP_X_FORWARDED_FOR="198.51.100.1").status_code == 404
    assert proxy.get(join, HTTP_X_FORWARDED_FOR="198.51.100.2").status_code == 404
    again = proxy.get(join, HTTP_X_FORWARDED_FOR="203.0.113.9, 198.51.100.1")  # forged first
    assert again.status_code == 429


def test_wrong_api_tokens_from_one_address_are_refused_with_429_before_being_looked_at(
    settings, monkeypatch, researcher
):
    """DRF authenticates before it throttles: a wrong token got 401 however often it was sent.
    Failures are counted per address; over the limit even a right token waits (its address is
    the guesser's), another address is not held back, and the window frees it again."""
    from knox.models import AuthToken

    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "api-bad-tokens": "3/hour"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    cache.clear()
    now = [1_000_000.0]
    monkeypatch.setattr(SimpleRateThrottle, "timer", staticmethod(lambda: now[0]))
    _, key = AuthToken.objects.create(user=researcher)
    url = reverse("annotate-api:benchmark-list")

    def get(token: str, address: str = "203.0.113.7"):
        return APIClient().get(url, HTTP_AUTHORIZATION=f"Token {token}", REMOTE_ADDR=address)

    assert [get("0" * 64).status_code for _ in range(3)] == [401, 401, 401]
    refused = get("1" * 64)
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert get(key).status_code == 429  # not even looked at from this address
    assert get(key, address="198.51.100.2").status_code == 200
    assert APIClient().get(url, REMOTE_ADDR="203.0.113.7").status_code == 401  # no token: as before
    now[0] += 3600
    assert get(key).status_code == 200
    cache.clear()
