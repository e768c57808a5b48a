"""A blocked worker's work and claims hold no slot of their tasks: the tasks are offered to
other workers again (a self-hosted link at once, MTurk through the replacements page, real
boto3 against the fake MTurk server), and an unblock never makes a task count more answers
than its assignments per task."""

import re
import threading
import time
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.selectors import publication_spending
from annotate.crowd.services import publishing, replacements, review, workers
from annotate.crowd.services.publishing import PublishSettings
from annotate.errors import ConflictError, WorkerBlockedError
from annotate.models import Assignment, AssignmentStatus, Label, TaskSlots
from annotate.roles import ADMIN
from annotate.selectors.results import counted_assignment_q
from annotate.services import assignments as assignment_services
from annotate.services import submissions
from annotate.services.assignments import assignment_claim_task, counted_assignments
from annotate.services.submissions import expected_fields
from tests.annotate.crowd.conftest import crowd_assignment
from tests.annotate.crowd.test_review import _sync, work
from tests.factories import AnnotatorFactory, AssignmentFactory, UserFactory, project_with_tasks
from tests.threads import at_once, in_thread, other_verdict_first, waiting_for_a_row_lock

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(db):
    return UserFactory(username="block-admin", roles=[ADMIN], is_staff=True)


@pytest.fixture
def link(db):
    """A self-hosted link of one task that needs one answer."""
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=1)
    return publishing.publication_create(
        batch=project.batches.get(),
        platform_name="selfhosted",
        chosen=PublishSettings(title="A study", description="d"),
        base_url="https://annotate.example.org",
    )


def _start(client, link, participant):
    return client.post(
        reverse("crowd:selfhosted-join", args=[link.link_token]), {"PROLIFIC_PID": participant}
    )


def _finish(client, started):
    page = client.get(started["Location"]).text
    answers = {name: "yes" for name in set(re.findall(r'name="(r\d+_q\d+)"', page))}
    return client.post(started["Location"], answers)


def _counted(task_id):
    return set(
        Assignment.objects.filter(counted_assignment_q(), task_id=task_id).values_list(
            "annotator__worker_id", flat=True
        )
    )


def _held(task_id):
    """Slots taken, as the claim counts them and as the triggers' counter has them."""
    now = timezone.now()
    taken = Assignment.objects.filter(counted_assignments(now=now), task_id=task_id).count()
    lapsed = Assignment.objects.filter(
        task_id=task_id, status=AssignmentStatus.CLAIMED, expires_at__lte=now
    ).count()
    assert TaskSlots.objects.get(task_id=task_id).held - lapsed == taken
    return taken


def test_a_blocked_participants_task_goes_to_another_and_the_unblock_adds_no_answer(
    client, link, admin
):
    assert _finish(client, _start(client, link, "P1")).status_code == 200
    task_id = link.batch.tasks.get().pk
    assert _start(client, link, "P2").status_code == 404  # the task has its one answer

    review.worker_block(annotator_id=_annotator("P1"), reason="random answers", user=admin)
    assert _held(task_id) == 0  # P1's work is kept, labels too, but takes no slot
    assert Label.objects.filter(assignment__annotator__worker_id="P1").exists()
    started = _start(client, link, "P2")
    assert started.status_code == 302
    assert _finish(client, started).status_code == 200
    assert _counted(task_id) == {"P2"}

    done = review.worker_unblock(annotator_id=_annotator("P1"), user=admin)
    assert (done.restored, done.left_out) == (0, 1)
    assert _counted(task_id) == {"P2"} and _held(task_id) == 1


def test_an_unblock_gives_the_slot_back_when_nobody_took_it(client, link, admin):
    _finish(client, _start(client, link, "P1"))
    task_id = link.batch.tasks.get().pk
    review.worker_block(annotator_id=_annotator("P1"), reason="checking", user=admin)
    assert _counted(task_id) == set()
    done = review.worker_unblock(annotator_id=_annotator("P1"), user=admin)
    assert (done.restored, done.left_out) == (1, 0)
    assert _counted(task_id) == {"P1"} and _held(task_id) == 1
    assert _start(client, link, "P2").status_code == 404


def test_a_claim_held_when_blocked_frees_its_slot_and_what_is_sent_on_it_holds_none(
    client, link, admin
):
    mine = _start(client, link, "P1")
    task_id = link.batch.tasks.get().pk
    review.worker_block(annotator_id=_annotator("P1"), reason="bot", user=admin)
    assert _held(task_id) == 0
    other = _start(client, link, "P2")
    assert other.status_code == 302
    sent = _finish(client, mine)  # the blocked participant's answers are kept, told so
    assert sent.status_code == 200 and 'id="blocked-note"' in sent.text
    kept = Assignment.objects.get(annotator__worker_id="P1")
    assert (kept.status, kept.is_late) == (AssignmentStatus.SUBMITTED, True)
    assert _held(task_id) == 1  # P2's claim only
    _finish(client, other)
    review.worker_unblock(annotator_id=_annotator("P1"), user=admin)
    assert _counted(task_id) == {"P2"}


