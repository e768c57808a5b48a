"""API tokens (django-rest-knox): made on /accounts/tokens/, sent as "Authorization: Token <key>",
acting with the user's own role; revoked or expired ones answer 401."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

BENCHMARKS = "/api/annotate/benchmarks/"  # researchers and admins only


def token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def shown_key(response) -> str | None:
    match = re.search(r'<code id="new-token">([0-9a-f]+)</code>', response.content.decode())
    return match.group(1) if match else None


def create_on_page(client: Client) -> str:
    response = client.post(reverse("api-tokens"), {"action": "create"}, follow=True)
    assert response.redirect_chain == [(reverse("api-tokens"), 302)]
    key = shown_key(response)
    assert key, "the new key is shown on the page"
    return key


def test_a_token_from_the_page_authenticates_the_api_as_its_user(researcher):
    key = create_on_page(page_client(researcher))
    answer = token_client(key).get(BENCHMARKS)
    assert answer.status_code == 200
    assert answer.wsgi_request.user == researcher


def test_an_annotators_token_cannot_do_what_researchers_do(annotator_user):
    key = create_on_page(page_client(annotator_user))
    client = token_client(key)
    assert client.get(BENCHMARKS).status_code == 404
    refused = client.post("/api/judge/runs/", {"judge": "x", "benchmark": "y"}, format="json")
    assert refused.status_code == 404


def test_anonymous_api_requests_answer_401_with_www_authenticate():
    answer = APIClient().get(BENCHMARKS)
    assert answer.status_code == 401
    assert answer["WWW-Authenticate"] == "Token"


def test_a_revoked_token_answers_401(researcher):
    client = page_client(researcher)
    key = create_on_page(client)
    (token,) = AuthToken.objects.filter(user=researcher)
    response = client.post(reverse("api-tokens"), {"action": "revoke", "token": token.digest})
    assert response.status_code == 302
    answer = token_client(key).get(BENCHMARKS)
    assert answer.status_code == 401
    assert answer["WWW-Authenticate"] == "Token"


def test_an_expired_token_answers_401(researcher):
    _, key = AuthToken.objects.create(user=researcher)
    AuthToken.objects.filter(user=researcher).update(expiry=timezone.now() - timedelta(seconds=1))
    assert token_client(key).get(BENCHMARKS).status_code == 401


def test_a_new_token_expires_after_the_configured_days(researcher, settings):
    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_TTL": timedelta(days=7)}
    create_on_page(page_client(researcher))
    (token,) = AuthToken.objects.filter(user=researcher)
    assert abs(token.expiry - (token.created + timedelta(days=7))) < timedelta(seconds=5)


def test_the_tokens_list_gives_created_and_expiry_in_utc_and_says_so(researcher):
    client = page_client(researcher)
    create_on_page(client)
    (token,) = AuthToken.objects.filter(user=researcher)
    listing = client.get(reverse("api-tokens")).content.decode()
    for moment in (token.created, token.expiry):
        assert f"<td>{moment:%Y-%m-%d %H:%M} UTC</td>" in listing


def test_the_key_is_shown_once_and_never_stored(researcher):
    client = page_client(researcher)
    key = create_on_page(client)
    listing = client.get(reverse("api-tokens"))
    assert listing.status_code == 200
    assert key not in listing.content.decode()
    assert len(listing.context["tokens"]) == 1
    assert not AuthToken.objects.filter(digest=key).exists()
    assert not AuthToken.objects.filter(token_key=key).exists()


def test_create_redirects_and_a_reload_makes_no_second_token(researcher):
    client = page_client(researcher)
    made = client.post(reverse("api-tokens"), {"action": "create"})
    assert made.status_code == 302
    assert made["Location"] == reverse("api-tokens")
    assert shown_key(made) is None
    shown = client.get(reverse("api-tokens"))
    key = shown_key(shown)
    assert key is not None
    assert "no-store" in shown["Cache-Control"]
    assert token_client(key).get(BENCHMARKS).status_code == 200
    reloaded = client.get(reverse("api-tokens"))
    assert reloaded.status_code == 200
    assert shown_key(reloaded) is None
    assert key not in reloaded.content.decode()
    assert key not in str(dict(client.session)), "the session forgets the key once shown"
    assert AuthToken.objects.filter(user=researcher).count() == 1


def test_the_session_row_never_holds_the_new_key(researcher):
    """Sessions are database rows kept for weeks (and in backups), knox stores only a hash of
    a key: the key waiting for the page after the redirect is not in the session's data."""
    client = page_client(researcher)
    client.post(reverse("api-tokens"), {"action": "create"})
    stored = Session.objects.get(session_key=client.session.session_key).get_decoded()
    key = shown_key(client.get(reverse("api-tokens")))
    assert key is not None and token_client(key).get(BENCHMARKS).status_code == 200
    assert key not in str(stored)


