"""Reopening a given-up session (researchers): its (question, system) goes back to the
annotators, the given-up session is kept with who and when, and a pair that has a session
already is not reopened."""

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.errors import ConflictError
from annotate.revision.models import CallStatus, RevisionSession
from annotate.revision.selectors import study_collection_progress
from annotate.revision.services.sessions import session_assign, session_give_up, session_reopen
from annotate.roles import ANNOTATOR
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def people():
    return {name: UserFactory(username=name, roles=[ANNOTATOR]) for name in ("ana", "ben")}


def given_up(study, user) -> RevisionSession:
    """`user` starts a session, its first answer fails, and they give it up."""
    session = session_assign(study=study, user=user, now=timezone.now())
    RevisionSession.objects.filter(pk=session.pk).update(
        initial_status=CallStatus.FAILED, initial_error="no API key"
    )
    return session_give_up(session_id=session.pk, user=user, now=timezone.now())


def reopen_url(session) -> str:
    return reverse("revision:session-reopen", args=[session.pk])


def report_url(study) -> str:
    return reverse("revision-reports:report", args=[study.pk])


def test_a_researcher_reopens_a_given_up_session_and_its_pair_goes_to_another_annotator(
    client, researcher, study, people
):
    """A given-up session held its (question, system) for good: only an admin deleting it (and
    its trace) handed the pair out again once the endpoint answered."""
    ana, ben = people["ana"], people["ben"]
    broken = given_up(study, ana)
    pair = (broken.question_id, broken.system_id)
    client.force_login(researcher)
    report = client.get(report_url(study)).text
    assert 'id="given-up-sessions"' in report and f'action="{reopen_url(broken)}"' in report
    assert f"by ana, {broken.given_up_at:%Y-%m-%d %H:%M} UTC" in report

    before = timezone.now()
    reopened = client.post(reopen_url(broken), follow=True)
    assert reopened.redirect_chain == [(report_url(study) + "#given-up-sessions", 302)]
    assert (
        f"Session {broken.pk} reopened: “{broken.question.text}” with alpha goes to the next "
        in (reopened.text)
    )
    assert "(not ana, who gave it up). The given-up session is kept." in reopened.text
    kept = RevisionSession.objects.get(pk=broken.pk)
    assert (kept.status, kept.given_up_by, kept.given_up_at) == (
        "given-up",
        ana,
        broken.given_up_at,
    )
    assert kept.reopened_by == researcher and kept.reopened_at >= before
    assert study_collection_progress(study=study).given_up == 0  # the pair is not held

    # The pair goes to the next annotator; the one who gave it up saw its question.
    taken = session_assign(study=study, user=ben, now=timezone.now())
    assert (taken.question_id, taken.system_id) == pair
    assert session_assign(study=study, user=ana, now=timezone.now()).question_id != pair[0]
    report = client.get(report_url(study)).text
    assert f"now session {taken.pk} by ben, in progress" in report
    assert f'action="{reopen_url(broken)}"' not in report


def test_a_session_not_given_up_or_whose_pair_has_a_session_is_not_reopened(
    client, researcher, study, people
):
    ana, ben = people["ana"], people["ben"]
    now = timezone.now()
    active = session_assign(study=study, user=ben, now=now)
    with pytest.raises(ConflictError, match="is in progress, not given up: only a given-up"):
        session_reopen(session_id=active.pk, user=researcher, now=now)

    broken = given_up(study, ana)
    session_reopen(session_id=broken.pk, user=researcher, now=now)
    with pytest.raises(ConflictError, match=f"reopened already, by {researcher.username} at "):
        session_reopen(session_id=broken.pk, user=researcher, now=timezone.now())

    cara = UserFactory(username="cara", roles=[ANNOTATOR])
    taken = session_assign(study=study, user=cara, now=now)
    assert (taken.question_id, taken.system_id) == (broken.question_id, broken.system_id)
    client.force_login(researcher)
    refused = client.post(reopen_url(broken), follow=True).text
    assert (
        f"Not reopened: session {broken.pk}&#x27;s question and system {broken.system.name} "
        f"already have session {taken.pk} by cara, in progress." in refused
    )
    assert RevisionSession.objects.get(pk=broken.pk).reopened_at == now  # unchanged

    # The pair's new session given up in turn is reopened on its own.
    RevisionSession.objects.filter(pk=taken.pk).update(initial_status=CallStatus.FAILED)
    session_give_up(session_id=taken.pk, user=cara, now=now)
    assert client.post(reopen_url(taken)).status_code == 302
    assert RevisionSession.objects.get(pk=taken.pk).reopened_by == researcher


def test_annotators_cannot_reopen(client, study, people):
    broken = given_up(study, people["ana"])
    for who in (people["ana"], people["ben"]):
        client.force_login(who)
        assert client.post(reopen_url(broken)).status_code == 403
    assert RevisionSession.objects.get(pk=broken.pk).reopened_at is None
    assert client.get(reopen_url(broken)).status_code == 405


def test_a_held_pair_is_counted_alike_in_the_progress_and_an_annotators_list(study):
    """The study's progress (given up) and an annotator's list of studies (`held`: why no
    question may be left for them) count the same given-up sessions: an annotator's, not
    reopened, on a live system and a question with papers (given_up_holding_q)."""
    from annotate.revision.models import StudyQuestion, StudySystem
    from annotate.revision.selectors import studies_for_annotator

    now = timezone.now()
    q1, q2 = study.questions.order_by("position")
    alpha, beta = study.systems.order_by("position")
    unticked = StudySystem.objects.create(study=study, name="gamma", position=3, live=False)
    no_papers = StudyQuestion.objects.create(study=study, position=3, text="No papers yet?")

    def given_up_on(question, system, name, **fields):
        annotator = UserFactory(username=name, roles=[ANNOTATOR]) if name else None
        return RevisionSession.objects.create(
            study=study, question=question, system=system, annotator=annotator,
            status="given-up", created_at=now, given_up_at=now, **fields,
        )  # fmt: skip

    given_up_on(q1, alpha, "held-1")
    given_up_on(q2, alpha, "held-2")
    given_up_on(q1, beta, "reopened", reopened_at=now)
    given_up_on(q2, unticked, "not-live")
    given_up_on(no_papers, alpha, "no-papers")
    given_up_on(q2, beta, None)  # imported: a record, it holds nothing
    newcomer = UserFactory(username="newcomer", roles=[ANNOTATOR])

    (row,) = [r for r in studies_for_annotator(user=newcomer) if r["study"] == study]
    assert row["held"] == study_collection_progress(study=study).given_up == 2