def test_a_blocked_mturk_workers_task_is_planned_for_a_new_worker(
    client, live, fake_mturk, admin_user
):
    """MTurk: the block frees the slot of confirmed work, the replacements page asks for one
    more assignment on its HIT, and the new worker's work counts in its place."""
    hit = live.hits.order_by("id").first()
    done = [work(client, fake_mturk, hit, f"AW{n}") for n in range(3)]
    _sync(live)
    spent_before = publication_spending(publication=live)
    review.worker_block(annotator_id=done[1].annotator_id, reason="spam", user=admin_user)
    # Its pay still waits for review (MTurk pays it unless rejected): not late work.
    spent = publication_spending(publication=live)
    assert (spent.waiting, spent.late, spent.total_usd) == (3, 0, spent_before.total_usd)

    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    assert [(row.hit.pk, row.wanted, row.available, row.add) for row in plan.rows] == [
        (hit.pk, 1, 0, 1)
    ]
    expected = Decimal("1.20")  # $1 and MTurk's 20 % on a HIT of 3
    replacements.replacements_create(
        publication_id=live.pk, confirm_total=expected, now=timezone.now(), user=admin_user
    )
    work(client, fake_mturk, hit, "AW9")
    _sync(live)
    assert _counted(hit.task_id) == {"AW0", "AW2", "AW9"}

    unblocked = review.worker_unblock(annotator_id=done[1].annotator_id, user=admin_user)
    assert (unblocked.restored, unblocked.left_out) == (0, 1)
    _sync(live)  # a sync does not hand the confirmed work its slot back either
    assert _counted(hit.task_id) == {"AW0", "AW2", "AW9"}
    assert _held(hit.task_id) == 3


def test_a_sync_gives_a_blocked_workers_work_no_slot(client, live, fake_mturk, admin_user):
    """Work confirmed only after the block (its hand-back late) stays out while it lasts."""
    hit = live.hits.order_by("id").first()
    late = work(client, fake_mturk, hit, "AW1", post_back=False)
    review.worker_block(annotator_id=late.annotator_id, reason="spam", user=admin_user)
    fake_mturk.api.worker_submit(late.platform_assignment_id, {"summary": "x"})
    _sync(live)
    late.refresh_from_db()
    assert late.is_late and _held(hit.task_id) == 0


def _annotator(worker_id):
    return Assignment.objects.filter(annotator__worker_id=worker_id).first().annotator_id


def test_the_pages_and_the_api_say_what_an_unblock_counted_again(client, link, admin):
    _finish(client, _start(client, link, "P1"))
    worker = _annotator("P1")
    admin_client = type(client)()
    admin_client.force_login(admin)
    url = reverse("crowd:worker-action", args=[worker])
    blocked = admin_client.post(url, {"action": "block", "reason": "r"}, follow=True).text
    assert "those tasks are offered to other participants of the link" in blocked
    started = _start(client, link, "P2")
    unblocked = admin_client.post(url, {"action": "unblock"}, follow=True).text
    assert "Worker unblocked: 0 of their submissions count again. 1 stay out" in unblocked
    _finish(client, started)
    admin_client.post(url, {"action": "block", "reason": "r"})
    _held(link.batch.tasks.get().pk)
    api = admin_client.post(reverse("crowd-api:unblock", args=[worker]), {})
    assert api.json() == {"ok": True, "restored": 0, "left_out": 1, "platform_note": ""}


def test_approved_work_left_out_at_an_unblock_stays_in_the_paid_cost(client, link, admin):
    """The block marks a worker's approved work late (no slot); an unblock that finds the task
    filled leaves it so. It was paid all the same, but Table 4's crowd cost counted only
    counted work and a blocked worker's approved work: once unblocked, it counted neither."""
    from annotate.crowd.selectors import crowd_paid_work_q

    _finish(client, _start(client, link, "P1"))
    first = Assignment.objects.get(annotator__worker_id="P1")
    review.assignment_approve(assignment_id=first.pk, user=admin)
    review.worker_block(annotator_id=_annotator("P1"), reason="checking", user=admin)
    _finish(client, _start(client, link, "P2"))
    done = review.worker_unblock(annotator_id=_annotator("P1"), user=admin)
    assert (done.restored, done.left_out) == (0, 1)
    paid = set(
        Assignment.objects.filter(crowd_paid_work_q()).values_list(
            "annotator__worker_id", flat=True
        )
    )
    assert paid == {"P1", "P2"}


