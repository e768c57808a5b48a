"""Crowd work counts only when it is real: the attack of issue 12 replayed against the fake MTurk
server through boto3, and every place results are read (report, majority, agreement, exports,
the instruction page) checked against one rule."""

import csv
import io
import json
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.crowd import selectors
from annotate.crowd.models import PlatformAssignment
from annotate.crowd.services import publishing, review
from annotate.crowd.services.publishing import PublishSettings
from annotate.errors import ConflictError
from annotate.models import Annotator, Assignment, AssignmentStatus, Label
from annotate.roles import ADMIN
from annotate.selectors.identities import OPERATOR
from annotate.services.assignments import counted_assignments
from annotate.services.exports import labels_export
from evaluation.selectors.report_data import benchmark_arrays
from evaluation.services.reports import labels_aggregated_csv, report_build, report_cached
from tests.factories import AssignmentFactory, UserFactory, project_with_tasks

pytestmark = pytest.mark.django_db
CROWD = "crowd-majority"


@pytest.fixture
def admin(db):
    return UserFactory(username="crowd-admin", roles=[ADMIN])


@pytest.fixture
def live(mturk_settings, fake_mturk):
    """Two instructions × two systems × two questions, on MTurk with MaxAssignments 2."""
    project = project_with_tasks(instructions=2, systems=2, questions=2, assignments_per_task=2)
    publication = publishing.publication_create(
        batch=project.batches.get(),
        platform_name="mturk",
        chosen=PublishSettings(title="t", description="d"),
        base_url="https://annotate.example.org",
    )
    return publishing.publication_publish(publication_id=publication.pk, now=timezone.now())


def _hits(publication):
    return list(publication.hits.order_by("task__position", "id"))


def _open(client, fake_mturk, hit, worker, assignment_id):
    return client.get(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]),
        {
            "assignmentId": assignment_id,
            "hitId": hit.hit_id,
            "workerId": worker,
            "turkSubmitTo": fake_mturk.url,
        },
    )


def do_task(client, fake_mturk, hit, worker, value, *, forged=False):
    """Open the ExternalQuestion page, answer everything with `value`, submit, hand back.

    A real worker accepts on MTurk first; a forged one invents its assignment id.
    """
    if forged:
        assignment_id = f"FORGED{worker}"
    else:
        assignment_id = fake_mturk.api.worker_accept(hit.hit_id, worker)
    opened = _open(client, fake_mturk, hit, worker, assignment_id)
    assert opened.status_code == 302, opened.content
    names = set(re.findall(r'name="(r\d+_q\d+)"', client.get(opened["Location"]).text))
    done = client.post(opened["Location"], {name: value for name in names})
    assert done.status_code == 200
    _hand_back(fake_mturk, assignment_id, expect=400 if forged else 200)
    return Assignment.objects.get(platform_assignment_id=assignment_id), opened["Location"]


def _hand_back(fake_mturk, assignment_id: str, *, expect: int) -> None:
    """What the done page's form does in the worker's browser: POST to MTurk's externalSubmit."""
    body = urllib.parse.urlencode({"assignmentId": assignment_id, "summary": "x"}).encode()
    request = urllib.request.Request(f"{fake_mturk.url}/mturk/externalSubmit", data=body)
    try:
        status = urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as error:
        status = error.code
    assert status == expect


def _sync(publication):
    """A sync once the hand-back grace of the work submitted so far is over (a sync within it
    takes no slot back: test_a_sync_within_the_grace_leaves_fresh_work_its_slot)."""
    now = timezone.now() + review.release_grace()
    return review.publication_sync(publication_id=publication.pk, now=now)


def _crowd_rows(report, subset="overall"):
    return {
        r["system"]: (r["yes"], r["questions"])
        for r in report["leaderboard"]
        if r["source"] == CROWD and r["subset"] == subset
    }


def _aggregated(benchmark):
    output = io.StringIO()
    labels_aggregated_csv(benchmark=benchmark, output=output)
    return [row for row in csv.DictReader(io.StringIO(output.getvalue()))]


def _raw(benchmark, **kwargs):
    output = io.StringIO()
    labels_export(benchmark_name=benchmark.name, output=output, file_format="csv", **kwargs)
    return list(csv.DictReader(io.StringIO(output.getvalue())))


# --- 1. Forged MTurk workers ------------------------------------------------------------------


def test_five_invented_workers_count_nowhere(client, live, fake_mturk):
    """The attack of issue 12: five invented worker ids on a HIT with MaxAssignments 2."""
    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    do_task(client, fake_mturk, first, "AREAL1", "yes")
    for n in range(5):
        do_task(client, fake_mturk, first, f"AFAKE{n}", "no", forged=True)
    # Their labels were stored (the page took them) ...
    assert Label.objects.filter(annotator__worker_id__startswith="AFAKE").count() == 5 * 4
    # ... MTurk refused their hand-backs, and a sync finds only the real worker.
    assert len(fake_mturk.state.refused_submits) == 5
    _sync(live)
    assert PlatformAssignment.objects.filter(assignment__isnull=False).count() == 1

    data = benchmark_arrays(benchmark=benchmark)
    assert data.annotator_names == ["mturk:AREAL1"]
    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)
    # The real worker said yes to 2 questions on each system of the first instruction: DRFR 1.0
    # (with the forged "no" votes the crowd majority was 0.0).
    assert _crowd_rows(report) == {s: (2, 2) for s in report["systems"]}
    aggregated = _aggregated(benchmark)
    assert {row["label"] for row in aggregated} == {"YES"} and len(aggregated) == 4
    raw = _raw(benchmark)
    forged_rows = [r for r in raw if r["annotator"].startswith("mturk:AFAKE")]
    assert len(forged_rows) == 20
    assert {r["work_status"] for r in forged_rows} == {"not confirmed by the platform"}
    assert {r["work_status"] for r in raw if r["annotator"] == "mturk:AREAL1"} == {"counted"}


def test_only_forged_work_gives_no_crowd_source_at_all(client, live, fake_mturk, admin):
    first, second = _hits(live)
    benchmark = first.task.instruction.benchmark
    tokens = [
        do_task(client, fake_mturk, hit, f"AFAKE{n}", "no", forged=True)[1]
        for n, hit in enumerate([first, first, first, second, second])
    ]
    _sync(live)
    assert benchmark_arrays(benchmark=benchmark).annotator_names == []
    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)
    assert _crowd_rows(report) == {}
    assert not [s for s in report["sources"] if s["source"] == CROWD]
    assert _aggregated(benchmark) == []
    # The forged worker is told clearly that the work does not count.
    refused = client.get(tokens[0])
    assert refused.status_code == 403
    assert "does not know assignment FORGEDAFAKE0 for worker AFAKE0" in refused.text
    # An admin cannot approve it either: MTurk does not know it.
    forged = Assignment.objects.get(platform_assignment_id="FORGEDAFAKE0")
    with pytest.raises(ConflictError, match="has not confirmed assignment FORGEDAFAKE0"):
        review.assignment_approve(assignment_id=forged.pk, user=admin)
    assert report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)["sources"] == []


def test_unsynced_work_counts_once_mturk_confirms_it(client, live, fake_mturk, admin):
    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    real, _ = do_task(client, fake_mturk, first, "AREAL1", "yes")
    # Submitted here, not yet confirmed: not in any result.
    assert benchmark_arrays(benchmark=benchmark).annotator_names == []
    # Approving asks MTurk (GetAssignment) and stores the confirmation with the assignment.
    review.assignment_approve(assignment_id=real.pk, user=admin)
    record = PlatformAssignment.objects.get(assignment=real)
    assert (record.worker_id, record.hit.hit_id, record.status) == (
        "AREAL1",
        first.hit_id,
        "Approved",
    )
    assert benchmark_arrays(benchmark=benchmark).annotator_names == ["mturk:AREAL1"]
    assert "GetAssignment" in fake_mturk.state.calls


def test_a_real_assignment_id_under_another_worker_id_is_refused(client, live, fake_mturk):
    first, _ = _hits(live)
    real, _ = do_task(client, fake_mturk, first, "AREAL1", "yes")
    _sync(live)
    stolen = _open(client, fake_mturk, first, "ATHIEF", real.platform_assignment_id)
    assert stolen.status_code == 403
    assert "for another worker or HIT" in stolen.text
    assert not Assignment.objects.filter(annotator__worker_id="ATHIEF").exists()


def test_never_more_workers_per_hit_than_max_assignments(client, live, fake_mturk):
    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    # MaxAssignments raised on MTurk behind our back: three workers submit on a HIT of 2.
    fake_mturk.state.hits[first.hit_id]["MaxAssignments"] = 3
    for worker in ("AREAL1", "AREAL2", "AREAL3"):
        do_task(client, fake_mturk, first, worker, "yes")
    _sync(live)
    assert len(benchmark_arrays(benchmark=benchmark).annotator_names) == 2
    # A fourth worker is refused on our page: the HIT has its two confirmed workers.
    fake_mturk.state.hits[first.hit_id]["MaxAssignments"] = 4
    fourth = fake_mturk.api.worker_accept(first.hit_id, "AREAL4")
    page = _open(client, fake_mturk, first, "AREAL4", fourth)
    assert page.status_code == 409 and "already has the 2 workers" in page.text