def test_the_new_key_is_shown_only_with_both_of_its_halves(researcher):
    """The browser's half of the key (a cookie of the tokens page) shows nothing in another
    session, nor the session's half without it; the session's half goes once asked for."""
    client = page_client(researcher)
    made = client.post(reverse("api-tokens"), {"action": "create"})
    (pad,) = [c for c in made.cookies.values() if c["path"] == reverse("api-tokens")]
    assert pad["httponly"] and pad["max-age"]
    stranger = page_client(researcher)
    stranger.cookies[pad.key] = pad.value
    assert shown_key(stranger.get(reverse("api-tokens"))) is None
    del client.cookies[pad.key]
    assert shown_key(client.get(reverse("api-tokens"))) is None
    client.cookies[pad.key] = pad.value
    assert shown_key(client.get(reverse("api-tokens"))) is None


def test_the_new_key_is_shown_only_in_its_users_session(researcher):
    client = page_client(researcher)
    client.post(reverse("api-tokens"), {"action": "create"})
    other_session = page_client(researcher)
    assert shown_key(other_session.get(reverse("api-tokens"))) is None
    assert shown_key(client.get(reverse("api-tokens"))) is not None


def test_the_page_lists_and_revokes_only_the_users_own_tokens(researcher, admin_user):
    other, _ = AuthToken.objects.create(user=researcher)
    client = page_client(admin_user)
    create_on_page(client)
    listing = client.get(reverse("api-tokens"))
    assert [token.user for token in listing.context["tokens"]] == [admin_user]
    assert other.digest not in listing.content.decode()
    refused = client.post(reverse("api-tokens"), {"action": "revoke", "token": other.digest})
    assert refused.status_code == 404
    client.post(reverse("api-tokens"), {"action": "revoke-all"})
    assert list(AuthToken.objects.values_list("user", flat=True)) == [researcher.pk]


def test_the_django_admin_cannot_list_or_make_anyones_tokens(researcher):
    # A staff user making a key for someone else could act as them through the API.
    AuthToken.objects.create(user=researcher)
    superuser = UserFactory(username="root-user", is_staff=True, is_superuser=True)
    client = page_client(superuser)
    assert client.get("/admin/").status_code == 200
    assert client.get("/admin/knox/authtoken/").status_code == 404
    assert client.get("/admin/knox/authtoken/add/").status_code == 404


def test_the_pages_posts_need_the_csrf_token(researcher):
    token, _ = AuthToken.objects.create(user=researcher)
    client = Client(enforce_csrf_checks=True)
    client.force_login(researcher)
    for data in ({"action": "create"}, {"action": "revoke", "token": token.digest}):
        assert client.post(reverse("api-tokens"), data).status_code == 403
    assert client.post(reverse("api-tokens"), {"action": "revoke-all"}).status_code == 403
    assert list(AuthToken.objects.all()) == [token]


def test_making_tokens_is_rate_limited_per_user(researcher, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {
            **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],
            "api-tokens": "2/hour",
        },
    }
    cache.clear()
    client = page_client(researcher)
    create_on_page(client)
    create_on_page(client)
    refused = client.post(reverse("api-tokens"), {"action": "create"})
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert AuthToken.objects.filter(user=researcher).count() == 2
    # Another user has a limit of their own.
    create_on_page(page_client(UserFactory(username="someone-else")))


@pytest.mark.parametrize(("days", "ttl"), [("7", "7 days, 0:00:00"), ("0", "None")])
def test_the_token_lifetime_comes_from_the_environment(days, ttl):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "API_TOKEN_TTL_DAYS": days,
    }
    code = "import django; django.setup(); from knox.settings import knox_settings; print(knox_settings.TOKEN_TTL)"
    shown = subprocess.run(
        [sys.executable, "-c", code],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert shown.stdout.strip() == ttl


def test_a_key_kept_whole_in_a_session_before_the_halves_is_dropped_unseen(researcher):
    client = page_client(researcher)
    session = client.session
    session["api_token_new_key"] = "ab" * 32  # as the page kept a new key before
    session.save()
    assert shown_key(client.get(reverse("api-tokens"))) is None
    assert "api_token_new_key" not in client.session