@pytest.mark.django_db(transaction=True)
def test_a_submit_in_flight_when_the_worker_is_blocked_is_marked_and_holds_no_slot(
    client, link, admin, monkeypatch
):
    """A submit holds its claim's row from its read to its commit. A block meanwhile ends the
    worker's live claims first, which waits for that submit, and only then marks their submitted
    work late, in a statement that sees the work submitted: in the other order the marking ran
    before the wait, saw a claim, and the submitted work kept its slot. PostgreSQL only: SQLite
    runs one writer at a time, so the two never overlap there."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks: SQLite runs one writer at a time")
    _start(client, link, "P1")
    claim = Assignment.objects.select_related("task__instruction", "annotator").get(
        annotator__worker_id="P1"
    )
    positions = sorted(claim.task.instruction.questions.values_list("position", flat=True))
    fields = expected_fields(
        phase="labels", responses=len(claim.display_order), question_positions=positions
    )
    real_finish, reached, go = submissions._finish, threading.Event(), threading.Event()

    def finish_held(**kwargs):  # the claim's row is locked by now, nothing written yet
        reached.set()
        go.wait(30)
        return real_finish(**kwargs)

    monkeypatch.setattr(submissions, "_finish", finish_held)
    submitted, blocked = [], []
    submit = in_thread(
        lambda: submissions.assignment_submit(
            assignment_id=claim.pk,
            annotator=claim.annotator,
            answers=dict.fromkeys(fields, "yes"),
            now=timezone.now(),
        ),
        submitted,
    )
    assert reached.wait(30)
    block = in_thread(
        lambda: review.worker_block(annotator_id=claim.annotator_id, reason="bot", user=admin),
        blocked,
    )
    deadline = time.monotonic() + 30
    while not waiting_for_a_row_lock():  # the block waits for the submit's claim row
        assert time.monotonic() < deadline, "the block never waited for the submit"
        time.sleep(0.01)
    go.set()
    submit.join(30)
    block.join(30)

    assert submitted[0].outcome == submissions.Outcome.ACCEPTED, submitted
    assert not isinstance(blocked[0], Exception), blocked
    kept = Assignment.objects.get(pk=claim.pk)
    assert (kept.status, kept.is_late) == (AssignmentStatus.SUBMITTED, True)
    assert _held(claim.task_id) == 0  # the task is offered to another participant
    assert _start(client, link, "P2").status_code == 302


def _postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks: SQLite runs one writer at a time")


def _done_or_waiting_for_a_lock(thread: threading.Thread) -> None:
    """Wait until `thread` ends or some connection waits for a lock (a row lock: with the
    fix, the racing transaction waits for the one held open)."""
    deadline = time.monotonic() + 30
    while thread.is_alive() and not waiting_for_a_row_lock():
        assert time.monotonic() < deadline, "neither done nor waiting for a lock"
        time.sleep(0.01)


def _block_held_open(monkeypatch, admin, annotator_id):
    """Start blocking the worker in a thread; return (thread, outcomes, go) once the block has
    released the worker's work and holds its transaction open until `go` is set."""
    released, go, original = threading.Event(), threading.Event(), review._blocked_work_released

    def held_open(**kwargs):
        freed = original(**kwargs)
        released.set()
        go.wait(30)
        return freed

    monkeypatch.setattr(review, "_blocked_work_released", held_open)
    outcomes = []
    thread = in_thread(
        lambda: review.worker_block(annotator_id=annotator_id, reason="bot", user=admin),
        outcomes,
    )
    assert released.wait(30)
    return thread, outcomes, go


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("lapsed_as", ["claimed", "expired"])
def test_a_submit_on_a_lapsed_claim_while_the_block_commits_holds_no_slot(
    client, link, admin, monkeypatch, lapsed_as
):
    """A claim past its time (the beat's expiry to come, or done) still takes a submit. The
    block ended only live claims, so it did not hold this one: the submit read the worker as
    not blocked while the block was uncommitted, took the task's free slot and kept it, counted
    nowhere (the task got no other worker). The block now holds every claim of the worker not
    submitted, so the submit reads the block after it."""
    _postgresql_only()
    mine = _start(client, link, "P1")
    past = timezone.now() - timezone.timedelta(seconds=5)
    status = AssignmentStatus.CLAIMED if lapsed_as == "claimed" else AssignmentStatus.EXPIRED
    Assignment.objects.filter(annotator__worker_id="P1").update(expires_at=past, status=status)
    block, blocked, go = _block_held_open(monkeypatch, admin, _annotator("P1"))
    sent = []
    submit = in_thread(lambda: _finish(client, mine), sent)
    _done_or_waiting_for_a_lock(submit)
    go.set()
    submit.join(30)
    block.join(30)

    assert sent[0].status_code == 200 and not isinstance(blocked[0], Exception), (sent, blocked)
    kept = Assignment.objects.get(annotator__worker_id="P1")
    assert (kept.status, kept.is_late) == (AssignmentStatus.SUBMITTED, True)
    assert _held(kept.task_id) == 0
    assert _start(client, link, "P2").status_code == 302  # the task goes to another


@pytest.mark.django_db(transaction=True)
def test_a_submit_that_read_the_time_before_the_block_holds_no_slot(
    client, link, admin, monkeypatch
):
    """A submit takes its time (`now`) before it waits for its claim's row: a block that ended
    the claim at a later time meanwhile left it live for that submit, which then kept its slot.
    The block marks the claims it ends expired, whatever the time a submit read."""
    _postgresql_only()
    _start(client, link, "P1")
    claim = Assignment.objects.select_related("task__instruction", "annotator").get(
        annotator__worker_id="P1"
    )
    positions = sorted(claim.task.instruction.questions.values_list("position", flat=True))
    fields = expected_fields(
        phase="labels", responses=len(claim.display_order), question_positions=positions
    )
    read_before = timezone.now()
    block, blocked, go = _block_held_open(monkeypatch, admin, claim.annotator_id)
    submitted = []
    submit = in_thread(
        lambda: submissions.assignment_submit(
            assignment_id=claim.pk,
            annotator=claim.annotator,
            answers=dict.fromkeys(fields, "yes"),
            now=read_before,
        ),
        submitted,
    )
    _done_or_waiting_for_a_lock(submit)
    go.set()
    submit.join(30)
    block.join(30)

    assert not isinstance(submitted[0], Exception), submitted
    assert not isinstance(blocked[0], Exception), blocked
    kept = Assignment.objects.get(pk=claim.pk)
    assert (kept.status, kept.is_late) == (AssignmentStatus.SUBMITTED, True)
    assert _held(claim.task_id) == 0


@pytest.fixture
def link_of_two(db):
    """A self-hosted link of two tasks that need one answer each."""
    project = project_with_tasks(instructions=2, systems=2, questions=1, assignments_per_task=1)
    return publishing.publication_create(
        batch=project.batches.get(),
        platform_name="selfhosted",
        chosen=PublishSettings(title="A study", description="d"),
        base_url="https://annotate.example.org",
    )


