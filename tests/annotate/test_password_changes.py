"""A password change revokes the user's API tokens, whichever way it was made; a login (and
Django's rehash of the password on it) does not. The tokens page says why they stopped."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from knox.models import AuthToken
from rest_framework.test import APIClient

from annotate.models import PasswordTokenRevocation
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

BENCHMARKS = "/api/annotate/benchmarks/"  # researchers and admins only
NEW_PASSWORD = "a-long-new-passphrase-41"


def api_status(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get(BENCHMARKS).status_code


def page_text(response) -> str:
    return " ".join(response.content.decode().split())


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def superuser(db):
    return UserFactory(username="root-user", is_staff=True, is_superuser=True)


def test_changing_ones_own_password_on_the_admin_page_revokes_ones_tokens(superuser, researcher):
    _, key = AuthToken.objects.create(user=superuser)
    _, others_key = AuthToken.objects.create(user=researcher)
    assert api_status(key) == 200
    client = logged_in(superuser)
    changed = client.post(
        "/admin/password_change/",
        {"old_password": "pw", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert changed.status_code == 302
    assert api_status(key) == 401
    assert api_status(others_key) == 200
    notice = page_text(client.get(reverse("api-tokens")))
    assert 'id="password-revocation"' in notice
    assert "your 1 API token was revoked" in notice


def test_an_admin_setting_a_users_password_revokes_that_users_tokens(superuser, researcher):
    _, key = AuthToken.objects.create(user=researcher)
    AuthToken.objects.create(user=researcher)
    _, own_key = AuthToken.objects.create(user=superuser)
    changed = logged_in(superuser).post(
        f"/admin/auth/user/{researcher.pk}/password/",
        {"usable_password": "true", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
    )
    assert changed.status_code == 302
    assert api_status(key) == 401
    assert not AuthToken.objects.filter(user=researcher).exists()
    assert api_status(own_key) == 200
    (revocation,) = PasswordTokenRevocation.objects.all()
    assert (revocation.user, revocation.token_count) == (researcher, 2)
    researcher.refresh_from_db()  # a session is tied to the password: log in with the new one
    page = logged_in(researcher).get(reverse("api-tokens"))
    assert page.context["password_revocation"] == revocation
    assert "your 2 API tokens were revoked" in page_text(page)


def test_an_admin_disabling_a_users_password_revokes_their_tokens(superuser, researcher):
    _, key = AuthToken.objects.create(user=researcher)
    changed = logged_in(superuser).post(
        f"/admin/auth/user/{researcher.pk}/password/",
        {"usable_password": "false", "unset-password": "1"},
    )
    assert changed.status_code == 302
    researcher.refresh_from_db()
    assert not researcher.has_usable_password()
    assert api_status(key) == 401


def test_the_changepassword_command_revokes_the_users_tokens(researcher, monkeypatch):
    _, key = AuthToken.objects.create(user=researcher)
    monkeypatch.setattr("getpass.getpass", lambda prompt="": NEW_PASSWORD)
    call_command("changepassword", researcher.username)
    researcher.refresh_from_db()
    assert researcher.check_password(NEW_PASSWORD)
    assert api_status(key) == 401


def test_code_setting_a_password_revokes_the_users_tokens(researcher):
    _, key = AuthToken.objects.create(user=researcher)
    user = get_user_model().objects.get(pk=researcher.pk)
    user.set_password("pw")  # the same password again is still a change of the hash
    user.save()
    assert api_status(key) == 401


def test_code_assigning_a_new_hash_revokes_the_users_tokens(researcher):
    _, key = AuthToken.objects.create(user=researcher)
    researcher.password = make_password(NEW_PASSWORD)
    researcher.save(update_fields=["password"])
    assert api_status(key) == 401


def test_saving_the_user_without_a_new_password_keeps_the_tokens(researcher):
    _, key = AuthToken.objects.create(user=researcher)
    user = get_user_model().objects.get(pk=researcher.pk)
    user.first_name = "Ada"
    user.save()
    assert api_status(key) == 200
    assert not PasswordTokenRevocation.objects.exists()


def test_logging_in_keeps_the_tokens_even_when_django_rehashes_the_password(researcher):
    # A hash with a short salt is one the MD5 hasher of the test settings upgrades on login.
    weak = make_password("pw", salt="ab", hasher="md5")
    get_user_model().objects.filter(pk=researcher.pk).update(password=weak)
    _, key = AuthToken.objects.create(user=researcher)
    answer = Client().post(reverse("login"), {"username": researcher.username, "password": "pw"})
    assert answer.status_code == 302
    researcher.refresh_from_db()
    assert researcher.password != weak, "the login rehashed the password"
    assert researcher.last_login is not None
    assert api_status(key) == 200
    assert not PasswordTokenRevocation.objects.exists()


def test_http_basic_login_with_a_rehash_keeps_the_tokens(researcher):
    weak = make_password("pw", salt="ab", hasher="md5")
    get_user_model().objects.filter(pk=researcher.pk).update(password=weak)
    _, key = AuthToken.objects.create(user=researcher)
    basic = APIClient()
    basic.credentials(HTTP_AUTHORIZATION="Basic cmVzZWFyY2hlci11c2VyOnB3")  # researcher-user:pw
    assert basic.get(BENCHMARKS).status_code == 200
    researcher.refresh_from_db()
    assert researcher.password != weak
    assert api_status(key) == 200


def test_the_notice_goes_once_a_new_token_is_made(researcher):
    AuthToken.objects.create(user=researcher)
    researcher.set_password(NEW_PASSWORD)
    researcher.save()
    client = logged_in(researcher)
    assert client.get(reverse("api-tokens")).context["password_revocation"] is not None
    client.post(reverse("api-tokens"), {"action": "create"})
    page = client.get(reverse("api-tokens"))
    assert page.context["password_revocation"] is None
    assert 'id="password-revocation"' not in page.content.decode()


def test_a_password_change_with_no_tokens_leaves_no_notice(researcher):
    researcher.set_password(NEW_PASSWORD)
    researcher.save()
    assert not PasswordTokenRevocation.objects.exists()
    page = logged_in(researcher).get(reverse("api-tokens"))
    assert page.context["password_revocation"] is None


def messages_shown(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_the_admins_own_password_change_says_their_tokens_were_revoked(superuser):
    """The admin's page said only "Your password was changed." and the scripts using the
    tokens stopped with 401 without a word."""
    AuthToken.objects.create(user=superuser)
    done = logged_in(superuser).post(
        "/admin/password_change/",
        {"old_password": "pw", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
        follow=True,
    )
    assert done.redirect_chain == [(reverse("admin:password_change_done"), 302)]
    assert messages_shown(done) == [
        "Your 1 API token was revoked with the password change: scripts using it get 401 now. "
        f"Create a new one on the API tokens page ({reverse('api-tokens')})."
    ]
    assert "Your 1 API token was revoked" in page_text(done)


def test_an_admin_setting_a_users_password_is_told_their_tokens_were_revoked(superuser, researcher):
    AuthToken.objects.create(user=researcher)
    AuthToken.objects.create(user=researcher)
    changed = logged_in(superuser).post(
        f"/admin/auth/user/{researcher.pk}/password/",
        {"usable_password": "true", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
        follow=True,
    )
    assert messages_shown(changed) == [
        "Password changed successfully.",
        "The 2 API tokens of researcher-user were revoked with the password change: scripts "
        "using them get 401 now; their API tokens page tells them why.",
    ]
    assert "The 2 API tokens of researcher-user were revoked" in page_text(changed)


def test_an_admin_disabling_a_users_password_is_told_their_tokens_were_revoked(
    superuser, researcher
):
    AuthToken.objects.create(user=researcher)
    changed = logged_in(superuser).post(
        f"/admin/auth/user/{researcher.pk}/password/",
        {"usable_password": "false", "unset-password": "1"},
        follow=True,
    )
    assert messages_shown(changed)[1].startswith(
        "The 1 API token of researcher-user was revoked with the password change"
    )


def test_an_admin_setting_their_own_password_on_the_user_page_is_told_in_their_words(superuser):
    AuthToken.objects.create(user=superuser)
    changed = logged_in(superuser).post(
        f"/admin/auth/user/{superuser.pk}/password/",
        {"usable_password": "true", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
        follow=True,
    )
    assert messages_shown(changed)[1].startswith("Your 1 API token was revoked")


def test_a_password_change_without_tokens_says_nothing_of_tokens(superuser, researcher):
    client = logged_in(superuser)
    changed = client.post(
        f"/admin/auth/user/{researcher.pk}/password/",
        {"usable_password": "true", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
        follow=True,
    )
    assert messages_shown(changed) == ["Password changed successfully."]
    refused = client.post(
        "/admin/password_change/",
        {"old_password": "wrong", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert refused.status_code == 200 and not messages_shown(refused)


# --- A rehash is Django's upgrade of the password it has just checked, and nothing else -------

OUTDATED_HASHERS = [  # MD5 preferred: a PBKDF2 hash is upgraded on the next login
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]


def with_outdated_hash(user, settings, password: str = "pw"):
    """Store `user`'s password under a hasher the settings no longer prefer; return the hash."""
    settings.PASSWORD_HASHERS = OUTDATED_HASHERS
    outdated = make_password(password, hasher="pbkdf2_sha256")
    get_user_model().objects.filter(pk=user.pk).update(password=outdated)
    return outdated