def test_confirmation_still_works_after_expiring_all_hits(client, live, fake_mturk, admin):
    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    do_task(client, fake_mturk, first, "AREAL1", "yes")
    expired = review.publication_expire(publication_id=live.pk, now=timezone.now(), user=admin)
    assert (expired.expired, expired.failed) == (2, 0)
    do_task(client, fake_mturk, first, "AFAKE1", "no", forged=True)
    _sync(live)
    assert benchmark_arrays(benchmark=benchmark).annotator_names == ["mturk:AREAL1"]
    confirmations = {
        row.worker.worker_id: row.confirmation for row in selectors.review_rows(publication=live)
    }
    assert confirmations == {"AREAL1": "confirmed", "AFAKE1": "unknown to the platform"}


def _worker_finishes(browser, fake_mturk, opened, assignment_id: str) -> None:
    """Answer the task page `opened` led to, and hand the assignment back from the done page."""
    names = set(re.findall(r'name="(r\d+_q\d+)"', browser.get(opened["Location"]).text))
    done = browser.post(opened["Location"], {name: "yes" for name in names})
    assert f'name="assignmentId" value="{assignment_id}"' in done.text
    _hand_back(fake_mturk, assignment_id, expect=200)


def test_a_made_up_assignment_id_cannot_take_a_workers_task_from_under_them(live, fake_mturk):
    """Someone who knows a worker's id reopened that worker's claimed task with an assignment id
    of their own making: the claim moved to that id, the honest worker's done page handed back
    the forger's id (MTurk refused it), and the honest work never counted."""
    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    honest, forger = Client(), Client()
    assignment_id = fake_mturk.api.worker_accept(first.hit_id, "AREAL1")
    opened = _open(honest, fake_mturk, first, "AREAL1", assignment_id)
    assert opened.status_code == 302

    taken = _open(forger, fake_mturk, first, "AREAL1", "FORGEDAREAL1")
    assert taken.status_code == 409
    assert "open under another of your assignments in another browser" in taken.text
    # A claim cookie of the forger's own making (unsigned, or signed for another claim) is none.
    claim = Assignment.objects.get(annotator__worker_id="AREAL1")
    forger.cookies[f"crowd_claim_{claim.pk}"] = str(claim.pk)
    assert _open(forger, fake_mturk, first, "AREAL1", "FORGEDAREAL2").status_code == 409

    _worker_finishes(honest, fake_mturk, opened, assignment_id)
    _sync(live)
    assert benchmark_arrays(benchmark=benchmark).annotator_names == ["mturk:AREAL1"]


def test_a_worker_who_returned_the_hit_and_took_it_again_works_on_in_the_same_browser(
    live, fake_mturk
):
    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    browser = Client()
    earlier = fake_mturk.api.worker_accept(first.hit_id, "AREAL1")
    opened = _open(browser, fake_mturk, first, "AREAL1", earlier)
    claim = Assignment.objects.get(annotator__worker_id="AREAL1")
    cookie = opened.cookies[f"crowd_claim_{claim.pk}"]  # kept inside MTurk's frame where allowed
    assert (cookie["secure"], cookie["httponly"], cookie["samesite"]) == (True, True, "None")
    assert cookie["path"] == reverse("crowd:mturk-task", args=[first.unique_request_token])
    fake_mturk.api.worker_return(earlier)
    again = fake_mturk.api.worker_accept(first.hit_id, "AREAL1")
    opened = _open(browser, fake_mturk, first, "AREAL1", again)
    assert opened.status_code == 302
    _worker_finishes(browser, fake_mturk, opened, again)
    _sync(live)
    assert benchmark_arrays(benchmark=benchmark).annotator_names == ["mturk:AREAL1"]


def test_a_worker_who_took_the_hit_again_in_another_browser_works_once_the_claim_lapses(
    live, fake_mturk
):
    """Another browser has no claim cookie (nor has one whose frame keeps no third-party
    cookies): it is told when it may take the task up, and then does, under the new id."""
    from annotate.services.assignments import assignments_expire

    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    earlier = fake_mturk.api.worker_accept(first.hit_id, "AREAL1")
    assert _open(Client(), fake_mturk, first, "AREAL1", earlier).status_code == 302
    fake_mturk.api.worker_return(earlier)
    again = fake_mturk.api.worker_accept(first.hit_id, "AREAL1")
    elsewhere = Client()
    refused = _open(elsewhere, fake_mturk, first, "AREAL1", again)
    claim = Assignment.objects.get(annotator__worker_id="AREAL1")
    until = timezone.localtime(claim.expires_at).strftime("%Y-%m-%d %H:%M")
    assert refused.status_code == 409 and f"or here again after {until}" in refused.text

    assert assignments_expire(now=claim.expires_at) == 1
    opened = _open(elsewhere, fake_mturk, first, "AREAL1", again)
    assert opened.status_code == 302
    claim.refresh_from_db()
    assert (claim.status, claim.platform_assignment_id) == (AssignmentStatus.CLAIMED, again)
    assert claim.expires_at > timezone.now()
    _worker_finishes(elsewhere, fake_mturk, opened, again)
    _sync(live)
    assert benchmark_arrays(benchmark=benchmark).annotator_names == ["mturk:AREAL1"]


# --- 2. Rejected work and blocked workers leave the results ----------------------------------


def test_rejecting_and_blocking_change_the_next_report(client, live, fake_mturk, admin):
    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    fake_mturk.state.hits[first.hit_id]["MaxAssignments"] = 3
    first.max_assignments = live.assignments_per_task = live.batch.project.assignments_per_task = 3
    first.save()
    live.save()
    live.batch.project.save()
    yes, _ = do_task(client, fake_mturk, first, "AYES", "yes")
    no1, _ = do_task(client, fake_mturk, first, "ANO1", "no")
    no2, _ = do_task(client, fake_mturk, first, "ANO2", "no")
    _sync(live)
    cache.clear()
    before = _crowd_rows(report_cached(benchmark=benchmark, scope=OPERATOR))
    assert set(before.values()) == {(0, 2)}  # two NO against one YES
    review.assignment_reject(assignment_id=no1.pk, user=admin, feedback="gold wrong")
    review.assignment_reject(assignment_id=no2.pk, user=admin, feedback="gold wrong")
    after = _crowd_rows(report_cached(benchmark=benchmark, scope=OPERATOR))
    assert set(after.values()) == {(2, 2)}  # the cached report did not survive the verdicts
    assert {r["label"] for r in _aggregated(benchmark)} == {"YES"}
    raw = _raw(benchmark)
    assert {r["work_status"] for r in raw if r["annotator"] == "mturk:ANO1"} == {"rejected"}

    review.worker_block(annotator_id=yes.annotator_id, reason="spam", user=admin)
    assert _crowd_rows(report_cached(benchmark=benchmark, scope=OPERATOR)) == {}
    assert {r["work_status"] for r in _raw(benchmark) if r["annotator"] == "mturk:AYES"} == {
        "worker blocked"
    }
    instruction = first.task.instruction
    client.force_login(admin)
    page = client.get(f"/benchmarks/{benchmark.pk}/instructions/{instruction.pk}/")
    assert page.status_code == 200
    assert "mturk:AYES" not in page.text and "mturk:ANO1" not in page.text

    project_csv = client.get(f"/api/annotate/projects/{live.batch.project_id}/labels/")
    rows = list(csv.DictReader(io.StringIO(b"".join(project_csv.streaming_content).decode())))
    statuses = {(r["annotator"], r["work_status"]) for r in rows}
    assert statuses == {
        ("mturk:AYES", "worker blocked"),
        ("mturk:ANO1", "rejected"),
        ("mturk:ANO2", "rejected"),
    }

    review.worker_unblock(annotator_id=yes.annotator_id, user=admin)
    assert set(_crowd_rows(report_cached(benchmark=benchmark, scope=OPERATOR)).values()) == {(2, 2)}


def test_a_worker_blocked_while_holding_a_claim_is_told_the_work_does_not_count(
    client, live, fake_mturk, admin
):
    """An admin blocks an MTurk worker who has the task open. MTurk still lets them submit the
    assignment they accepted, and our page took the answers, then said they count once
    Mechanical Turk confirms them: a blocked worker's work counts in no result. The answers are
    kept (an unblock counts them), the done page says they do not count, the HIT still goes
    back to MTurk, and the admin sees what MTurk will pay for it and can reject it."""

    from annotate.crowd.selectors import publication_spending
    from annotate.selectors.results import counted_assignments as counted

    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    assignment_id = fake_mturk.api.worker_accept(first.hit_id, "ABLOCKED")
    opened = _open(client, fake_mturk, first, "ABLOCKED", assignment_id)
    names = set(re.findall(r'name="(r\d+_q\d+)"', client.get(opened["Location"]).text))
    work = Assignment.objects.get(platform_assignment_id=assignment_id)
    review.worker_block(annotator_id=work.annotator_id, reason="spam", user=admin)
    assert "ABLOCKED" in fake_mturk.state.blocks

    done = client.post(opened["Location"], {name: "yes" for name in names})
    assert done.status_code == 200
    assert 'id="blocked-note"' in done.text and "do not count in the results" in done.text
    assert 'id="blocked-payment-note"' in done.text
    assert "count once Mechanical Turk confirms" not in done.text
    assert 'id="external-submit"' in done.text  # the HIT still goes back to MTurk
    work.refresh_from_db()
    assert work.status == AssignmentStatus.SUBMITTED and work.labels.count() == len(names)
    _hand_back(fake_mturk, assignment_id, expect=200)  # MTurk takes it from a blocked worker
    _sync(live)
    work.refresh_from_db()
    assert work.platform_record.status == "Submitted"
    assert not counted().filter(pk=work.pk).exists()
    assert {r["work_status"] for r in _raw(benchmark) if r["annotator"] == "mturk:ABLOCKED"} == {
        "worker blocked"
    }
    again = client.get(opened["Location"])  # the done page, reopened
    assert 'id="blocked-note"' in again.text and 'id="confirmation-note"' not in again.text
    assert publication_spending(publication=live).waiting == 1  # MTurk pays it unless rejected

    review.assignment_reject(assignment_id=work.pk, user=admin, feedback="blocked: spam")
    assert fake_mturk.state.assignments[assignment_id]["AssignmentStatus"] == "Rejected"
    assert publication_spending(publication=live).waiting == 0