@pytest.mark.django_db(transaction=True)
def test_a_claim_made_while_the_worker_is_blocked_holds_no_slot(
    client, link_of_two, admin, monkeypatch
):
    """A start that read the worker as not blocked and made its claim, committed after the
    block ended the worker's claims: the block did not see it, and it stayed live for a blocked
    worker. The block waits for the worker's start in flight (the worker's row) and ends it."""
    _postgresql_only()
    _finish(client, _start(client, link_of_two, "P1"))
    made, go, original = threading.Event(), threading.Event(), workers.assignment_claim_next

    def claim_held_open(**kwargs):
        claim = original(**kwargs)
        made.set()
        go.wait(30)
        return claim

    monkeypatch.setattr(workers, "assignment_claim_next", claim_held_open)
    params = {"PROLIFIC_PID": "P1"}
    started, blocked = [], []
    start = in_thread(
        lambda: workers.selfhosted_start(
            publication=link_of_two, params=params, now=timezone.now()
        ),
        started,
    )
    assert made.wait(30)
    block = in_thread(
        lambda: review.worker_block(annotator_id=_annotator("P1"), reason="bot", user=admin),
        blocked,
    )
    _done_or_waiting_for_a_lock(block)
    go.set()
    start.join(30)
    block.join(30)

    assert not isinstance(started[0], Exception) and not isinstance(blocked[0], Exception)
    claim = Assignment.objects.get(pk=started[0].assignment.pk)
    assert claim.status == AssignmentStatus.EXPIRED
    assert _held(claim.task_id) == 0
    assert _start(client, link_of_two, "P2").status_code == 302


@pytest.mark.django_db(transaction=True)
def test_a_start_while_the_block_commits_is_refused(client, link_of_two, admin, monkeypatch):
    """A start that read the worker's block before the block committed got a claim."""
    _postgresql_only()
    _finish(client, _start(client, link_of_two, "P1"))
    block, blocked, go = _block_held_open(monkeypatch, admin, _annotator("P1"))
    params = {"PROLIFIC_PID": "P1"}
    started = []
    start = in_thread(
        lambda: workers.selfhosted_start(
            publication=link_of_two, params=params, now=timezone.now()
        ),
        started,
    )
    _done_or_waiting_for_a_lock(start)
    go.set()
    start.join(30)
    block.join(30)

    assert not isinstance(blocked[0], Exception), blocked
    assert isinstance(started[0], WorkerBlockedError), started
    assert Assignment.objects.filter(annotator__worker_id="P1").count() == 1


def _left_out_at_an_unblock(client, link, admin, *, p2_submits=True):
    """P1's work was blocked, P2 took the task's one slot, and P1's unblock left P1's work
    out (kept, counted nowhere); return P2's start."""
    _finish(client, _start(client, link, "P1"))
    review.worker_block(annotator_id=_annotator("P1"), reason="checking", user=admin)
    started = _start(client, link, "P2")
    if p2_submits:
        _finish(client, started)
    done = review.worker_unblock(annotator_id=_annotator("P1"), user=admin)
    assert (done.restored, done.left_out) == (0, 1)
    return started


def test_work_left_out_at_an_unblock_takes_the_slot_a_reject_frees(client, link, admin):
    _left_out_at_an_unblock(client, link, admin)
    task_id = link.batch.tasks.get().pk
    assert _counted(task_id) == {"P2"}
    replacement = Assignment.objects.get(annotator__worker_id="P2")
    review.assignment_reject(assignment_id=replacement.pk, user=admin, feedback="all UNKNOWN")
    assert _counted(task_id) == {"P1"} and _held(task_id) == 1
    assert _start(client, link, "P3").status_code == 404  # the task has its answer again


def test_a_reject_whose_restore_fails_stores_no_verdict_and_sent_again_does_both(
    client, link, admin, monkeypatch
):
    """The reject was stored in a transaction of its own before the slot went to the task's
    left-out work: a failure in between left P2 rejected, the slot free and P1 out, and the
    reject sent again found the verdict stored and did nothing: the task one answer short."""
    _left_out_at_an_unblock(client, link, admin)
    task_id = link.batch.tasks.get().pk
    replacement = Assignment.objects.get(annotator__worker_id="P2")
    restore = review.task_left_out_restore

    def failing(*, task_id, now):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(review, "task_left_out_restore", failing)
    with pytest.raises(RuntimeError):
        review.assignment_reject(assignment_id=replacement.pk, user=admin, feedback="all UNKNOWN")
    replacement.refresh_from_db()
    assert replacement.status == AssignmentStatus.SUBMITTED
    assert _counted(task_id) == {"P2"}

    monkeypatch.setattr(review, "task_left_out_restore", restore)
    review.assignment_reject(assignment_id=replacement.pk, user=admin, feedback="all UNKNOWN")
    replacement.refresh_from_db()
    assert replacement.status == AssignmentStatus.REJECTED
    assert _counted(task_id) == {"P1"} and _held(task_id) == 1


def test_work_left_out_at_an_unblock_takes_the_slot_a_block_frees(client, link, admin):
    _left_out_at_an_unblock(client, link, admin)
    task_id = link.batch.tasks.get().pk
    review.worker_block(annotator_id=_annotator("P2"), reason="bot", user=admin)
    assert _counted(task_id) == {"P1"} and _held(task_id) == 1
    # Unblocking P2 now finds the task filled: their work is the one left out.
    done = review.worker_unblock(annotator_id=_annotator("P2"), user=admin)
    assert (done.restored, done.left_out) == (0, 1)
    assert _counted(task_id) == {"P1"} and _held(task_id) == 1


def test_work_left_out_at_an_unblock_takes_the_slot_a_return_frees(client, link, admin):
    started = _left_out_at_an_unblock(client, link, admin, p2_submits=False)
    task_id = link.batch.tasks.get().pk
    assert _counted(task_id) == set() and _held(task_id) == 1  # P2's claim holds the slot
    token = started["Location"].rstrip("/").rsplit("/", 1)[-1]
    assert client.post(reverse("crowd:work-return", args=[token])).status_code == 302
    assert _counted(task_id) == {"P1"} and _held(task_id) == 1


