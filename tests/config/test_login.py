"""Every password check is limited by django-axes: the login form, the admin login, the API's
HTTP Basic authentication and so the session the API accepts. Once an address or a username is
locked out, the right password does not work either, on any path, until the window passes."""

from __future__ import annotations

import base64
import os

import pytest
from axes.handlers.proxy import AxesProxyHandler
from django.core.cache import caches
from django.test import override_settings
from django.urls import reverse

from tests.factories import BenchmarkFactory

pytestmark = pytest.mark.django_db

REDIS_URL = os.environ.get("CACHE_URL") or os.environ.get("CELERY_BROKER_URL") or ""
COUNTERS = {
    # The embedded default (no CACHE_URL): counters in the database, shared by every process.
    "database": {
        "AXES_HANDLER": "axes.handlers.database.AxesDatabaseHandler",
        "CACHES": {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
    },
    # Production (CACHE_URL): counters in Redis.
    "redis": {
        "AXES_HANDLER": "axes.handlers.cache.AxesCacheHandler",
        "CACHES": {
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": REDIS_URL,
                "KEY_PREFIX": "test-login",
            }
        },
    },
}


@pytest.fixture(params=list(COUNTERS))
def login_counters(request):
    """Run the test with the failure counters in the database, then in Redis (if configured)."""
    if request.param == "redis" and not REDIS_URL.startswith("redis://"):
        pytest.skip("no Redis configured (CACHE_URL or CELERY_BROKER_URL)")
    with override_settings(**COUNTERS[request.param]):
        caches["default"].clear()
        AxesProxyHandler.get_implementation(force=True)  # it keeps the handler it was built with
        yield request.param
        caches["default"].clear()
    AxesProxyHandler.get_implementation(force=True)