def test_a_worker_blocked_while_holding_a_claim_is_warned_on_the_task_page_itself(
    client, live, fake_mturk, admin
):
    """Only the done page said a worker blocked mid-claim does the task for nothing: the task
    page they work on now says so first, about them alone (no other worker, no reason)."""
    first, _ = _hits(live)
    other_id = fake_mturk.api.worker_accept(first.hit_id, "AOTHER")
    other = _open(client, fake_mturk, first, "AOTHER", other_id)["Location"]
    mine_id = fake_mturk.api.worker_accept(first.hit_id, "ABLOCKED")
    mine = _open(client, fake_mturk, first, "ABLOCKED", mine_id)["Location"]
    assert 'id="blocked-task-note"' not in client.get(mine).text
    work = Assignment.objects.get(platform_assignment_id=mine_id)
    review.worker_block(annotator_id=work.annotator_id, reason="copied answers", user=admin)

    page = client.get(mine).text
    note = page.split('id="blocked-task-note"')[1].split("</p>")[0]
    assert "answers you give to this task are kept but will not count in the results" in note
    assert "goes back to Mechanical Turk" in note  # what happens to the HIT they hold
    assert "copied answers" not in page and "AOTHER" not in page
    incomplete = client.post(mine, {"r1_q1": "yes"})  # back to the page with what is missing
    assert incomplete.status_code == 400 and 'id="blocked-task-note"' in incomplete.text
    assert 'id="blocked-task-note"' not in client.get(other).text  # the others' pages say nothing


def test_rejecting_forged_work_needs_no_platform(client, live, fake_mturk, admin):
    first, _ = _hits(live)
    forged, _ = do_task(client, fake_mturk, first, "AFAKE1", "no", forged=True)
    done = review.assignment_reject(assignment_id=forged.pk, user=admin, feedback="not on MTurk")
    assert done.status == AssignmentStatus.REJECTED


def test_a_verdict_on_a_forgers_copy_of_a_real_assignment_id_never_reaches_the_real_work(
    client, live, fake_mturk, admin
):
    """A forger who opens a HIT with an honest worker's assignment id before any sync gets an
    assignment here, unknown to the platform for that worker (and now listed under "Needs
    attention", which skipped it since the id itself was known). Rejecting it (what the review
    page invites) once rejected the honest worker's assignment on MTurk, unpaid, and the next
    sync took their work out of the report; approving it approved theirs. The platform is told
    only about work it confirmed for that worker and HIT."""
    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    real, _ = do_task(client, fake_mturk, first, "AREAL1", "yes")
    opened = _open(client, fake_mturk, first, "ATHIEF", real.platform_assignment_id)
    assert opened.status_code == 302
    names = set(re.findall(r'name="(r\d+_q\d+)"', client.get(opened["Location"]).text))
    assert client.post(opened["Location"], {name: "no" for name in names}).status_code == 200
    thief = Assignment.objects.get(annotator__worker_id="ATHIEF")
    _sync(live)  # the review page: the copy is "unknown to the platform" and needs attention
    assert selectors.reconciliation(publication=live).missing_on_platform == [thief]

    with pytest.raises(ConflictError, match="has not confirmed"):
        review.assignment_approve(assignment_id=thief.pk, user=admin)
    done = review.assignment_reject(assignment_id=thief.pk, user=admin, feedback="forged")
    assert done.status == AssignmentStatus.REJECTED
    remote = fake_mturk.state.assignments[real.platform_assignment_id]
    assert remote["AssignmentStatus"] == "Submitted"
    _sync(live)
    real.refresh_from_db()
    assert real.status == AssignmentStatus.SUBMITTED
    assert benchmark_arrays(benchmark=benchmark).annotator_names == ["mturk:AREAL1"]


def _hit_not_ours(fake_mturk) -> str:
    """A HIT on the platform that no publication of ours made (another requester's)."""
    api = fake_mturk.api
    type_id = api.call(
        "CreateHITType",
        {"AssignmentDurationInSeconds": 600, "Reward": "0.05", "Title": "x", "Description": "x"},
    )["HITTypeId"]
    created = api.call(
        "CreateHITWithHITType",
        {"HITTypeId": type_id, "LifetimeInSeconds": 3600, "MaxAssignments": 5},
    )
    return created["HIT"]["HITId"]


def test_work_under_a_real_assignment_of_a_hit_not_ours_never_counts(
    client, live, fake_mturk, admin
):
    """A worker holding a real assignment of someone else's HIT opens our HIT with it and
    hands it back (MTurk takes the hand-back: the assignment is real). The platform lists it
    under no HIT of ours: it stays unconfirmed, shown so to the admin, counts in no result,
    cannot be approved, and its reject reaches nobody's assignment on the platform."""
    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    theirs = fake_mturk.api.worker_accept(_hit_not_ours(fake_mturk), "AOTHER")
    opened = _open(client, fake_mturk, first, "AOTHER", theirs)
    assert opened.status_code == 302, opened.content
    names = set(re.findall(r'name="(r\d+_q\d+)"', client.get(opened["Location"]).text))
    assert client.post(opened["Location"], {name: "no" for name in names}).status_code == 200
    _hand_back(fake_mturk, theirs, expect=200)
    stray = Assignment.objects.get(platform_assignment_id=theirs)

    _sync(live)

    assert not PlatformAssignment.objects.filter(assignment=stray).exists()
    assert selectors.reconciliation(publication=live).missing_on_platform == [stray]
    assert not Assignment.objects.filter(counted_assignments(now=timezone.now()), pk=stray.pk)
    assert benchmark_arrays(benchmark=benchmark).annotator_names == []
    raw = [r for r in _raw(benchmark) if r["annotator"] == "mturk:AOTHER"]
    assert raw and {r["work_status"] for r in raw} == {"not confirmed by the platform"}
    with pytest.raises(ConflictError, match="has not confirmed"):
        review.assignment_approve(assignment_id=stray.pk, user=admin)
    review.assignment_reject(assignment_id=stray.pk, user=admin, feedback="not our HIT")
    assert fake_mturk.state.assignments[theirs]["AssignmentStatus"] == "Submitted"
    stray.refresh_from_db()
    assert stray.status == AssignmentStatus.REJECTED


@pytest.mark.parametrize("approve_tried", [True, False])
def test_a_verdict_on_a_forgers_copy_on_another_hit_leaves_the_real_record_alone(
    live, fake_mturk, admin, approve_tried
):
    """A forger opens another task's HIT with an honest worker's assignment id before any sync
    stored it. Rejecting (or trying to approve) the copy asked MTurk about the id and stored the
    honest worker's assignment, on their own HIT, under the forger's HIT and unlinked: the
    honest work left every result and the next sync gave its slot away. A confirmation of one
    assignment never moves a record of another HIT."""
    from annotate.selectors.results import counted_assignments as counted_in_results

    first, second = _hits(live)
    benchmark = first.task.instruction.benchmark
    assignment_id = fake_mturk.api.worker_accept(first.hit_id, "AREAL1")
    forger, honest = Client(), Client()
    copied = _open(forger, fake_mturk, second, "ATHIEF", assignment_id)
    assert copied.status_code == 302, copied.content
    names = set(re.findall(r'name="(r\d+_q\d+)"', forger.get(copied["Location"]).text))
    assert forger.post(copied["Location"], {name: "no" for name in names}).status_code == 200
    opened = _open(honest, fake_mturk, first, "AREAL1", assignment_id)
    _worker_finishes(honest, fake_mturk, opened, assignment_id)
    _sync(live)
    real = Assignment.objects.get(annotator__worker_id="AREAL1")
    thief = Assignment.objects.get(annotator__worker_id="ATHIEF")
    record = {"hit": first.pk, "assignment": real.pk, "worker_id": "AREAL1"}

    def real_work_counts():
        row = PlatformAssignment.objects.get(platform_assignment_id=assignment_id)
        assert {"hit": row.hit_id, "assignment": row.assignment_id, "worker_id": row.worker_id} == (
            record
        )
        assert list(counted_in_results()) == [real]
        assert benchmark_arrays(benchmark=benchmark).annotator_names == ["mturk:AREAL1"]

    real_work_counts()
    if approve_tried:
        with pytest.raises(ConflictError, match="has not confirmed"):
            review.assignment_approve(assignment_id=thief.pk, user=admin)
        real_work_counts()
    done = review.assignment_reject(assignment_id=thief.pk, user=admin, feedback="forged")
    assert done.status == AssignmentStatus.REJECTED
    real_work_counts()
    assert fake_mturk.state.assignments[assignment_id]["AssignmentStatus"] == "Submitted"
    _sync(live)
    real.refresh_from_db()
    assert real.status == AssignmentStatus.SUBMITTED and not real.is_late
    real_work_counts()