def test_work_left_out_at_an_unblock_takes_the_slot_of_a_claim_that_lapsed(client, link, admin):
    """Before a new claim counts the task's slots, and when the beat expires the claim."""
    from annotate.services.assignments import assignments_expire

    _left_out_at_an_unblock(client, link, admin, p2_submits=False)
    task_id = link.batch.tasks.get().pk
    past = timezone.now() - timezone.timedelta(minutes=1)
    Assignment.objects.filter(annotator__worker_id="P2").update(expires_at=past)
    # A newcomer finds the task's one slot taken by P1's work, not free.
    assert _start(client, link, "P3").status_code == 404
    assert not Assignment.objects.filter(annotator__worker_id="P3").exists()
    # The newcomer's refused start kept nothing: the beat's expiry gives the slot for good.
    assert _counted(task_id) == set()
    assert assignments_expire(now=timezone.now()) == 1
    assert _counted(task_id) == {"P1"} and _held(task_id) == 1


def test_mturk_work_left_out_at_an_unblock_takes_the_slot_a_reject_frees(
    client, live, fake_mturk, admin_user
):
    """The replacement's work is rejected (on MTurk too): the unblocked worker's confirmed
    work counts in its place, and the task never counts more than its three answers."""
    hit = live.hits.order_by("id").first()
    done = [work(client, fake_mturk, hit, f"AW{n}") for n in range(3)]
    _sync(live)
    review.worker_block(annotator_id=done[1].annotator_id, reason="spam", user=admin_user)
    replacements.replacements_create(
        publication_id=live.pk, confirm_total=Decimal("1.20"), now=timezone.now(), user=admin_user
    )
    replacement = work(client, fake_mturk, hit, "AW9")
    _sync(live)
    unblocked = review.worker_unblock(annotator_id=done[1].annotator_id, user=admin_user)
    assert (unblocked.restored, unblocked.left_out) == (0, 1)
    assert _counted(hit.task_id) == {"AW0", "AW2", "AW9"}

    review.assignment_reject(assignment_id=replacement.pk, user=admin_user, feedback="spam")
    assert (
        fake_mturk.state.assignments[replacement.platform_assignment_id]["AssignmentStatus"]
        == "Rejected"
    )
    assert _counted(hit.task_id) == {"AW0", "AW1", "AW2"} and _held(hit.task_id) == 3


@pytest.mark.django_db(transaction=True)
def test_left_out_work_of_a_worker_being_blocked_takes_no_slot_that_frees_up(
    client, link, admin, monkeypatch
):
    """A return frees the slot left-out work waits for while its worker's block commits: the
    restore read the worker as not blocked and gave the work the slot, counted nowhere. The
    block holds the worker's work; the restore reads the block again once it has the row."""
    _postgresql_only()
    started = _left_out_at_an_unblock(client, link, admin, p2_submits=False)
    task_id = link.batch.tasks.get().pk
    block, blocked, go = _block_held_open(monkeypatch, admin, _annotator("P1"))
    token = started["Location"].rstrip("/").rsplit("/", 1)[-1]
    returned = []
    give_back = in_thread(lambda: client.post(reverse("crowd:work-return", args=[token])), returned)
    _done_or_waiting_for_a_lock(give_back)
    go.set()
    give_back.join(30)
    block.join(30)

    assert returned[0].status_code == 302 and not isinstance(blocked[0], Exception), blocked
    kept = Assignment.objects.get(annotator__worker_id="P1")
    assert (kept.status, kept.is_late) == (AssignmentStatus.SUBMITTED, True)
    assert _held(task_id) == 0


@pytest.mark.django_db(transaction=True)
def test_work_a_sync_confirms_while_its_worker_is_blocked_takes_no_slot(
    client, live, fake_mturk, admin_user, monkeypatch
):
    """A sync confirming released work (its hand-back late) while the worker's block commits
    read the worker as not blocked and gave the work its slot back. The sync's link to the
    work waits for the block's hold on the worker's work, and reads the block after it."""
    _postgresql_only()
    hit = live.hits.order_by("id").first()
    late = work(client, fake_mturk, hit, "AW1", post_back=False)
    _sync(live)  # not on MTurk once the grace is over: its slot is taken back
    late.refresh_from_db()
    assert late.is_late
    block, blocked, go = _block_held_open(monkeypatch, admin_user, late.annotator_id)
    fake_mturk.api.worker_submit(late.platform_assignment_id, {"summary": "x"})
    synced = []
    sync = in_thread(lambda: _sync(live), synced)
    _done_or_waiting_for_a_lock(sync)
    go.set()
    sync.join(30)
    block.join(30)

    assert not isinstance(synced[0], Exception) and not isinstance(blocked[0], Exception)
    late.refresh_from_db()
    assert late.platform_record is not None and late.is_late
    assert _held(hit.task_id) == 0


def _claim_statements(task) -> int:
    """Statements one newcomer's claim of the task runs."""
    with CaptureQueriesContext(connection) as captured:
        assignment_claim_task(annotator=AnnotatorFactory(), task=task, now=timezone.now())
    return len(captured)


@pytest.mark.parametrize("held_no_slot", ["blocked", "released unconfirmed"])
def test_a_claim_on_a_task_holding_work_that_waits_for_no_slot_costs_what_any_claim_costs(
    client, link_of_two, admin, held_no_slot
):
    """The claim's count of the task's left-out work follows left_out_q: a blocked worker's
    work, or MTurk work a sync released unconfirmed (maybe forged), is not left out, so the
    claims of exactly the tasks a block or a release just freed restore nothing and run no
    statement more than a claim of a task with no such work."""
    first, plain = link_of_two.batch.tasks.order_by("position")
    if held_no_slot == "blocked":
        _finish(client, _start(client, link_of_two, "P1"))
        assert Assignment.objects.get(annotator__worker_id="P1").task_id == first.pk
        review.worker_block(annotator_id=_annotator("P1"), reason="bot", user=admin)
    else:
        Assignment.objects.filter(pk=crowd_assignment(task=first, worker="FORGED").pk).update(
            is_late=True
        )
    assert Assignment.objects.filter(task=first, is_late=True).count() == 1

    assert _claim_statements(first) == _claim_statements(plain)
    assert Assignment.objects.get(task=first, is_late=True).annotator.worker_id in ("P1", "FORGED")
    assert _counted(first.pk) == set() and _held(first.pk) == 1  # the newcomer's claim


