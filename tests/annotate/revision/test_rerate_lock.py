"""The study's row lock of a re-rating sample (PostgreSQL): it makes two samples of a study wait
for each other, and holds up nothing else of the study, so an annotator starting a session
there while a sample is sent does not wait for it."""

import threading

import pytest
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from annotate.revision.models import Rerating, RevisionSession, Turn
from annotate.revision.services import reratings, sessions
from annotate.revision.services.sessions import session_assign
from tests.annotate.revision.conftest import make_live_study
from tests.factories import UserFactory
from tests.threads import in_thread


def _finished_sessions(study) -> list:
    """ana and ben, experts (an undecided account's turns are never sampled), each finished one
    session of one rated turn; two pairs are left free."""
    users = [UserFactory(username=name, kind="expert") for name in ("ana", "ben")]
    for user, question, system in zip(
        users, study.questions.all(), study.systems.all(), strict=True
    ):
        session = RevisionSession.objects.create(
            study=study, question=question, system=system, annotator=user,
            status="finished", initial_answer="a0", created_at=timezone.now(),
        )  # fmt: skip
        Turn.objects.create(
            session=session, position=1, instruction="i", answer="a", rating="good", comment="c"
        )
    return users


def _sample(study, annotators):
    return reratings.reratings_sample(
        study=study, annotators=annotators, size=1, seed=0, now=timezone.now(), sent_before=0
    )


def _with_lock_timeout(action):
    """Run `action` in a transaction that waits at most 2 s for a lock (then raises)."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '2s'")
        return action()


@pytest.mark.django_db(transaction=True)
def test_a_sample_in_progress_holds_up_another_sample_but_not_a_session_start(
    tmp_path, settings, monkeypatch
):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks: SQLite runs one writer at a time")
    study = make_live_study(tmp_path, settings)
    annotators = _finished_sessions(study)
    monkeypatch.setattr(sessions, "generation_enqueue", lambda **job: None)
    real, locked, go = reratings.rerate_candidates, threading.Event(), threading.Event()

    def candidates_held(**kwargs):  # the study's row is locked by now, nothing sent yet
        locked.set()
        go.wait(30)
        return real(**kwargs)

    monkeypatch.setattr(reratings, "rerate_candidates", candidates_held)
    sent = []
    sample = in_thread(lambda: _sample(study, annotators), sent)
    try:
        assert locked.wait(30)
        # A session going in references the study (FOR KEY SHARE on its row): not held up.
        cara = UserFactory(username="cara")
        started = _with_lock_timeout(
            lambda: session_assign(study=study, user=cara, now=timezone.now())
        )
        assert started.annotator == cara
        # A second sample of the study waits for the first (the double-send guard's lock).
        with pytest.raises(OperationalError, match="lock timeout"):
            _with_lock_timeout(lambda: _sample(study, annotators))
    finally:
        go.set()
        sample.join(30)
    assert len(sent[0]) == 1, sent
    assert Rerating.objects.count() == 1