def test_worker_who_already_worked_is_still_refused(client, live, fake_mturk):
    first, _ = _hits(live)
    do_task(client, fake_mturk, first, "AREAL1", "yes")
    again = _open(client, fake_mturk, first, "AREAL1", "SOMEOTHERID")
    assert again.status_code == 409


def test_unconfirmed_work_counts_nowhere_whatever_kind_the_worker_is_given(
    client, live, fake_mturk, admin
):
    """A researcher who marks an MTurk worker as an expert does not make the work the platform
    never confirmed count (it did, in every result, when the rule asked for the kind 'crowd')."""
    from annotate.models import Annotator
    from annotate.services.annotators import annotator_kind_set

    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    do_task(client, fake_mturk, first, "AFORGED", "yes")  # never synced nor approved
    worker = Annotator.objects.get(worker_id="AFORGED")
    annotator_kind_set(annotator=worker, kind="expert", now=timezone.now())
    assert benchmark_arrays(benchmark=benchmark).annotator_names == []
    statuses = {row["work_status"] for row in _raw(benchmark)}
    assert statuses == {"not confirmed by the platform"}


def test_crowd_cost_is_what_each_assignment_was_paid_through_its_publication(
    client, live, fake_mturk, admin
):
    """Table 4's crowd cost: the reward the admin published (not the project's), with the fee
    of the platform the work came through; a self-hosted link takes no fee."""
    from decimal import Decimal

    from annotate.crowd.models import Publication
    from annotate.crowd.selectors import crowd_paid_per_assignment
    from annotate.models import Annotator, AnnotatorKind

    first, second = _hits(live)
    benchmark = first.task.instruction.benchmark
    project = first.task.batch.project
    assert project.reward_usd != Decimal("0.80")
    Publication.objects.filter(pk=live.pk).update(
        reward_usd=Decimal("0.80"), fee_rate=Decimal("0.2")
    )
    one, _ = do_task(client, fake_mturk, first, "AWORKER1", "yes")
    two, _ = do_task(client, fake_mturk, second, "AWORKER1", "no")
    _sync(live)
    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)
    crowd = next(
        row for row in report["sources"]
        if row["source"] == CROWD and row["subset"] == "overall"
    )  # fmt: skip
    assert crowd["cost_usd"] == pytest.approx(2 * 0.80 * 1.2)
    # A self-hosted link's worker on the same batch: its reward, no fee.
    Publication.objects.create(
        batch=first.task.batch, platform="selfhosted", title="t", description="d",
        reward_usd=Decimal("0.50"), fee_rate=Decimal("0.25"), assignments_per_task=1,
        assignment_duration_seconds=60, auto_approval_delay_seconds=60, lifetime_seconds=60,
        task_base_url="https://x.example", link_token="tok",
    )  # fmt: skip
    linked = Annotator.objects.create(
        name="selfhosted:L1", platform="selfhosted", worker_id="L1", kind=AnnotatorKind.CROWD
    )
    Assignment.objects.filter(pk=one.pk).update(annotator=linked, platform_hit_id="")
    in_house = Annotator.objects.create(name="ann-in", kind=AnnotatorKind.CROWD)
    Assignment.objects.filter(pk=two.pk).update(annotator=in_house, platform_hit_id="")
    paid = crowd_paid_per_assignment(Assignment.objects.filter(pk__in=[one.pk, two.pk]))
    assert paid[one.pk] == Decimal("0.50")  # the link's reward, no platform fee
    # No publication: the project's $1 and MTurk's 20 % (a HIT of its 3 assignments per task).
    assert (project.reward_usd, paid[two.pk]) == (Decimal("1.00"), Decimal("1.20"))


def test_assignments_of_one_price_are_priced_and_added_once_per_group(
    client, live, fake_mturk, monkeypatch
):
    """Table 4 and a publication's spending price tens of thousands of assignments sharing a few
    prices: the database counts the assignments of each key and price, so Python adds one
    amount per group (the price × how many), not one per assignment, and the sum is the same."""
    from decimal import Decimal

    from annotate.crowd.models import Publication
    from annotate.crowd.selectors import crowd_paid_per_assignment

    first, second = _hits(live)
    Publication.objects.filter(pk=live.pk).update(
        reward_usd=Decimal("0.80"), fee_rate=Decimal("0.2")
    )
    one, _ = do_task(client, fake_mturk, first, "AWORKER1", "yes")
    two, _ = do_task(client, fake_mturk, second, "AWORKER1", "no")
    added = []
    add = selectors._add

    def add_spy(paid, row, by, amount):
        added.append(amount)
        add(paid, row, by, amount)

    monkeypatch.setattr(selectors, "_add", add_spy)
    work = Assignment.objects.filter(pk__in=[one.pk, two.pk])
    assert crowd_paid_per_assignment(work, by=("annotator_id",)) == {
        one.annotator_id: Decimal("1.92")  # 2 × ($0.80 + 20 %)
    }
    assert added == [Decimal("1.92")]
    # By assignment: one group each, each at its price.
    assert crowd_paid_per_assignment(work) == {one.pk: Decimal("0.96"), two.pk: Decimal("0.96")}


def test_a_selfhosted_participant_who_names_an_mturk_hit_is_priced_as_the_links_work(
    client, live, fake_mturk, admin
):
    """A self-hosted link keeps the participant's STUDY_ID (a parameter of their URL) where an
    MTurk assignment keeps its HIT id. A participant who put an MTurk HIT id there was priced at
    that publication's reward and fee in the spending and Table 4's cost, and counted among the
    HIT's workers on the publication page."""
    from decimal import Decimal

    from annotate.crowd.models import Publication
    from annotate.crowd.selectors import crowd_paid_per_assignment, publication_spending

    first, _ = _hits(live)
    Publication.objects.filter(pk=live.pk).update(reward_usd=Decimal("1.00"))
    link = publishing.publication_create(
        batch=live.batch,
        platform_name="selfhosted",
        chosen=PublishSettings(title="t", description="d", reward_usd=Decimal("0.10")),
        base_url="https://annotate.example.org",
    )
    started = client.post(
        reverse("crowd:selfhosted-join", args=[link.link_token]),
        {"PROLIFIC_PID": "P1", "STUDY_ID": first.hit_id, "SESSION_ID": "S1"},
    )
    names = set(re.findall(r'name="(r\d+_q\d+)"', client.get(started["Location"]).text))
    assert client.post(started["Location"], {n: "yes" for n in names}).status_code == 200
    work = Assignment.objects.filter(annotator__worker_id="P1")
    assert crowd_paid_per_assignment(work) == {work.get().pk: Decimal("0.10")}
    assert publication_spending(publication=link).total_usd == Decimal("0.10")
    client.force_login(admin)
    page = client.get(reverse("crowd:publication", args=[live.pk])).text
    assert re.findall(r'<td class="hit-work">([^<]*)</td>', page) == ["0 / 0 / 2"] * 2


# --- 6. Never more assignments per task than the project asks for ----------------------------


def test_work_done_here_after_publishing_leaves_the_crowd_only_what_is_left(
    client, live, fake_mturk
):
    """Slots taken here after the HIT was published (MaxAssignments 2 on a task of 2) are not
    handed out again: the walkthrough's demo worker got a third assignment on a task of two."""
    first, _ = _hits(live)
    AssignmentFactory(task=first.task, status=AssignmentStatus.SUBMITTED)  # an in-house expert
    do_task(client, fake_mturk, first, "AREAL1", "yes")
    late = fake_mturk.api.worker_accept(first.hit_id, "AREAL2")
    page = _open(client, fake_mturk, first, "AREAL2", late)
    assert page.status_code == 409 and "already has all the workers it needs" in page.text
    assert not Assignment.objects.filter(annotator__worker_id="AREAL2").exists()
    counted = first.task.assignments.filter(counted_assignments(now=timezone.now()))
    assert counted.count() == 2


def test_a_claim_made_here_holds_its_slot_until_it_lapses(client, live, fake_mturk):
    first, _ = _hits(live)
    AssignmentFactory(task=first.task, status=AssignmentStatus.SUBMITTED)
    claim = AssignmentFactory(task=first.task, status=AssignmentStatus.CLAIMED)
    accepted = fake_mturk.api.worker_accept(first.hit_id, "AREAL1")
    assert _open(client, fake_mturk, first, "AREAL1", accepted).status_code == 409
    claim.status = AssignmentStatus.EXPIRED  # the in-house annotator let it lapse
    claim.save()
    assert _open(client, fake_mturk, first, "AREAL1", accepted).status_code == 302


def test_invented_workers_cannot_fill_a_hit_the_task_has_room_for(client, live, fake_mturk):
    """The platform's MaxAssignments is the limit while nothing was done here since: forged
    claims do not keep the real workers out."""
    first, _ = _hits(live)
    for n in range(2):
        do_task(client, fake_mturk, first, f"AFAKE{n}", "no", forged=True)
    do_task(client, fake_mturk, first, "AREAL1", "yes")


# --- Unconfirmed work and the task's slots -----------------------------------------------------


