"""The session back-end (config.sessions): Django's database sessions, read in plain SQL."""

from datetime import timedelta

import pytest
from django.contrib.sessions.models import Session
from django.utils import timezone

from config.sessions import SessionStore

pytestmark = pytest.mark.django_db


def test_a_stored_session_reads_back():
    stored = SessionStore()
    stored["answer"] = 42
    stored.save()
    assert SessionStore(stored.session_key)["answer"] == 42


def test_an_expired_or_unknown_session_reads_empty_and_forgets_its_key():
    stored = SessionStore()
    stored["answer"] = 42
    stored.save()
    Session.objects.filter(pk=stored.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    for key in (stored.session_key, "x" * 32):
        session = SessionStore(key)
        assert session.load() == {}
        assert session.session_key is None


def test_reading_a_session_is_one_query(client, annotator_user, django_assert_num_queries):
    client.force_login(annotator_user)
    with django_assert_num_queries(1) as captured:
        SessionStore(client.session.session_key).load()
    assert "django_session" in captured.captured_queries[0]["sql"]
