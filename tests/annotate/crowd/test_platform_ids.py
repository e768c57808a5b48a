"""Worker and assignment ids MTurk never gives: refused at the HIT's page, and a worker stored
with one before is blocked, unblocked and left out of messages here without breaking the calls
to MTurk (its service refuses any call naming such an id, a message to 100 workers too)."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.models import WorkerBlock
from annotate.crowd.services import publishing, review
from annotate.crowd.services.publishing import PublishSettings
from annotate.errors import ConflictError
from annotate.models import Annotator, AnnotatorKind, Assignment, AssignmentStatus
from tests.factories import AnnotatorFactory, AssignmentFactory

pytestmark = pytest.mark.django_db
NOT_GIVEN = "is not one Amazon Mechanical Turk gives: nothing was taken."


def _open(client, fake_mturk, hit, *, worker, assignment_id):
    return client.get(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]),
        {
            "assignmentId": assignment_id,
            "hitId": hit.hit_id,
            "workerId": worker,
            "turkSubmitTo": fake_mturk.url,
        },
    )


@pytest.mark.parametrize(
    ("worker", "assignment_id", "field"),
    [
        ("W-1", "3ASSIGNMENT1", "workerId"),  # not MTurk's "A" then capitals or digits
        ("aw1", "3ASSIGNMENT1", "workerId"),
        ("A" + "1" * 64, "3ASSIGNMENT1", "workerId"),  # 65 characters: at most 64
        ("AW1\nAW2", "3ASSIGNMENT1", "workerId"),
        ("AW1", "asg-1", "assignmentId"),
        ("AW1", "3" * 65, "assignmentId"),
    ],
)
def test_the_hits_page_refuses_ids_mturk_never_gives_and_takes_nothing(
    client, live, fake_mturk, worker, assignment_id, field
):
    """Such a "worker" was stored and claimed a task; MTurk then refused every block of them."""
    hit = live.hits.order_by("id").first()

    page = _open(client, fake_mturk, hit, worker=worker, assignment_id=assignment_id)

    assert page.status_code == 400
    assert f"The {field} in this page" in page.text and NOT_GIVEN in page.text
    assert "Open this task from Amazon Mechanical Turk." in page.text
    assert not Annotator.objects.filter(platform="mturk").exists()
    assert not Assignment.objects.exists() and not page.cookies


def test_the_hits_page_still_opens_for_mturks_own_ids(client, live, fake_mturk):
    hit = live.hits.order_by("id").first()
    accepted = fake_mturk.api.worker_accept(hit.hit_id, "A" + "Z9" * 31 + "Z")  # 64 characters

    page = _open(client, fake_mturk, hit, worker="A" + "Z9" * 31 + "Z", assignment_id=accepted)

    assert page.status_code == 302
    assert Assignment.objects.get().platform_assignment_id == accepted


def test_a_self_hosted_link_keeps_the_recruiting_sites_own_ids(client, crowd_batch):
    """Prolific's participant ids are lowercase hex: the link takes them as it did."""
    link = publishing.publication_create(
        batch=crowd_batch,
        platform_name="selfhosted",
        chosen=PublishSettings(title="A study", description="d"),
        base_url="https://annotate.example.org",
    )
    join = reverse("crowd:selfhosted-join", args=[link.link_token])
    started = client.post(join, {"PROLIFIC_PID": "5f1a2b3c4d5e6f7a8b9c0d1e"})

    assert started.status_code == 302
    assert Assignment.objects.get().annotator.worker_id == "5f1a2b3c4d5e6f7a8b9c0d1e"


@pytest.fixture
def forged(db):
    """A "worker" the HIT's page stored before it refused ids MTurk never gives, with work."""
    annotator = AnnotatorFactory(
        kind=AnnotatorKind.CROWD, platform="mturk", worker_id="W-1", name="mturk:W-1"
    )
    AssignmentFactory(
        annotator=annotator, status=AssignmentStatus.SUBMITTED, submitted_at=timezone.now()
    )
    return annotator


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_a_stored_id_mturk_never_gives_is_blocked_and_unblocked_here_saying_mturk_was_not_told(
    client, mturk_settings, fake_mturk, admin_user, forged
):
    """MTurk refused the block (ValidationException): the admin could not block the forger."""
    client.force_login(admin_user)
    action = reverse("crowd:worker-action", args=[forged.pk])

    blocked = client.post(action, {"action": "block", "reason": "forged"}, HTTP_REFERER="/")

    assert WorkerBlock.objects.get(annotator=forged).active
    assert Assignment.objects.get().is_late  # their work holds its task's slot no more
    said = _messages(blocked)
    assert said[0].startswith("Worker blocked:")
    assert said[1].startswith(
        "Amazon Mechanical Turk was not told: it never gives a worker the id 'W-1'"
    )
    assert "The worker is blocked on this site" in said[1]
    unblocked = client.post(action, {"action": "unblock", "reason": "sorry"}, HTTP_REFERER="/")
    assert not WorkerBlock.objects.get(annotator=forged).active
    assert "The worker is unblocked on this site" in _messages(unblocked)[-1]
    api = client.post(
        reverse("crowd-api:block", args=[forged.pk]),
        {"reason": "forged"},
        content_type="application/json",
    )
    assert api.status_code == 200
    assert api.json()["platform_note"].startswith("Amazon Mechanical Turk was not told")
    assert not {"CreateWorkerBlock", "DeleteWorkerBlock"} & set(fake_mturk.state.calls)


def test_a_block_of_mturks_own_id_still_goes_to_mturk_and_says_nothing_more(
    client, mturk_settings, fake_mturk, admin_user
):
    worker = AnnotatorFactory(
        kind=AnnotatorKind.CROWD, platform="mturk", worker_id="AW1", name="mturk:AW1"
    )
    client.force_login(admin_user)

    api = client.post(
        reverse("crowd-api:block", args=[worker.pk]),
        {"reason": "spam"},
        content_type="application/json",
    )

    assert api.json() == {"ok": True, "platform_note": ""}
    assert fake_mturk.state.blocks == {"AW1": "spam"}


def test_a_message_leaves_out_ids_mturk_never_gives_and_reaches_the_others(
    mturk_settings, fake_mturk, admin_user, forged
):
    """MTurk refused the whole NotifyWorkers call for the one forged id among up to 100."""
    real = AnnotatorFactory(
        kind=AnnotatorKind.CROWD, platform="mturk", worker_id="AW1", name="mturk:AW1"
    )

    done = review.workers_notify(
        annotator_ids=[forged.pk, real.pk],
        subject="New batch",
        message="Come back",
        user=admin_user,
    )

    assert done == review.Notified(failed=[], not_sent=[], unknown_ids=["W-1"])
    assert [n["WorkerIds"] for n in fake_mturk.state.notifications] == [["AW1"]]
    assert review.ids_never_given(done.unknown_ids).startswith(
        "Not sent to 1 worker id the platform never gives (W-1: "
    )


def test_a_message_to_ids_mturk_never_gives_alone_is_refused_saying_nothing_was_sent(
    client, mturk_settings, fake_mturk, admin_user, forged
):
    client.force_login(admin_user)

    with pytest.raises(ConflictError, match="Nothing was sent. Not sent to 1 worker id"):
        review.workers_notify(annotator_ids=[forged.pk], subject="s", message="m", user=admin_user)
    api = client.post(
        reverse("crowd-api:notify", args=[forged.pk]),
        {"subject": "New batch", "message": "Come back"},
        content_type="application/json",
    )

    assert api.status_code == 409 and "(W-1: typed into" in api.json()["detail"]
    assert "NotifyWorkers" not in fake_mturk.state.calls