def _stored_not_handed_back(client, fake_mturk, hit, worker) -> Assignment:
    """A real worker's work stored by our page before the browser's hand-back reached MTurk."""
    assignment_id = fake_mturk.api.worker_accept(hit.hit_id, worker)
    opened = _open(client, fake_mturk, hit, worker, assignment_id)
    names = set(re.findall(r'name="(r\d+_q\d+)"', client.get(opened["Location"]).text))
    assert client.post(opened["Location"], {name: "yes" for name in names}).status_code == 200
    return Assignment.objects.get(platform_assignment_id=assignment_id)


def _in_house_claim(task, name):
    from annotate.services.assignments import assignment_claim_task
    from tests.factories import AnnotatorFactory

    annotator = AnnotatorFactory(name=name)
    return assignment_claim_task(annotator=annotator, task=task, now=timezone.now())


def test_forged_submissions_hold_their_task_only_until_a_sync_does_not_find_them(
    client, live, fake_mturk, admin
):
    """Two invented assignment ids submitted on a task of 2 kept it full for in-house
    annotators (and a self-hosted link) until an admin rejected them, and, once work here left
    the HIT fewer slots, for the platform's own workers: the forger blocked real work."""
    from annotate.errors import NoWorkError
    from annotate.selectors.results import counted_assignments as counted_in_results

    first, _ = _hits(live)
    forged = [
        do_task(Client(), fake_mturk, first, f"AFAKE{n}", "no", forged=True)[0] for n in range(2)
    ]
    with pytest.raises(NoWorkError):  # until the platform has had its say
        _in_house_claim(first.task, "in-house 0")
    _sync(live)

    _in_house_claim(first.task, "in-house 1")
    do_task(Client(), fake_mturk, first, "AREAL1", "yes")
    # The platform's workers fill what is left (one slot): never more than 2 per task.
    accepted = fake_mturk.api.worker_accept(first.hit_id, "AREAL2")
    assert _open(Client(), fake_mturk, first, "AREAL2", accepted).status_code == 409
    holding = Assignment.objects.filter(counted_assignments(now=timezone.now()), task=first.task)
    assert sorted(a.annotator.name for a in holding) == ["in-house 1", "mturk:AREAL1"]
    _sync(live)
    assert not counted_in_results().filter(pk__in=[f.pk for f in forged]).exists()
    raw = [r for r in _raw(first.task.instruction.benchmark) if "AFAKE" in r["annotator"]]
    assert {r["work_status"] for r in raw} == {"not confirmed by the platform"}
    # The project's label CSV lists their labels once, not again as late answers.
    from annotate.selectors.work import project_label_rows

    header, *rows = project_label_rows(project=first.task.batch.project)
    rows = [dict(zip(header, row, strict=True)) for row in rows]
    forged_rows = [r for r in rows if "AFAKE" in r["annotator"]]
    assert len(forged_rows) == 2 * 4 and {r["late"] for r in forged_rows} == {0}
    # Kept for review: an admin still rejects them (here only, MTurk does not know them).
    for assignment in forged:
        assignment.refresh_from_db()
        assert assignment.status == AssignmentStatus.SUBMITTED
        review.assignment_reject(assignment_id=assignment.pk, user=admin, feedback="forged")
    assert (
        Assignment.objects.filter(
            pk__in=[f.pk for f in forged], status=AssignmentStatus.REJECTED
        ).count()
        == 2
    )


def test_work_handed_back_after_a_sync_has_its_slot_again_only_if_the_task_has_one(
    client, live, fake_mturk
):
    """A sync between our page storing the work and the browser's hand-back takes its slot;
    the hand-back confirms it at the next sync: it counts if its task still has a slot, and
    otherwise stays out as work submitted after the task was filled, its pay on the
    publication's "Late work" line."""
    from decimal import Decimal

    from annotate.crowd.selectors import publication_spending
    from annotate.selectors.results import counted_assignments as counted_in_results

    first, second = _hits(live)
    waited = _stored_not_handed_back(Client(), fake_mturk, first, "AREAL1")
    filled = _stored_not_handed_back(Client(), fake_mturk, second, "AREAL2")
    _sync(live)
    for n in range(2):  # the second task is filled meanwhile
        _in_house_claim(second.task, f"in-house {n}")
    for assignment in (waited, filled):
        _hand_back(fake_mturk, assignment.platform_assignment_id, expect=200)
    _sync(live)

    assert counted_in_results().filter(pk=waited.pk).exists()
    assert not counted_in_results().filter(pk=filled.pk).exists()
    filled.refresh_from_db()
    assert filled.platform_record.status == "Submitted"
    assert (
        Assignment.objects.filter(counted_assignments(now=timezone.now()), task=second.task).count()
        == 2
    )
    spending = publication_spending(publication=live)
    one = Decimal("1.20")  # $1 and MTurk's 20 % on a HIT of 3
    assert (spending.waiting, spending.waiting_usd) == (1, one)
    assert (spending.late, spending.late_usd) == (1, one)
    assert spending.total_usd == 2 * one


def test_released_work_rejected_here_then_handed_back_is_to_be_rejected_on_the_platform(
    client, live, fake_mturk, admin
):
    """Rejected here while its slot was released, then handed back: the platform pays it
    unless it is rejected there too, which the "Spent so far" line for that says (with its
    link to the review page's button), not the "Late work" line, which has none."""

    from annotate.crowd.selectors import publication_spending

    first, _ = _hits(live)
    work = _stored_not_handed_back(Client(), fake_mturk, first, "AREAL1")
    _sync(live)
    review.assignment_reject(assignment_id=work.pk, user=admin, feedback="no hand-back")
    _hand_back(fake_mturk, work.platform_assignment_id, expect=200)
    _sync(live)
    work.refresh_from_db()
    assert (work.status, work.platform_record.status) == (AssignmentStatus.REJECTED, "Submitted")
    spending = publication_spending(publication=live)
    assert (spending.unless_rejected, spending.late) == (1, 0)


def _late_submission(task, name) -> Assignment:
    """Work submitted after its claim lapsed, once two others had filled the task of 2."""
    from datetime import timedelta

    from annotate.services.assignments import assignment_claim_task
    from annotate.services.submissions import Outcome, assignment_submit
    from tests.factories import AnnotatorFactory

    now = timezone.now()
    slow = assignment_claim_task(annotator=AnnotatorFactory(name=name), task=task, now=now)
    later = slow.expires_at + timedelta(minutes=1)
    for n in range(2):
        quick = assignment_claim_task(
            annotator=AnnotatorFactory(name=f"quick {n}"), task=task, now=later
        )
        answers = {name: "yes" for name in _field_names(quick)}
        assignment_submit(
            assignment_id=quick.id, annotator=quick.annotator, answers=answers, now=later
        )
    answers = {name: "no" for name in _field_names(slow)}
    result = assignment_submit(
        assignment_id=slow.id, annotator=slow.annotator, answers=answers, now=later
    )
    assert result.outcome == Outcome.LATE
    return result.assignment


def _field_names(assignment) -> list[str]:
    return [f"r{n}_q{q}" for n in range(1, len(assignment.display_order) + 1) for q in (1, 2)]


def test_progress_shows_released_work_as_unconfirmed_and_only_expired_work_as_late(
    client, live, fake_mturk, researcher
):
    """The project page and its API counted work whose slot a sync released (the platform had
    not listed it yet) among the late work: a researcher read that a worker was late when the
    work was waiting for the platform's confirmation."""
    from rest_framework.test import APIClient

    first, second = _hits(live)
    waiting = _stored_not_handed_back(Client(), fake_mturk, first, "AREAL1")
    _sync(live)
    _late_submission(second.task, "slow")
    project = first.task.batch.project
    project.researchers.add(researcher)

    api = APIClient()
    api.force_login(researcher)
    url = reverse("annotate-api:project-progress", args=[project.id])
    progress = api.get(url).json()
    assert (progress["assignments_late"], progress["assignments_unconfirmed"]) == (1, 1)
    rows = {row["annotator"]: row for row in progress["per_annotator"]}
    assert {k: rows["mturk:AREAL1"][k] for k in ("submitted", "late", "unconfirmed")} == {
        "submitted": 0,
        "late": 0,
        "unconfirmed": 1,
    }
    assert {k: rows["slow"][k] for k in ("submitted", "late", "unconfirmed")} == {
        "submitted": 0,
        "late": 1,
        "unconfirmed": 0,
    }
    client.force_login(researcher)
    page = client.get(reverse("work:project-detail", args=[project.id])).text
    assert "2 submitted, 0 in progress, 1 late (kept, not counted), 1 released unconfirmed" in page
    # Annotator | Submitted | In progress | Late | Released, unconfirmed | Rejected
    assert "<td>mturk:AREAL1</td><td>0</td><td>0</td><td>0</td><td>1</td><td>0</td>" in page
    assert "<td>slow</td><td>0</td><td>0</td><td>1</td><td>0</td><td>0</td>" in page

    # The hand-back arrives; the next sync confirms it and gives it its slot back.
    _hand_back(fake_mturk, waiting.platform_assignment_id, expect=200)
    _sync(live)
    rows = {row["annotator"]: row for row in api.get(url).json()["per_annotator"]}
    assert (rows["mturk:AREAL1"]["submitted"], rows["mturk:AREAL1"]["unconfirmed"]) == (1, 0)


