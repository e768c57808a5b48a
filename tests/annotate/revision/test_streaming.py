"""A streamed answer: its text so far is on the pending row and in the page's state while the
model writes, never the answer; a broken stream is a failure with Retry. Real HTTP to the stub."""

import itertools

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.engine.services import endpoint_create
from annotate.revision.models import CallStatus, RevisionSession, StudySystem
from annotate.revision.services.generation import PartialWriter, session_generate_initial
from annotate.revision.services.sessions import session_assign
from annotate.roles import ANNOTATOR
from tests.evaluation.openai_stub import StubOpenAI
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
ANSWER = "Retrieval models cite the passages they fetch [0]."


@pytest.fixture
def annotator(db):
    return UserFactory(username="stream-annotator", roles=[ANNOTATOR])


def streaming_session(study, annotator, base_url: str, **fields) -> RevisionSession:
    endpoint_create(name="streamer", model="m", base_url=base_url, stream=True, **fields)
    StudySystem.objects.filter(study=study).update(endpoint_name="streamer")
    return session_assign(study=study, user=annotator, now=timezone.now())  # pending: not run


def test_the_partial_answer_is_in_the_state_before_the_answer_is_done(client, study, annotator):
    client.force_login(annotator)
    with StubOpenAI(replies=[ANSWER]) as stub:
        session = streaming_session(study, annotator, stub.base_url)
        state_url = reverse("revision:session-state", args=[session.pk])
        seen = []
        session_generate_initial(
            session_id=session.pk,
            clock=itertools.count().__next__,  # a second a piece: every piece is stored
            on_partial=lambda text: seen.append(client.get(state_url).json()),
        )
    assert stub.requests[0]["stream"] is True
    words = ANSWER.split(" ")
    assert [state["partial"] for state in seen] == [
        " ".join(words[:n]) for n in range(1, len(words) + 1)
    ]
    assert all(s["waiting"] and not s["failed"] and s["answer"] is None for s in seen)
    done = client.get(state_url).json()
    assert (done["waiting"], done["failed"], done["partial"], done["answer"]) == (
        False,
        False,
        "",
        ANSWER,
    )
    assert [p["title"] for p in done["passages"]][:1] == ["Paper Zero"]
    session.refresh_from_db()
    assert (session.initial_status, session.initial_answer, session.initial_partial) == (
        CallStatus.DONE,
        ANSWER,
        "",
    )


def test_a_broken_stream_is_a_failure_with_retry_and_its_text_is_never_the_answer(
    client, study, annotator
):
    client.force_login(annotator)
    with StubOpenAI(replies=[ANSWER]) as stub:
        stub.break_stream_after = 4  # role and three words, then the connection closes
        session = streaming_session(study, annotator, stub.base_url, max_retries=0)
        seen = []
        session_generate_initial(
            session_id=session.pk, clock=itertools.count().__next__, on_partial=seen.append
        )
    assert seen == ["Retrieval", "Retrieval models", "Retrieval models cite"]
    session.refresh_from_db()
    assert session.initial_status == CallStatus.FAILED
    assert (session.initial_answer, session.initial_partial) == ("", "")
    assert "the stream ended before the reply was complete" in session.initial_error
    state = client.get(reverse("revision:session-state", args=[session.pk])).json()
    assert (state["failed"], state["partial"], state["answer"]) == (True, "", None)
    page = client.get(reverse("revision:session", args=[session.pk])).content.decode()
    assert 'id="retry"' in page and "Retrieval models cite" not in page


def test_partial_text_is_stored_at_most_every_quarter_second():
    stored = []
    times = iter([0.0, 0.1, 0.2, 0.3, 0.5, 0.56])
    writer = PartialWriter(stored.append, clock=times.__next__)
    for text in ["a", "ab", "abc", "abcd", "abcde", "abcdef"]:
        writer(text)
    assert stored == ["a", "abcd", "abcdef"]  # at 0.0, 0.3 and 0.56
