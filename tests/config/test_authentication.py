"""The model back-end (config.authentication): Django's, with the session's user read in plain SQL.

Who is logged in must be exactly what Django's ModelBackend would say: the same user, nobody for
an inactive or deleted one or a changed password, and sessions made under Django's back-end
still valid.
"""

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.backends import ModelBackend as DjangoModelBackend
from django.contrib.sessions.backends.db import SessionStore as DjangoSessionStore
from django.urls import reverse

from annotate.roles import ANNOTATOR
from config.authentication import DJANGO_MODEL_BACKEND, MODEL_BACKEND, ModelBackend
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_reads_the_user_django_would(annotator_user):
    ours, djangos = (
        ModelBackend().get_user(annotator_user.pk),
        DjangoModelBackend().get_user(annotator_user.pk),
    )
    assert ours == djangos == annotator_user
    fields = [field.attname for field in type(ours)._meta.concrete_fields]
    assert [getattr(ours, name) for name in fields] == [getattr(djangos, name) for name in fields]
    assert ours._state.adding is False and ours._state.db == "default"
    # The session stores the id as text.
    assert ModelBackend().get_user(str(annotator_user.pk)) == annotator_user


def test_nobody_for_an_inactive_or_missing_user(annotator_user):
    annotator_user.is_active = False
    annotator_user.save()
    assert ModelBackend().get_user(annotator_user.pk) is None
    assert ModelBackend().get_user(annotator_user.pk + 1000) is None


def test_a_login_is_recorded_with_this_backend_and_a_password_change_ends_it(client):
    user = UserFactory(username="ana", roles=[ANNOTATOR])
    user.set_password("a long enough password")
    user.save()
    client.post(reverse("login"), {"username": "ana", "password": "a long enough password"})
    assert client.session[BACKEND_SESSION_KEY] == MODEL_BACKEND
    assert client.get(reverse("work:dashboard")).status_code == 200
    user.set_password("another long password")
    user.save()
    page = client.get(reverse("work:dashboard"))
    assert page.status_code == 302 and reverse("login") in page["Location"]


def test_a_session_made_under_djangos_backend_stays_logged_in(client, annotator_user):
    session = DjangoSessionStore()
    session[SESSION_KEY] = str(annotator_user.pk)
    session[BACKEND_SESSION_KEY] = DJANGO_MODEL_BACKEND
    session[HASH_SESSION_KEY] = annotator_user.get_session_auth_hash()
    session.save()
    client.cookies["sessionid"] = session.session_key
    page = client.get(reverse("work:dashboard"))
    assert page.status_code == 200
    assert page.context["user"] == annotator_user