def test_the_progress_column_says_it_counts_released_work_only(
    client, live, fake_mturk, researcher
):
    """The column read "Unconfirmed by the platform", but work the platform has not confirmed
    yet that still holds its slot (no sync since its submit) is counted as submitted: only work
    whose slot a sync released is in it, and its heading and help text now say so."""
    from rest_framework.test import APIClient

    first, _ = _hits(live)
    _stored_not_handed_back(Client(), fake_mturk, first, "AREAL1")
    project = first.task.batch.project
    project.researchers.add(researcher)
    client.force_login(researcher)
    page_url = reverse("work:project-detail", args=[project.id])
    heading = '<th scope="col">Released, unconfirmed by the platform</th>'
    page = client.get(page_url).text
    assert heading in page and "Unconfirmed by the platform</th>" not in page
    # Waiting for its confirmation, holding its slot: submitted, not in the column.
    assert "<td>mturk:AREAL1</td><td>1</td><td>0</td><td>0</td><td>0</td><td>0</td>" in page
    _sync(live)
    page = client.get(page_url).text
    assert "<td>mturk:AREAL1</td><td>0</td><td>0</td><td>0</td><td>1</td><td>0</td>" in page
    assert "1 released unconfirmed (a sync took their slots back" in page
    api = APIClient()
    api.force_login(researcher)
    schema = api.get(reverse("api-schema"), {"format": "json"}).json()
    progress = schema["components"]["schemas"]["ProjectProgress"]["properties"]
    assert progress["assignments_unconfirmed"]["description"].startswith(
        "Released unconfirmed work only"
    )
    assert (
        "waiting for its platform's confirmation included"
        in (progress["assignments_submitted"]["description"])
    )


def test_a_sync_within_the_grace_leaves_fresh_work_its_slot(client, live, fake_mturk, settings):
    """An honest worker's hand-back reaches MTurk seconds after our page stored the work: a
    sync in between took its slot, another worker could take it, and the honest work then
    stayed out as late work once MTurk confirmed it."""
    from datetime import timedelta

    from annotate.errors import NoWorkError
    from annotate.selectors.results import counted_assignments as counted_in_results

    settings.CROWD_RELEASE_GRACE_SECONDS = 120
    first, _ = _hits(live)
    worker = Client()
    fresh = _stored_not_handed_back(worker, fake_mturk, first, "AREAL1")
    just_within = fresh.submitted_at + timedelta(seconds=119)
    review.publication_sync(publication_id=live.pk, now=just_within)

    fresh.refresh_from_db()
    assert not fresh.is_late
    assert selectors.assignment_confirmation(assignment=fresh) == selectors.Confirmation.WAITING
    _in_house_claim(first.task, "in-house 1")
    with pytest.raises(NoWorkError):  # the task of 2 is full: the fresh work kept its slot
        _in_house_claim(first.task, "in-house 2")
    # The worker's page still hands the work back (no "MTurk does not know" refusal).
    opened = _open(worker, fake_mturk, first, "AREAL1", fresh.platform_assignment_id)
    page = worker.get(opened["Location"])
    assert page.status_code == 200 and 'id="external-submit"' in page.text
    _hand_back(fake_mturk, fresh.platform_assignment_id, expect=200)
    _sync(live)
    assert counted_in_results().filter(pk=fresh.pk).exists()


def test_a_sync_after_the_grace_takes_the_slot_of_work_it_does_not_find(
    client, live, fake_mturk, settings
):
    """Work the platform still does not list once its grace is over loses its slot, as before."""
    from datetime import timedelta

    settings.CROWD_RELEASE_GRACE_SECONDS = 120
    first, _ = _hits(live)
    stale = _stored_not_handed_back(Client(), fake_mturk, first, "AREAL1")
    grace_over = stale.submitted_at + timedelta(seconds=120)
    review.publication_sync(publication_id=live.pk, now=grace_over)

    stale.refresh_from_db()
    assert (stale.status, stale.is_late) == (AssignmentStatus.SUBMITTED, True)
    assert selectors.assignment_confirmation(assignment=stale) == selectors.Confirmation.REFUSED
    for n in range(2):  # its slot is free again: the task of 2 takes two others
        _in_house_claim(first.task, f"in-house {n}")


def test_a_worker_whose_hand_back_never_left_can_still_hand_the_hit_back(client, live, fake_mturk):
    """The page closed before the browser posted the HIT to MTurk, and a sync after the grace
    took the work's slot: reopening the HIT says the answers do not count yet and offers the
    hand-back (not sent by itself), which MTurk takes; the next sync counts the kept answers."""
    from annotate.selectors.results import counted_assignments as counted_in_results

    first, _ = _hits(live)
    worker = Client()
    lost = _stored_not_handed_back(worker, fake_mturk, first, "AREAL1")
    _sync(live)
    lost.refresh_from_db()
    assert lost.is_late and not counted_in_results().filter(pk=lost.pk).exists()

    opened = _open(worker, fake_mturk, first, "AREAL1", lost.platform_assignment_id)
    page = worker.get(opened["Location"])
    assert page.status_code == 403
    assert "does not know assignment" in page.text and "these answers do not count" in page.text
    form = re.search(r'<form method="post" action="([^"]+)" id="hand-back">', page.text)
    assert form and form.group(1) == f"{fake_mturk.url}/mturk/externalSubmit"
    assert f'name="assignmentId" value="{lost.platform_assignment_id}"' in page.text
    assert 'id="external-submit"' not in page.text  # not posted without the worker's press
    assert fake_mturk.host in page["Content-Security-Policy"]  # the form may post there

    _hand_back(fake_mturk, lost.platform_assignment_id, expect=200)
    _sync(live)
    assert counted_in_results().filter(pk=lost.pk).exists()


def test_a_forged_assignment_gets_no_hand_back_that_mturk_would_take(client, live, fake_mturk):
    first, _ = _hits(live)
    forged, token = do_task(client, fake_mturk, first, "AFAKE1", "no", forged=True)
    _sync(live)
    page = client.get(token)
    assert page.status_code == 403 and 'id="hand-back"' in page.text
    _hand_back(fake_mturk, forged.platform_assignment_id, expect=400)  # MTurk refuses it
    _sync(live)
    forged.refresh_from_db()
    assert forged.is_late


def test_progress_shows_a_blocked_workers_work_apart_and_counts_no_task_done_with_it(
    client, live, fake_mturk, admin, researcher
):
    """The project page and its API counted a blocked worker's work as submitted and its task
    as done, though that work counts in no result, and nothing said "blocked". A task is done
    once its assignments count in results; a blocked worker's work has a column of its own."""
    from rest_framework.test import APIClient

    first, _ = _hits(live)
    project = first.task.batch.project
    project.researchers.add(researcher)
    api = APIClient()
    api.force_login(researcher)
    url = reverse("annotate-api:project-progress", args=[project.id])
    kept, _ = do_task(client, fake_mturk, first, "AKEPT", "yes")
    spammer, _ = do_task(client, fake_mturk, first, "ASPAM", "no")
    assert api.get(url).json()["tasks_done"] == 0  # MTurk has not confirmed them yet
    _sync(live)
    assert api.get(url).json()["tasks_done"] == 1

    review.worker_block(annotator_id=spammer.annotator_id, reason="spam", user=admin)
    progress = api.get(url).json()
    assert (progress["tasks_done"], progress["assignments_submitted"]) == (0, 1)
    assert progress["assignments_blocked"] == 1
    rows = {row["annotator"]: row for row in progress["per_annotator"]}
    columns = ("worker_blocked", "submitted", "blocked", "late", "unconfirmed", "rejected")
    assert {k: rows["mturk:ASPAM"][k] for k in columns} == {
        "worker_blocked": True, "submitted": 0, "blocked": 1, "late": 0, "unconfirmed": 0,
        "rejected": 0,
    }  # fmt: skip
    assert (rows["mturk:AKEPT"]["worker_blocked"], rows["mturk:AKEPT"]["blocked"]) == (False, 0)
    client.force_login(researcher)
    page = client.get(reverse("work:project-detail", args=[project.id])).text
    assert '<strong id="tasks-done">0 / 2</strong>' in page
    assert "1 submitted, 0 in progress, 0 late (kept, not counted), 1 by blocked workers" in page
    # Annotator | Submitted | In progress | Late | Unconfirmed | Rejected | Blocked (not counted)
    assert (
        "<td>mturk:ASPAM <strong>(blocked)</strong></td>"
        "<td>0</td><td>0</td><td>0</td><td>0</td><td>0</td><td>1</td>"
    ) in page

    review.worker_unblock(annotator_id=spammer.annotator_id, user=admin)
    assert api.get(url).json()["tasks_done"] == 1  # the work counts again


def test_the_annotators_page_counts_as_tasks_done_only_work_that_counts_in_results(
    client, live, fake_mturk, admin, researcher
):
    """The Annotators page's "Tasks done" (and time per task) counted every submitted
    assignment: a blocked worker's, MTurk work never confirmed, and (while in review) rejected
    work, though none of it counts in a result. It follows the progress page's rule now."""
    first, _ = _hits(live)
    project = first.task.batch.project
    project.researchers.add(researcher)
    client.force_login(researcher)

    def tasks_done() -> dict[str, tuple[int, bool]]:
        rows = client.get(reverse("annotators:list")).context["rows"]
        return {
            row.annotator.worker_id: (row.tasks_done, row.seconds_per_task is not None)
            for row in rows
            if row.project == project
        }

    kept, _ = do_task(client, fake_mturk, first, "AKEPT", "yes")
    spammer, _ = do_task(client, fake_mturk, first, "ASPAM", "no")
    assert tasks_done() == {"AKEPT": (0, False), "ASPAM": (0, False)}  # MTurk has not confirmed
    _sync(live)
    assert tasks_done() == {"AKEPT": (1, True), "ASPAM": (1, True)}

    review.worker_block(annotator_id=spammer.annotator_id, reason="spam", user=admin)
    assert tasks_done() == {"AKEPT": (1, True), "ASPAM": (0, False)}
    page = client.get(reverse("annotators:list")).text
    assert "Tasks done and time per task are over the assignments that count in results" in page
    review.worker_unblock(annotator_id=spammer.annotator_id, user=admin)
    assert tasks_done() == {"AKEPT": (1, True), "ASPAM": (1, True)}

    review.assignment_reject(assignment_id=spammer.pk, user=admin, feedback="copied")
    assert tasks_done() == {"AKEPT": (1, True), "ASPAM": (0, False)}