def test_an_mturk_accept_runs_two_statements_on_a_task_with_no_left_out_work(
    live, django_assert_num_queries
):
    """The accept's slot check (every new MTurk accept): the task's lock, then one count that
    also says whether left-out work waits for a slot; no savepoint, no statement more."""
    hit = live.hits.select_related("task__batch__project", "publication").order_by("id").first()
    with transaction.atomic(), django_assert_num_queries(2):
        workers.task_slot_check(hit=hit, now=timezone.now())


def test_an_mturk_accept_gives_a_lapsed_claims_slot_to_left_out_work_first(
    client, live, fake_mturk, admin_user
):
    """A claim past its time that the beat has not expired yet frees its slot: the next
    accept of the task gives it to the unblocked worker's confirmed work before counting."""
    hit = live.hits.select_related("task__batch__project", "publication").order_by("id").first()
    done = [work(client, fake_mturk, hit, f"AW{n}") for n in range(3)]
    _sync(live)
    review.worker_block(annotator_id=done[1].annotator_id, reason="spam", user=admin_user)
    claim = AssignmentFactory(task=hit.task, status=AssignmentStatus.CLAIMED)
    unblocked = review.worker_unblock(annotator_id=done[1].annotator_id, user=admin_user)
    assert (unblocked.restored, unblocked.left_out) == (0, 1)
    past = timezone.now() - timezone.timedelta(minutes=1)
    Assignment.objects.filter(pk=claim.pk).update(expires_at=past)
    assert _counted(hit.task_id) == {"AW0", "AW2"}

    with transaction.atomic():
        workers.task_slot_check(hit=hit, now=timezone.now())
    assert _counted(hit.task_id) == {"AW0", "AW1", "AW2"} and _held(hit.task_id) == 3


def test_an_mturk_accept_on_a_full_task_with_left_out_work_runs_two_statements(
    client, live, fake_mturk, admin_user, django_assert_num_queries
):
    """Left-out work usually waits on a full task: an accept there tried a restore that could
    give nothing (a savepoint, the lock again, the rows read: six statements for nothing)."""
    hit = live.hits.select_related("task__batch__project", "publication").order_by("id").first()
    done = [work(client, fake_mturk, hit, f"AW{n}") for n in range(3)]
    _sync(live)
    review.worker_block(annotator_id=done[1].annotator_id, reason="spam", user=admin_user)
    AssignmentFactory(task=hit.task, status=AssignmentStatus.CLAIMED)  # live: the task is full
    unblocked = review.worker_unblock(annotator_id=done[1].annotator_id, user=admin_user)
    assert (unblocked.restored, unblocked.left_out) == (0, 1)

    with transaction.atomic(), django_assert_num_queries(2), pytest.raises(ConflictError):
        workers.task_slot_check(hit=hit, now=timezone.now())  # full: refused, as before