def test_logging_in_with_a_hash_of_an_outdated_hasher_keeps_the_tokens(researcher, settings):
    outdated = with_outdated_hash(researcher, settings)
    _, key = AuthToken.objects.create(user=researcher)
    answer = Client().post(reverse("login"), {"username": researcher.username, "password": "pw"})
    assert answer.status_code == 302
    researcher.refresh_from_db()
    assert researcher.password != outdated and researcher.password.startswith("md5$")
    assert api_status(key) == 200
    assert not PasswordTokenRevocation.objects.exists()


def test_an_async_password_check_rehashing_the_password_keeps_the_tokens(researcher, settings):
    from asgiref.sync import async_to_sync

    outdated = with_outdated_hash(researcher, settings)
    _, key = AuthToken.objects.create(user=researcher)
    user = get_user_model().objects.get(pk=researcher.pk)
    assert async_to_sync(user.acheck_password)("pw")
    researcher.refresh_from_db()
    assert researcher.password != outdated
    assert api_status(key) == 200


def test_code_assigning_a_new_hash_while_the_old_one_is_outdated_revokes_the_tokens(
    researcher, settings
):
    """A new password's hash assigned directly looked like Django's upgrade of an outdated
    hash (old hasher no longer preferred, new hash of the preferred one) and kept the tokens."""
    with_outdated_hash(researcher, settings)
    _, key = AuthToken.objects.create(user=researcher)
    user = get_user_model().objects.get(pk=researcher.pk)
    user.password = make_password(NEW_PASSWORD)
    user.save()
    assert api_status(key) == 401
    (revocation,) = PasswordTokenRevocation.objects.all()
    assert revocation.token_count == 1


def test_the_same_password_hashed_anew_by_code_revokes_the_tokens(researcher, settings):
    """Only Django's rehash of the password it has just checked keeps them: code writing a
    hash cannot be told from a new password, so it counts as a change."""
    with_outdated_hash(researcher, settings)
    _, key = AuthToken.objects.create(user=researcher)
    user = get_user_model().objects.get(pk=researcher.pk)
    user.password = make_password("pw")
    user.save(update_fields=["password"])
    assert api_status(key) == 401


def test_a_rehash_on_a_refused_password_change_keeps_the_tokens(superuser, settings):
    """The admin's password form checks the old password first (Django rehashes it then); a
    form refused after that changed nothing."""
    with_outdated_hash(superuser, settings)
    superuser.refresh_from_db()  # the session is tied to the hash
    client = logged_in(superuser)
    _, key = AuthToken.objects.create(user=superuser)
    refused = client.post(
        "/admin/password_change/",
        {"old_password": "pw", "new_password1": NEW_PASSWORD, "new_password2": "other"},
    )
    assert refused.status_code == 200
    superuser.refresh_from_db()
    assert superuser.password.startswith("md5$"), "the old password's check rehashed it"
    assert api_status(key) == 200