def test_one_address_cannot_hold_many_forged_claims_on_a_hit(client, live, fake_mturk, settings):
    """Made-up worker and assignment ids on the ExternalQuestion page each claimed a task and
    held its slot (for in-house annotators and a self-hosted link) until it lapsed, as fast as
    the page limit (300 a minute) let one address: now its open claims are bounded, and a real
    worker elsewhere, accepted on the platform, still gets the task."""
    settings.CROWD_OPEN_CLAIMS_PER_ADDRESS = 2
    first, second = _hits(live)
    assert _open(client, fake_mturk, first, "AFAKE1", "FORGED1").status_code == 302
    assert _open(client, fake_mturk, second, "AFAKE1", "FORGED2").status_code == 302
    refused = _open(client, fake_mturk, first, "AFAKE2", "FORGED3")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "Too many open tasks from your address (at most 2 at a time)" in refused.text
    assert not Assignment.objects.filter(platform_assignment_id="FORGED3").exists()
    # A reload of an open claim is no new claim.
    assert _open(client, fake_mturk, first, "AFAKE1", "FORGED1").status_code == 302
    honest = Client(REMOTE_ADDR="198.51.100.4")
    assignment_id = fake_mturk.api.worker_accept(first.hit_id, "AHONEST")
    assert _open(honest, fake_mturk, first, "AHONEST", assignment_id).status_code == 302


def test_an_accept_refused_on_the_way_leaves_no_worker_record(client, live, fake_mturk, settings):
    """An accept the address's open-claims limit refused (no assignment made) still made the
    worker's record, which the annotators page then listed as a worker with no work: the
    record and the claim are made together now, or neither. A closed batch's refusal too."""
    from annotate.models import Annotator

    settings.CROWD_OPEN_CLAIMS_PER_ADDRESS = 1
    first, second = _hits(live)
    assert _open(client, fake_mturk, first, "AFAKE1", "FORGED1").status_code == 302
    refused = _open(client, fake_mturk, second, "AFAKE2", "FORGED2")
    assert refused.status_code == 429
    assert not Annotator.objects.filter(worker_id="AFAKE2").exists()
    admin = UserFactory(username="annotators-admin", roles=[ADMIN], is_staff=True)
    page = Client()
    page.force_login(admin)
    listed = page.get(reverse("annotators:list")).text
    assert "mturk:AFAKE1" in listed and "mturk:AFAKE2" not in listed

    live.batch.active = False
    live.batch.save()
    closed = _open(
        Client(REMOTE_ADDR="198.51.100.9"), fake_mturk, second, "ALATE", "ALATEASSIGNMENT"
    )
    assert closed.status_code == 410
    assert not Annotator.objects.filter(worker_id="ALATE").exists()
    # A refused worker who comes back when the limit allows is made then, as anyone is.
    live.batch.active = True
    live.batch.save()
    Assignment.objects.filter(platform_assignment_id="FORGED1").update(
        status=AssignmentStatus.RETURNED
    )
    assert _open(client, fake_mturk, second, "AFAKE2", "FORGED2").status_code == 302
    assert Annotator.objects.filter(worker_id="AFAKE2").count() == 1


def test_a_lapsed_claim_is_not_taken_up_again_in_a_closed_batch(client, live, fake_mturk):
    """The worker's new accept took a lapsed claim up again with a fresh time, so a batch
    deactivated since took their answers (counted once confirmed): it is refused instead, and
    the task page of the lapsed claim says the batch is closed."""
    from datetime import timedelta

    from annotate.services.assignments import assignments_expire

    hit = _hits(live)[0]
    first = fake_mturk.api.worker_accept(hit.hit_id, "AWORKER1")
    opened = _open(client, fake_mturk, hit, "AWORKER1", first)
    claim = Assignment.objects.get(platform_assignment_id=first)
    assert assignments_expire(now=claim.expires_at + timedelta(seconds=1)) == 1
    live.batch.active = False
    live.batch.save()
    fake_mturk.api.worker_return(first)  # MTurk let the lapsed assignment go; a new accept
    again = fake_mturk.api.worker_accept(hit.hit_id, "AWORKER1")
    refused = _open(Client(), fake_mturk, hit, "AWORKER1", again)
    assert refused.status_code == 410 and "Please return the HIT" in refused.text
    claim.refresh_from_db()
    assert claim.status == AssignmentStatus.EXPIRED and claim.platform_assignment_id == first
    page = client.get(opened["Location"]).text
    assert 'id="batch-closed"' in page and "please return the HIT" in page


def test_a_new_accept_in_a_closed_batch_claims_nothing(client, live, fake_mturk):
    """A HIT still open on MTurk after the admin deactivated its batch: a worker's new accept
    made a claim and took answers there. It is refused (return the HIT), nothing claimed, and a
    claim made before the batch closed can still be opened and finished."""
    first, second = _hits(live)
    before = fake_mturk.api.worker_accept(first.hit_id, "AEARLY")
    assert _open(client, fake_mturk, first, "AEARLY", before).status_code == 302
    live.batch.active = False
    live.batch.save()
    accepted = fake_mturk.api.worker_accept(second.hit_id, "ALATE")
    refused = _open(Client(), fake_mturk, second, "ALATE", accepted)
    assert refused.status_code == 410
    assert "This batch is closed: it takes no new workers. Please return the HIT." in refused.text
    assert not Assignment.objects.filter(platform_assignment_id=accepted).exists()
    assert _open(client, fake_mturk, first, "AEARLY", before).status_code == 302


def test_an_addresss_claiming_requests_take_turns(client, live, fake_mturk, settings, monkeypatch):
    """Forged opens sent at once all passed the open-claims check before any was recorded, and
    each wrote its own list of the address's claims over the others': a burst held far more
    than the limit. They take turns from the check to the record now: one that cannot get its
    turn in time is refused (429) and claims nothing."""
    from django.core.cache import cache
    from django.utils import timezone

    from annotate.crowd.services import addresses

    settings.CROWD_OPEN_CLAIMS_PER_ADDRESS = 2
    monkeypatch.setattr(addresses, "TURN_WAIT_SECONDS", 0.2)
    first, _ = _hits(live)
    turn = addresses.AddressClaims(address="127.0.0.1", now=timezone.now()).key + ":turn"
    assert cache.add(turn, True, timeout=30)  # another request of this address is claiming
    busy = _open(client, fake_mturk, first, "AFAKE1", "FORGED1")
    assert busy.status_code == 429 and "Too many requests at once from your address" in busy.text
    assert not Assignment.objects.filter(platform_assignment_id="FORGED1").exists()
    cache.delete(turn)  # its turn over
    assert _open(client, fake_mturk, first, "AFAKE1", "FORGED1").status_code == 302
    assert cache.get(turn) is None  # each request gives its turn back


def test_a_claim_handed_back_unworked_is_not_moved_to_an_invented_assignment_id(
    client, live, fake_mturk
):
    """W accepts A1, opens our page and hands A1 back to MTurk without working here; a sync
    links A1's record to the claim. Opened again from the same browser under an id MTurk never
    issued, the claim moved to it and kept A1's confirmation: its work counted under the
    invented id until a later sync unlinked it (or never, once the HIT was no longer listed)."""
    first, _ = _hits(live)
    a1 = fake_mturk.api.worker_accept(first.hit_id, "AW1")
    assert _open(client, fake_mturk, first, "AW1", a1).status_code == 302
    _hand_back(fake_mturk, a1, expect=200)
    _sync(live)
    claim = Assignment.objects.get(annotator__worker_id="AW1")
    assert claim.platform_record.platform_assignment_id == a1

    refused = _open(client, fake_mturk, first, "AW1", "INVENTEDID")
    assert refused.status_code == 409
    assert "already handed back to the platform" in refused.text
    claim.refresh_from_db()
    assert claim.platform_assignment_id == a1


# --- Admin edits ------------------------------------------------------------------------------


def _superuser(admin_user):
    admin_user.is_superuser = True  # the `admin` role's users are staff without permissions
    admin_user.save()
    return admin_user