@pytest.mark.django_db(transaction=True)
def test_a_sync_and_a_claim_restoring_left_out_work_take_their_locks_in_one_order(
    client, live, fake_mturk, monkeypatch
):
    """A sync locked the HIT's work rows and then the task; a claim of a task with left-out
    work and a free slot takes the task and then the left-out rows: the two deadlocked on
    PostgreSQL, which aborted one (the claim's page a 500, or the sync). The sync now takes the
    task first. PostgreSQL only: SQLite runs one writer at a time."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks: SQLite runs one writer at a time")
    hit = live.hits.order_by("id").first()
    done = [work(client, fake_mturk, hit, f"AW{n}") for n in range(3)]
    _sync(live)
    # AW1's confirmed work waits for a slot (left out) and the task has one free (a claim that
    # lapsed, say): the state a claim restores.
    Assignment.objects.filter(pk=done[1].pk).update(is_late=True)
    newcomer = AnnotatorFactory()
    reached, go, real = threading.Event(), threading.Event(), review._worker_slot_free

    def held(*, hit, row):  # the sync, inside its transaction, holding what it has locked
        if not reached.is_set():
            reached.set()
            go.wait(30)
        return real(hit=hit, row=row)

    monkeypatch.setattr(review, "_worker_slot_free", held)
    synced, claimed = [], []
    later = timezone.now() + review.release_grace()
    sync = in_thread(lambda: review.publication_sync(publication_id=live.pk, now=later), synced)
    assert reached.wait(30)
    task = hit.task
    claim = in_thread(
        lambda: assignment_claim_task(annotator=newcomer, task=task, now=timezone.now()),
        claimed,
    )
    _done_or_waiting_for_a_lock(claim)
    go.set()
    sync.join(60)
    claim.join(60)
    assert not [outcome for outcome in synced if isinstance(outcome, Exception)]
    # The claim waited for the sync, then found the slot given to the left-out work: refused
    # as a full task is (not a deadlock's database error).
    assert [type(outcome).__name__ for outcome in claimed] == ["NoWorkError"]
    assert Assignment.objects.get(pk=done[1].pk).is_late is False
    assert _held(task.pk) <= task.batch.project.assignments_per_task


@pytest.mark.django_db(transaction=True)
def test_a_reject_and_a_sync_of_its_hit_both_commit(
    client, live, fake_mturk, admin_user, monkeypatch
):
    """A reject stores its verdict and gives the freed slot to the task's left-out work in one
    transaction: it takes the task's lock before the assignment's row, as a sync does (the
    task's lock, then the HIT's rows); the other order deadlocked with a sync of the HIT,
    PostgreSQL aborting one of the two."""
    _postgresql_only()
    hit = live.hits.order_by("id").first()
    done = [work(client, fake_mturk, hit, f"AW{n}") for n in range(3)]
    _sync(live)
    Assignment.objects.filter(pk=done[1].pk).update(is_late=True)  # AW1 waits for a slot
    reached, go, restore = threading.Event(), threading.Event(), review.task_left_out_restore

    def held_open(*, task_id, now):  # the reject, its verdict stored, its transaction open
        reached.set()
        go.wait(30)
        return restore(task_id=task_id, now=now)

    monkeypatch.setattr(review, "task_left_out_restore", held_open)
    rejected, synced = [], []
    reject = in_thread(
        lambda: review.assignment_reject(
            assignment_id=done[0].pk, user=admin_user, feedback="spam"
        ),
        rejected,
    )
    assert reached.wait(30)
    sync = in_thread(
        lambda: review.publication_sync(
            publication_id=live.pk, now=timezone.now() + review.release_grace()
        ),
        synced,
    )
    _done_or_waiting_for_a_lock(sync)
    go.set()
    reject.join(60)
    sync.join(60)

    assert not [o for o in rejected + synced if isinstance(o, Exception)], (rejected, synced)
    assert Assignment.objects.get(pk=done[0].pk).status == AssignmentStatus.REJECTED
    assert Assignment.objects.get(pk=done[1].pk).is_late is False  # AW1 counts in its place
    assert _held(hit.task_id) == 2


@pytest.mark.django_db(transaction=True)
def test_a_block_and_a_sync_of_the_blocked_workers_hit_both_commit(
    client, live, fake_mturk, admin_user, monkeypatch
):
    """A block frees the slot of the worker's confirmed work and gives it to the task's
    left-out work while a sync of the HIT runs. The block locked the worker's rows, then the
    task's; the sync the HIT's rows, then the task's: PostgreSQL aborted one as a deadlock.
    Both take the task's lock first now: the sync waits for the block, then commits."""
    _postgresql_only()
    hit = live.hits.order_by("id").first()
    done = [work(client, fake_mturk, hit, f"AW{n}") for n in range(3)]
    _sync(live)
    Assignment.objects.filter(pk=done[1].pk).update(is_late=True)  # AW1 waits for a slot
    block, blocked, go = _block_held_open(monkeypatch, admin_user, done[0].annotator_id)
    synced = []
    sync = in_thread(
        lambda: review.publication_sync(
            publication_id=live.pk, now=timezone.now() + review.release_grace()
        ),
        synced,
    )
    _done_or_waiting_for_a_lock(sync)
    go.set()
    sync.join(30)
    block.join(30)
    errors = [o for o in synced + blocked if isinstance(o, Exception)]
    assert not errors, errors
    assert _counted(hit.task_id) == {"AW1", "AW2"} and _held(hit.task_id) == 2


@pytest.mark.django_db(transaction=True)
def test_a_block_while_a_submit_of_a_lapsed_claim_waits_for_its_task_both_commit(
    client, link, admin, monkeypatch
):
    """A submit of a claim past its time holds the claim's row, then takes the task's lock to
    look for a free slot. A block taking the worker's tasks before their rows (the order of a
    sync) waited for that row holding the task: PostgreSQL aborted the block as a deadlock.
    The block gives its locks back and waits for the row alone: both commit, and the work
    holds no slot."""
    _postgresql_only()
    mine = _start(client, link, "P1")
    past = timezone.now() - timezone.timedelta(seconds=5)
    Assignment.objects.filter(annotator__worker_id="P1").update(expires_at=past)
    reached, go, original = threading.Event(), threading.Event(), submissions._has_slot

    def held(**kwargs):
        reached.set()
        go.wait(30)
        return original(**kwargs)

    monkeypatch.setattr(submissions, "_has_slot", held)
    sent, blocked = [], []
    submit = in_thread(lambda: _finish(client, mine), sent)
    assert reached.wait(30)
    block = in_thread(
        lambda: review.worker_block(annotator_id=_annotator("P1"), reason="bot", user=admin),
        blocked,
    )
    _done_or_waiting_for_a_lock(block)
    go.set()
    submit.join(30)
    block.join(30)

    assert sent[0].status_code == 200 and not isinstance(blocked[0], Exception), (sent, blocked)
    kept = Assignment.objects.get(annotator__worker_id="P1")
    assert (kept.status, kept.is_late) == (AssignmentStatus.SUBMITTED, True)
    assert _held(kept.task_id) == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["claim", "sync"])