def basic(username: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


def form_login(client, username: str, password: str, address: str = "127.0.0.1"):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


@pytest.fixture
def api(db) -> str:
    """An API page a researcher may read (the report of an empty benchmark)."""
    return f"/api/reports/{BenchmarkFactory().pk}/"


@override_settings(AXES_FAILURE_LIMIT=3)
def test_login_is_refused_after_repeated_failures_even_with_the_right_password(
    client, researcher, login_counters
):
    for _ in range(2):
        page = form_login(client, researcher.username, "wrong")
        assert page.status_code == 200
        assert "didn&#x27;t match" in page.text or "didn't match" in page.text
    assert form_login(client, researcher.username, "wrong").status_code == 429  # the third
    page = form_login(client, researcher.username, "pw")
    assert page.status_code == 429
    assert "Too many failed attempts" in page.text
    assert "_auth_user_id" not in client.session


def test_login_works_with_the_right_password(client, researcher, login_counters):
    page = form_login(client, researcher.username, "pw")
    assert page.status_code == 302
    assert client.session["_auth_user_id"] == str(researcher.pk)


def test_30_wrong_passwords_over_http_basic_lock_the_api_and_the_form(
    client, researcher, login_counters, api, settings
):
    assert client.get(api, **basic(researcher.username, "pw")).status_code == 200
    limit = settings.AXES_FAILURE_LIMIT
    answers = [client.get(api, **basic(researcher.username, f"guess{n}")) for n in range(30)]
    assert {answer.status_code for answer in answers[: limit - 1]} == {401}
    assert {answer.status_code for answer in answers[limit - 1 :]} == {429}
    right = client.get(api, **basic(researcher.username, "pw"))
    assert right.status_code == 429
    assert "Too many failed attempts" in right.json()["detail"]
    # The same username from another address is locked on the login form too.
    page = form_login(client, researcher.username, "pw", address="10.0.0.7")
    assert page.status_code == 429 and "_auth_user_id" not in client.session
    # And the API's session authentication gets no session to use.
    assert client.get(api).status_code == 401


def test_failures_on_the_form_lock_http_basic(client, researcher, login_counters, settings, api):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        form_login(client, researcher.username, "wrong")
    assert client.get(api, **basic(researcher.username, "pw")).status_code == 429


def test_one_address_trying_many_usernames_is_locked(client, researcher, login_counters, settings):
    for n in range(settings.AXES_FAILURE_LIMIT):
        form_login(client, f"nobody{n}", "wrong", address="10.9.9.9")
    assert form_login(client, researcher.username, "pw", address="10.9.9.9").status_code == 429
    # Another address is not affected by that address's failures.
    assert form_login(client, researcher.username, "pw", address="10.1.1.1").status_code == 302


def test_admin_login_goes_through_the_limited_login_page(client):
    page = client.get("/admin/login/?next=/admin/")
    assert page.status_code == 302 and page["Location"].startswith(reverse("login"))


def test_a_locked_out_admin_cannot_log_in_through_the_admin_either(
    client, admin_user, login_counters, settings
):
    admin_user.set_password("pw")
    admin_user.save()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        form_login(client, admin_user.username, "wrong")
    page = client.post(
        "/admin/login/?next=/admin/",
        {"username": admin_user.username, "password": "pw"},
        follow=True,
    )
    assert "_auth_user_id" not in client.session
    assert client.get("/admin/").status_code == 302
    assert page.status_code in {200, 405, 429}


def test_behind_a_trusted_proxy_the_lockout_counts_the_clients_address(
    client, researcher, login_counters, settings
):
    """Behind a reverse proxy every REMOTE_ADDR is the proxy's: ten failures anywhere locked
    everyone out. With TRUSTED_PROXY_COUNT=1 the login limit takes the client's address from
    the proxy's X-Forwarded-For, as the page and API limits do; without it a client's own
    header is ignored (a made-up one per request would escape the limit)."""
    proxy = {"REMOTE_ADDR": "10.0.0.1"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    for n in range(settings.AXES_FAILURE_LIMIT):
        client.post(
            reverse("login"),
            {"username": f"nobody{n}", "password": "wrong"},
            HTTP_X_FORWARDED_FOR="203.0.113.9",
            **proxy,
        )
    login = {"username": researcher.username, "password": "pw"}
    locked = client.post(reverse("login"), login, HTTP_X_FORWARDED_FOR="203.0.113.9", **proxy)
    assert locked.status_code == 429
    other = client.post(reverse("login"), login, HTTP_X_FORWARDED_FOR="198.51.100.4", **proxy)
    assert other.status_code == 302  # another client behind the same proxy is not locked out
    client.logout()
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 0}
    ignored = client.post(reverse("login"), login, HTTP_X_FORWARDED_FOR="198.51.100.4", **proxy)
    assert ignored.status_code == 302  # the proxy's own address has no failures
    client.logout()
    for n in range(settings.AXES_FAILURE_LIMIT):
        form_login(client, f"again{n}", "wrong", address="10.0.0.1")
    forged = client.post(reverse("login"), login, HTTP_X_FORWARDED_FOR="192.0.2.77", **proxy)
    assert forged.status_code == 429  # a made-up header does not escape the address's lockout


def test_the_login_page_tells_a_logged_in_user_so_instead_of_asking_again(client, researcher):
    client.force_login(researcher)
    page = client.get(reverse("login"))
    assert page.status_code == 200
    assert f"You are logged in as <strong>{researcher.username}</strong>." in page.text
    assert 'name="password"' not in page.text
    assert f'<a href="{reverse("home")}">Continue to the start page</a>' in page.text
    # Logging out from here comes back to the form, to log in as someone else.
    logged_out = client.post(reverse("logout"), {"next": reverse("login")})
    assert logged_out.status_code == 302 and logged_out["Location"] == reverse("login")
    assert 'name="password"' in client.get(reverse("login")).text


def test_a_logged_in_user_continues_to_the_page_next_names_and_nowhere_else(client, researcher):
    client.force_login(researcher)
    page = client.get(reverse("login"), {"next": "/benchmarks/"})
    assert '<a href="/benchmarks/">Continue</a>' in page.text
    assert f'value="{reverse("login")}?next=/benchmarks/"' in page.text  # kept over a log-out
    elsewhere = client.get(reverse("login"), {"next": "https://evil.example/"})
    assert "evil.example" not in elsewhere.text
    assert f'<a href="{reverse("home")}">Continue to the start page</a>' in elsewhere.text