def test_the_admin_cannot_make_a_forgers_work_count_by_changing_its_assignment(
    client, live, fake_mturk, admin_user
):
    """A forged assignment counts nowhere: its platform never confirmed it. Moved to an in-house
    annotator (or marked approved, or not late) on the admin's change page, it needed no
    confirmation, and its labels — still the forger's — voted in the crowd majority. An
    assignment is a record of what a worker did: the admin shows it, and changes nothing."""
    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    do_task(client, fake_mturk, first, "AREAL1", "yes")
    forged, _ = do_task(client, fake_mturk, first, "AFAKE1", "no", forged=True)
    _sync(live)
    expected = {s: (2, 2) for s in report_build(scope=OPERATOR, benchmark=benchmark)["systems"]}
    assert _crowd_rows(report_build(scope=OPERATOR, benchmark=benchmark)) == expected
    in_house = Annotator.objects.create(name="in-house", kind="expert")
    fake_worker = forged.annotator_id
    admin = Client()
    admin.force_login(_superuser(admin_user))

    url = f"/admin/annotate/assignment/{forged.pk}/change/"
    form = {
        "task": forged.task_id, "annotator": in_house.pk, "status": AssignmentStatus.APPROVED,
        "claimed_at_0": "2026-01-01", "claimed_at_1": "00:00:00",
        "expires_at_0": "2030-01-01", "expires_at_1": "00:00:00",
        "submitted_at_0": "2026-01-01", "submitted_at_1": "00:10:00",
        "order_seed": 1, "display_order": json.dumps(forged.display_order), "active_seconds": 99999,
        "submission": "null", "direct_scores": "null",
        "platform_assignment_id": "", "platform_hit_id": "",
    }  # fmt: skip
    admin.post(url, form)

    assert _crowd_rows(report_build(scope=OPERATOR, benchmark=benchmark)) == expected
    assert {r["label"] for r in _aggregated(benchmark)} == {"YES"}
    forged.refresh_from_db()
    assert (forged.annotator_id, forged.status) == (fake_worker, AssignmentStatus.SUBMITTED)
    assert forged.is_late
    assert 'name="status"' not in admin.get(url).text


def test_the_admin_cannot_make_a_forgers_work_count_by_changing_the_forgers_platform(
    client, live, fake_mturk, admin_user
):
    """Whether work needs its platform's confirmation is the worker's platform: a forger's
    platform emptied on the admin's change page made the forged assignment count at once, and
    for good, as no later sync of the publication looked at it again (it releases only its own
    platform's work). A worker's platform and id are what came through the platform: shown,
    not edited."""
    first, _ = _hits(live)
    benchmark = first.task.instruction.benchmark
    do_task(client, fake_mturk, first, "AREAL1", "yes")
    forged, _ = do_task(client, fake_mturk, first, "AFAKE1", "no", forged=True)
    # A sync within the hand-back grace: the real work is confirmed, the forged keeps its slot.
    review.publication_sync(publication_id=live.pk, now=timezone.now())
    expected = _crowd_rows(report_build(scope=OPERATOR, benchmark=benchmark))
    assert set(expected.values()) == {(2, 2)}
    admin = Client()
    admin.force_login(_superuser(admin_user))

    url = f"/admin/annotate/annotator/{forged.annotator_id}/change/"
    form = {"name": "mturk:AFAKE1", "kind": "crowd", "platform": "", "worker_id": "AFAKE1"}
    assert admin.post(url, {**form, "judge_config": "", "user": ""}).status_code == 302
    _sync(live)

    assert _crowd_rows(report_build(scope=OPERATOR, benchmark=benchmark)) == expected
    assert {r["label"] for r in _aggregated(benchmark)} == {"YES"}
    forged.annotator.refresh_from_db()
    assert forged.annotator.platform == "mturk"
    assert 'name="platform"' not in admin.get(url).text


def test_the_project_csv_says_late_work_submitted_while_it_streams_is_late(
    client, live, fake_mturk, admin
):
    """The project's label CSV streams line by line and reads the work's statuses when it
    starts: a worker whose claim lapsed, submitting once two others filled the task while it
    streamed (late, counted nowhere), had their answers written as late with the status of a
    claim ("not submitted"). The late answers are read with their status."""
    first, _ = _hits(live)
    # MTurk still holds the lapsed worker's assignment (its own duration is longer).
    fake_mturk.state.hits[first.hit_id]["MaxAssignments"] = 3
    assignment_id = fake_mturk.api.worker_accept(first.hit_id, "ALATE")
    opened = _open(client, fake_mturk, first, "ALATE", assignment_id)
    page = opened["Location"]
    names = set(re.findall(r'name="(r\d+_q\d+)"', client.get(page).text))
    Assignment.objects.filter(platform_assignment_id=assignment_id).update(
        expires_at=timezone.now() - timezone.timedelta(minutes=1)
    )
    do_task(Client(), fake_mturk, first, "AREAL1", "yes")
    do_task(Client(), fake_mturk, first, "AREAL2", "yes")
    _sync(live)
    researcher = Client()
    researcher.force_login(admin)
    download = researcher.get(f"/api/annotate/projects/{live.batch.project_id}/labels/")
    assert download.status_code == 200
    lines = iter(download.streaming_content)
    started = [next(lines), next(lines)]  # the header and the first label: statuses read

    assert client.post(page, {name: "no" for name in names}).status_code == 200
    late = Assignment.objects.get(platform_assignment_id=assignment_id)
    assert (late.status, late.is_late) == (AssignmentStatus.EXPIRED, True)

    text = b"".join([*started, *lines]).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    late_rows = [r for r in rows if r["annotator"] == "mturk:ALATE"]
    assert len(late_rows) == 4 and {r["late"] for r in late_rows} == {"1"}
    assert {r["work_status"] for r in late_rows} == {"late"}
    assert {r["work_status"] for r in rows if r["late"] == "0"} == {"counted"}


def _claim_and_submit_later(project, *, phases):
    """An in-house annotator's claim of the project's next task, and the call that submits it
    on time (each phase's answers in turn) when the test says so."""
    from annotate.services.assignments import assignment_claim_next
    from annotate.services.submissions import assignment_submit
    from tests.factories import AnnotatorFactory

    claim = assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=timezone.now())
    fields = {
        "scores": lambda n: {f"r{n}_score": "4"},
        "labels": lambda n: {f"r{n}_q1": "yes"},
    }

    def submit():
        for phase in phases:
            answers = {}
            for n in range(1, len(claim.display_order) + 1):
                answers.update(fields[phase](n))
            assignment_submit(
                assignment_id=claim.pk, annotator=claim.annotator, answers=answers,
                now=timezone.now(),
            )  # fmt: skip

    return claim, submit


def test_the_project_csv_says_work_submitted_on_time_while_it_streams_is_counted():
    """The project's label CSV reads the work's statuses when it starts: a claim then ("not
    submitted") submitted on time while the file streamed had its answers written as not
    submitted (and a label import of the file dropped them). An answer is submitted work:
    its status is asked again."""
    from annotate.models import ProjectMode
    from annotate.selectors.work import project_label_rows

    project = project_with_tasks(
        instructions=1, systems=2, questions=1, mode=ProjectMode.BOTH, assignments_per_task=2
    )
    done, submit_done = _claim_and_submit_later(project, phases=["scores", "labels"])
    submit_done()
    claim, submit = _claim_and_submit_later(project, phases=["scores", "labels"])
    rows = project_label_rows(project=project)
    header, first = next(rows), next(rows)  # the statuses are read: the claim is one
    assert dict(zip(header, first, strict=True))["assignment_id"] == done.pk

    submit()
    claim.refresh_from_db()
    assert claim.status == AssignmentStatus.SUBMITTED and not claim.is_late
    rest = [dict(zip(header, row, strict=True)) for row in rows]
    theirs = [r for r in rest if r["assignment_id"] == claim.pk]
    assert [r["kind"] for r in theirs] == ["score", "score"]  # streamed after it submitted
    assert {r["work_status"] for r in rest} == {"counted"}


def test_the_project_csv_asks_the_status_of_work_it_had_not_seen_when_it_started():
    """A direct score of work submitted while the project's CSV streamed (an MTurk worker's,
    which its platform has not confirmed) was written as "counted", the default for work
    whose status the file had not read. It is asked for then, as the benchmark's raw export
    asks it."""
    from annotate.models import AnnotatorKind, DirectScore
    from annotate.selectors.work import project_label_rows
    from tests.factories import AnnotatorFactory, LabelFactory

    project = project_with_tasks(instructions=1, systems=2, questions=1)
    task = project.batches.get().tasks.get()
    response = task.instruction.responses.first()
    in_house = AssignmentFactory(
        task=task, annotator=AnnotatorFactory(kind=AnnotatorKind.EXPERT),
        status=AssignmentStatus.SUBMITTED, submitted_at=timezone.now(),
    )  # fmt: skip
    LabelFactory(
        assignment=in_house, annotator=in_house.annotator, response=response,
        question=task.instruction.questions.get(),
    )  # fmt: skip
    rows = project_label_rows(project=project)
    header, first = next(rows), next(rows)  # the statuses are read
    assert dict(zip(header, first, strict=True))["work_status"] == "counted"

    worker = AnnotatorFactory(kind=AnnotatorKind.CROWD, platform="mturk", worker_id="ANEW")
    unconfirmed = AssignmentFactory(
        task=task, annotator=worker, status=AssignmentStatus.SUBMITTED,
        submitted_at=timezone.now(), platform_assignment_id="X1", platform_hit_id="H1",
    )  # fmt: skip
    DirectScore.objects.create(response=response, annotator=worker, assignment=unconfirmed, score=5)
    rest = [dict(zip(header, row, strict=True)) for row in rows]
    assert [(r["annotator"], r["work_status"]) for r in rest] == [
        (worker.name, "not confirmed by the platform")
    ]