def test_released_work_confirmed_while_a_claim_takes_its_slot_never_overfills_the_task(
    client, live, fake_mturk, monkeypatch, first
):
    """A sync took the slot of work whose hand-back had not reached MTurk (released: is_late);
    the hand-back arrives, and the next sync gives the work its slot back while an in-house
    annotator claims that same free slot. Whichever commits first keeps the slot; the other
    waits for the task's lock and finds the task full: the claim is refused, or the work stays
    out (kept, not counted) as work confirmed after its task was filled. Never one assignment
    more than the project's assignments per task. PostgreSQL only: SQLite runs one writer at
    a time."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks: SQLite runs one writer at a time")
    hit = live.hits.order_by("id").first()
    task, per_task = hit.task, hit.task.batch.project.assignments_per_task
    for n in range(per_task - 1):
        work(client, fake_mturk, hit, f"AW{n}")
    released = work(client, fake_mturk, hit, "ALATE", post_back=False)
    _sync(live)
    released.refresh_from_db()
    assert released.is_late and _held(task.pk) == per_task - 1
    fake_mturk.api.worker_submit(released.platform_assignment_id, {"summary": "x"})  # arrives
    newcomer = AnnotatorFactory()
    reached, go = threading.Event(), threading.Event()
    # The first one holds its transaction open once it has the slot: the claim its new
    # assignment, the sync the released work's slot given back.
    if first == "claim":
        module, name = assignment_services, "_assignment_create"
    else:
        module, name = review, "_slot_taken_back"
    real = getattr(module, name)

    def held_open(*args, **kwargs):
        result = real(*args, **kwargs)
        reached.set()
        go.wait(30)
        return result

    monkeypatch.setattr(module, name, held_open)
    synced, claimed = [], []
    later = timezone.now() + review.release_grace()

    def sync():
        return review.publication_sync(publication_id=live.pk, now=later)

    def claim():
        return assignment_claim_task(annotator=newcomer, task=task, now=timezone.now())

    leader, follower = (claim, sync) if first == "claim" else (sync, claim)
    outcomes = {claim: claimed, sync: synced}
    started = in_thread(leader, outcomes[leader])
    assert reached.wait(30)
    second = in_thread(follower, outcomes[follower])
    _done_or_waiting_for_a_lock(second)
    go.set()
    started.join(60)
    second.join(60)
    assert not [outcome for outcome in synced if isinstance(outcome, Exception)], synced
    released.refresh_from_db()
    if first == "claim":
        assert [type(outcome).__name__ for outcome in claimed] == ["Assignment"]
        assert released.is_late  # confirmed after its task was filled: kept, not counted
    else:
        assert [type(outcome).__name__ for outcome in claimed] == ["NoWorkError"]
        assert not released.is_late
    assert _held(task.pk) == per_task


def test_an_approve_that_read_submitted_does_not_undo_a_reject_that_came_meanwhile(
    client, link, admin, monkeypatch
):
    """Admin A's approve read P2 submitted, admin B's reject committed and gave the slot back to
    P1's left-out work, then A's approve wrote APPROVED over REJECTED: a task of one answer
    counting two."""
    _left_out_at_an_unblock(client, link, admin)
    task_id = link.batch.tasks.get().pk
    replacement = Assignment.objects.get(annotator__worker_id="P2")
    other_verdict_first(
        monkeypatch,
        lambda: review.assignment_reject(
            assignment_id=replacement.pk, user=admin, feedback="all UNKNOWN"
        ),
    )
    with pytest.raises(ConflictError, match="rejected meanwhile"):
        review.assignment_approve(assignment_id=replacement.pk, user=admin)
    replacement.refresh_from_db()
    assert replacement.status == AssignmentStatus.REJECTED
    assert _counted(task_id) == {"P1"} and _held(task_id) == 1


def test_a_reject_that_read_submitted_does_not_undo_an_approve_that_came_meanwhile(
    client, link, admin, monkeypatch
):
    """The reverse order silently turned the approved work rejected and handed its slot on."""
    _left_out_at_an_unblock(client, link, admin)
    task_id = link.batch.tasks.get().pk
    replacement = Assignment.objects.get(annotator__worker_id="P2")
    other_verdict_first(
        monkeypatch,
        lambda: review.assignment_approve(assignment_id=replacement.pk, user=admin),
    )
    with pytest.raises(ConflictError, match="approved meanwhile"):
        review.assignment_reject(assignment_id=replacement.pk, user=admin, feedback="all UNKNOWN")
    replacement.refresh_from_db()
    assert replacement.status == AssignmentStatus.APPROVED
    assert _counted(task_id) == {"P2"} and _held(task_id) == 1


def test_the_same_verdict_twice_at_once_is_done_once(client, link, admin, monkeypatch):
    _left_out_at_an_unblock(client, link, admin)
    task_id = link.batch.tasks.get().pk
    replacement = Assignment.objects.get(annotator__worker_id="P2")
    other_verdict_first(
        monkeypatch,
        lambda: review.assignment_approve(assignment_id=replacement.pk, user=admin),
    )
    assert review.assignment_approve(assignment_id=replacement.pk, user=admin).status == (
        AssignmentStatus.APPROVED
    )
    replacement.refresh_from_db()
    assert replacement.status == AssignmentStatus.APPROVED
    assert _counted(task_id) == {"P2"} and _held(task_id) == 1


@pytest.mark.django_db(transaction=True)
def test_an_approve_and_a_reject_at_once_leave_one_verdict_and_one_answer(client, link, admin):
    """Two admins decide the same work at once: one verdict wins, the other is refused, and
    the task counts its one answer whichever won."""
    _postgresql_only()
    _left_out_at_an_unblock(client, link, admin)
    task_id = link.batch.tasks.get().pk
    replacement = Assignment.objects.get(annotator__worker_id="P2")
    approved, rejected = at_once(
        lambda: review.assignment_approve(assignment_id=replacement.pk, user=admin),
        lambda: review.assignment_reject(
            assignment_id=replacement.pk, user=admin, feedback="all UNKNOWN"
        ),
    )
    outcomes = [approved, rejected]
    assert sum(isinstance(o, ConflictError) for o in outcomes) == 1, outcomes
    assert sum(isinstance(o, Assignment) for o in outcomes) == 1, outcomes
    replacement.refresh_from_db()
    winner = "P2" if replacement.status == AssignmentStatus.APPROVED else "P1"
    assert replacement.status == (
        AssignmentStatus.APPROVED if isinstance(approved, Assignment) else AssignmentStatus.REJECTED
    )
    assert _counted(task_id) == {winner} and _held(task_id) == 1
