"""MTurk's requester sandbox: its workers are test accounts nobody pays. A publication records
whether it was made there; its work counts in no result and costs nothing, even after the site
goes live; and a publication is refused work through the other endpoint."""

import csv
import io
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd import tasks
from annotate.crowd.models import HitStatus, PlatformCall, Publication, WorkerBlock
from annotate.crowd.selectors import publication_spending
from annotate.crowd.services import publishing, review
from annotate.crowd.services.publishing import PublishSettings
from annotate.errors import ConflictError
from annotate.models import AssignmentStatus
from annotate.roles import ADMIN
from annotate.selectors.results import WorkStatus, counted_assignments, work_statuses
from annotate.selectors.work import project_progress
from annotate.services.exports import labels_export
from evaluation.selectors.report_costs import source_costs
from evaluation.selectors.report_data import benchmark_arrays
from tests.annotate.crowd.conftest import (
    crowd_assignment,
    published_on_fake,
    submitted_on_fake_platform,
)
from tests.annotate.crowd.test_counted_work import _sync, do_task
from tests.factories import UserFactory, project_with_tasks

pytestmark = pytest.mark.django_db
CROWD = "crowd-majority"
SANDBOX_NOTICE = "Sandbox: test work, counts nowhere, nothing paid."


@pytest.fixture
def admin(db):
    return UserFactory(username="crowd-admin", roles=[ADMIN])


def _published(platform_name: str = "mturk"):
    """A project of two instructions × two systems × two questions, two assignments per task,
    published on `platform_name` as MTURK_SANDBOX says now."""
    project = project_with_tasks(instructions=2, systems=2, questions=2, assignments_per_task=2)
    publication = publishing.publication_create(
        batch=project.batches.get(),
        platform_name=platform_name,
        chosen=PublishSettings(title="t", description="d"),
        base_url="https://annotate.example.org",
    )
    return publishing.publication_publish(publication_id=publication.pk, now=timezone.now())


@pytest.fixture
def on_sandbox(mturk_settings, fake_mturk):
    """A publication made while MTURK_SANDBOX=true (the fake server standing for the sandbox)."""
    mturk_settings.MTURK_SANDBOX = True
    return _published()


def _first_hit(publication):
    return publication.hits.select_related("task__instruction__benchmark").order_by("id").first()


def _raw_statuses(benchmark) -> set[str]:
    output = io.StringIO()
    labels_export(benchmark_name=benchmark.name, output=output, file_format="csv")
    return {row["work_status"] for row in csv.DictReader(io.StringIO(output.getvalue()))}


def test_a_publication_records_whether_it_was_made_on_the_sandbox(mturk_settings, fake_mturk):
    mturk_settings.MTURK_SANDBOX = True
    made_on_sandbox = _published()
    mturk_settings.MTURK_SANDBOX = False
    made_on_production = _published()
    assert (made_on_sandbox.sandbox, made_on_production.sandbox) == (True, False)
    # The offline demo platform and a self-hosted link are no sandbox, whatever MTURK_SANDBOX.
    mturk_settings.MTURK_SANDBOX = True
    mturk_settings.CROWD_BACKEND = "fake"
    assert _published("fake").sandbox is False
    assert _published("selfhosted").sandbox is False


@pytest.mark.parametrize("sandbox", [True, False])
def test_sandbox_work_counts_in_no_result_and_costs_nothing_even_after_going_live(
    client, mturk_settings, fake_mturk, admin, sandbox
):
    """The same work on a production publication counts and is paid (the control)."""
    mturk_settings.MTURK_SANDBOX = sandbox
    publication = _published()
    hit = _first_hit(publication)
    benchmark = hit.task.instruction.benchmark
    approved, _ = do_task(client, fake_mturk, hit, "ATESTER1", "yes")
    waiting, _ = do_task(client, fake_mturk, hit, "ATESTER2", "no")
    _sync(publication)
    review.assignment_approve(assignment_id=approved.pk, user=admin)
    # An approved assignment of a worker blocked since was paid on production (_spent_q).
    review.worker_block(annotator_id=approved.annotator_id, reason="test", user=admin)

    def seen() -> tuple:
        costs = source_costs(benchmark=benchmark)["overall"]
        return (
            set(counted_assignments().values_list("id", flat=True)),
            benchmark_arrays(benchmark=benchmark).annotator_names,
            round(costs[CROWD].cost_usd, 2) if CROWD in costs else None,
            publication_spending(publication=publication).total_usd,
            set(work_statuses(benchmark=benchmark).values()),
            _raw_statuses(benchmark),
        )

    before = seen()
    mturk_settings.MTURK_SANDBOX = False  # the site goes live
    after = seen()
    if sandbox:
        assert (
            before
            == after
            == (
                set(),
                [],
                None,
                Decimal("0.00"),
                {WorkStatus.SANDBOX, WorkStatus.BLOCKED},
                {WorkStatus.SANDBOX, WorkStatus.BLOCKED},
            )
        )
    else:
        # $1.00 per assignment with MTurk's 20% fee (HIT of 2): the approved one, blocked since,
        # was paid, the waiting one will be; only the unblocked worker's counts in results.
        assert (
            before
            == after
            == (
                {waiting.pk},
                ["mturk:ATESTER2"],
                2.4,
                Decimal("2.40"),
                {WorkStatus.COUNTED, WorkStatus.BLOCKED},
                {WorkStatus.COUNTED, WorkStatus.BLOCKED},
            )
        )


def test_a_sandbox_publication_is_refused_sync_verdicts_and_expiry_on_production(
    client, on_sandbox, fake_mturk, mturk_settings, admin
):
    hit = _first_hit(on_sandbox)
    work, _ = do_task(client, fake_mturk, hit, "ATESTER1", "yes")
    _sync(on_sandbox)
    mturk_settings.MTURK_SANDBOX = False
    calls = PlatformCall.objects.count()
    refusals = [
        lambda: _sync(on_sandbox),
        lambda: review.assignment_approve(assignment_id=work.pk, user=admin),
        lambda: review.assignment_reject(assignment_id=work.pk, user=admin, feedback="x"),
        lambda: review.publication_expire(
            publication_id=on_sandbox.pk, now=timezone.now(), user=admin
        ),
        lambda: review.hit_set_expiration(hit_pk=hit.pk, expires_at=timezone.now(), user=admin),
    ]
    for refused in refusals:
        with pytest.raises(ConflictError) as error:
            refused()
        assert "made on the MTurk sandbox" in str(error.value)
        assert "MTURK_SANDBOX=true" in str(error.value)
    work.refresh_from_db()
    on_sandbox.refresh_from_db()
    assert (work.status, on_sandbox.expired_at) == (AssignmentStatus.SUBMITTED, None)
    assert PlatformCall.objects.count() == calls  # nothing was sent to production
    assert fake_mturk.state.assignments[work.platform_assignment_id]["AssignmentStatus"] == (
        "Submitted"
    )
    # The beat's sync leaves it alone instead of failing on it every time.
    assert tasks.sync_all_publications.apply().get() == 0
    mturk_settings.MTURK_SANDBOX = True  # back on the sandbox: it works on it again
    assert tasks.sync_all_publications.apply().get() == 1
    review.assignment_approve(assignment_id=work.pk, user=admin)


def test_a_production_publication_is_refused_on_the_sandbox(
    client, mturk_settings, fake_mturk, admin
):
    mturk_settings.MTURK_SANDBOX = False
    publication = _published()
    mturk_settings.MTURK_SANDBOX = True
    with pytest.raises(ConflictError, match="made on the MTurk production .* MTURK_SANDBOX=false"):
        _sync(publication)
    with pytest.raises(ConflictError, match="MTURK_SANDBOX=false"):
        review.publication_expire(publication_id=publication.pk, now=timezone.now(), user=admin)


def test_a_worker_known_only_from_the_sandbox_is_blocked_and_messaged_there_not_on_production(
    client, on_sandbox, fake_mturk, mturk_settings, admin
):
    """Block, unblock and notify went to the endpoint MTURK_SANDBOX named now: once live, a
    sandbox tester's block went to production, where it blocked nobody we had worked with."""
    work, _ = do_task(client, fake_mturk, _first_hit(on_sandbox), "ATESTER1", "yes")
    mturk_settings.MTURK_SANDBOX = False  # the site goes live
    calls = PlatformCall.objects.count()
    refusals = [
        lambda: review.worker_block(annotator_id=work.annotator_id, reason="spam", user=admin),
        lambda: review.worker_unblock(annotator_id=work.annotator_id, user=admin),
        lambda: review.workers_notify(
            annotator_ids=[work.annotator_id], subject="s", message="m", user=admin
        ),
    ]
    for refused in refusals:
        with pytest.raises(ConflictError) as error:
            refused()
        assert "Worker ATESTER1 is known only from test work on the MTurk sandbox" in str(
            error.value
        )
        assert "Set MTURK_SANDBOX=true" in str(error.value)
    assert PlatformCall.objects.count() == calls  # nothing was sent to production
    assert not WorkerBlock.objects.exists()
    assert (fake_mturk.state.blocks, fake_mturk.state.notifications) == ({}, [])

    mturk_settings.MTURK_SANDBOX = True  # on the sandbox: blocked there
    review.worker_block(annotator_id=work.annotator_id, reason="spam", user=admin)
    assert fake_mturk.state.blocks == {"ATESTER1": "spam"}
    assert WorkerBlock.objects.get().active


def test_a_real_worker_is_blocked_on_production_and_a_message_to_both_kinds_is_refused(
    client, on_sandbox, fake_mturk, mturk_settings, admin
):
    """A worker with production work is blocked there, whatever they tested on the sandbox; a
    message to sandbox testers and real workers at once cannot reach both endpoints."""
    tester, _ = do_task(client, fake_mturk, _first_hit(on_sandbox), "ATESTER1", "yes")
    both, _ = do_task(client, fake_mturk, _first_hit(on_sandbox), "AREAL1", "yes")
    mturk_settings.MTURK_SANDBOX = False
    live = _published()
    real, _ = do_task(client, fake_mturk, _first_hit(live), "AREAL1", "no")
    assert real.annotator_id == both.annotator_id
    mturk_settings.MTURK_SANDBOX = True  # back on the sandbox
    with pytest.raises(ConflictError, match="Worker AREAL1 is known from work on the MTurk "
                       "production.*Set MTURK_SANDBOX=false"):  # fmt: skip
        review.worker_block(annotator_id=real.annotator_id, reason="spam", user=admin)
    assert fake_mturk.state.blocks == {} and not WorkerBlock.objects.exists()
    mturk_settings.MTURK_SANDBOX = False
    review.worker_block(annotator_id=real.annotator_id, reason="spam", user=admin)
    assert fake_mturk.state.blocks == {"AREAL1": "spam"}
    with pytest.raises(ConflictError, match=r"test work on the MTurk sandbox \(ATESTER1\), "
                       r"the others from work on MTurk production \(AREAL1\)"):  # fmt: skip
        review.workers_notify(
            annotator_ids=[tester.annotator_id, real.annotator_id],
            subject="s",
            message="m",
            user=admin,
        )
    assert fake_mturk.state.notifications == []


def test_the_pages_and_the_api_say_a_sandbox_publication_is_test_work(
    client, on_sandbox, mturk_settings, admin
):
    client.force_login(admin)
    pages = [
        reverse("crowd:publication", args=[on_sandbox.pk]),
        reverse("crowd:review", args=[on_sandbox.pk]),
        reverse("crowd:publication-list"),
    ]
    for url in pages[:2]:
        assert SANDBOX_NOTICE in client.get(url).text
    assert "sandbox: test work, counts nowhere, nothing paid" in client.get(pages[2]).text
    api = client.get(reverse("crowd-api:publication", args=[on_sandbox.pk]))
    assert api.json()["sandbox"] is True
    mturk_settings.MTURK_SANDBOX = False
    # A HIT missing: Resume is not offered (its quote would ask production), the page says why.
    on_sandbox.hits.filter(pk=_first_hit(on_sandbox).pk).update(status=HitStatus.FAILED)
    page = client.get(pages[0])
    assert page.status_code == 200 and 'id="resume"' not in page.text
    assert SANDBOX_NOTICE in page.text and "refused until MTURK_SANDBOX=true" in page.text
    Publication.objects.filter(pk=on_sandbox.pk).update(sandbox=False)  # a production one
    for url in pages:
        assert "counts nowhere, nothing paid" not in client.get(url).text


def test_the_progress_pages_mark_sandbox_work_as_test_work_not_as_work_submitted(
    client, on_sandbox, fake_mturk, mturk_settings, admin
):
    """The project's progress counted the sandbox's test work as "submitted", as real work, and
    the publication's pages showed it as real work submitted: before a sync and after it."""
    hit = _first_hit(on_sandbox)
    project = hit.task.batch.project
    work, _ = do_task(client, fake_mturk, hit, "ATESTER1", "yes")
    client.force_login(admin)
    project_url = reverse("work:project-detail", args=[project.pk])
    api_url = reverse("annotate-api:project-progress", args=[project.pk])
    for synced in (False, True):
        if synced:
            _sync(on_sandbox)
        page = client.get(project_url).text
        assert "0 submitted," in page
        assert '<strong id="assignments-sandbox">1 sandbox test work</strong>' in page
        assert "counts nowhere, nothing paid" in page
        row = client.get(api_url).json()
        assert (row["assignments_submitted"], row["assignments_sandbox"]) == (0, 1)
        assert [(r["annotator"], r["submitted"], r["sandbox"]) for r in row["per_annotator"]] == [
            ("mturk:ATESTER1", 0, 1)
        ]
    review_page = client.get(reverse("crowd:review", args=[on_sandbox.pk])).text
    assert '<strong class="sandbox-work">Sandbox test work</strong>' in review_page
    detail = client.get(reverse("crowd:publication", args=[on_sandbox.pk])).text
    assert "Sandbox test workers here (submitted / took / asked)" in detail
    # Real work is no test work (the control).
    Publication.objects.filter(pk=on_sandbox.pk).update(sandbox=False)
    row = client.get(api_url).json()
    assert (row["assignments_submitted"], row["assignments_sandbox"]) == (1, 0)
    assert "sandbox test work" not in client.get(project_url).text
    assert "Sandbox test work" not in client.get(reverse("crowd:review", args=[on_sandbox.pk])).text


def test_the_offline_demo_platform_is_no_sandbox_its_work_counts_and_is_paid(settings, crowd_batch):
    settings.MTURK_SANDBOX = True
    publication = published_on_fake(crowd_batch)
    task = crowd_batch.tasks.order_by("position").first()
    work = submitted_on_fake_platform(
        crowd_assignment(task=task, platform="fake", worker="W1"), publication=publication
    )
    review.publication_sync(publication_id=publication.pk, now=timezone.now(), user=UserFactory())
    assert set(counted_assignments().values_list("id", flat=True)) == {work.pk}
    assert publication_spending(publication=publication).total_usd > 0


def _raw_status_of(benchmark) -> dict[str, set[str]]:
    """The raw export's work_status of each worker's rows, by annotator name."""
    output = io.StringIO()
    labels_export(benchmark_name=benchmark.name, output=output, file_format="csv")
    statuses: dict[str, set[str]] = {}
    for row in csv.DictReader(io.StringIO(output.getvalue())):
        statuses.setdefault(row["annotator"], set()).add(row["work_status"])
    return statuses


def test_the_raw_export_names_sandbox_work_test_work_before_a_sync_as_the_progress_does(
    client, on_sandbox, fake_mturk, admin
):
    """The raw export read the sandbox from the platform's record only, the progress from the
    HIT the work was done through: before a sync, the export called a sandbox tester's work
    "not confirmed by the platform" (as if a confirmation would count it) and a forged
    assignment on a sandbox HIT, rejected here, "rejected", while the progress called both
    test work. One rule now: test work in both, before a sync and after it."""
    hit = _first_hit(on_sandbox)
    benchmark, project = hit.task.instruction.benchmark, hit.task.batch.project
    waiting, _ = do_task(client, fake_mturk, hit, "ATESTER1", "yes")
    forged, _ = do_task(client, fake_mturk, hit, "AFORGER1", "no", forged=True)
    review.assignment_reject(assignment_id=forged.pk, user=admin, feedback="forged")
    expected = {"mturk:ATESTER1": {WorkStatus.SANDBOX}, "mturk:AFORGER1": {WorkStatus.SANDBOX}}
    assert _raw_status_of(benchmark) == expected
    assert work_statuses(benchmark=benchmark) == {
        waiting.pk: WorkStatus.SANDBOX,
        forged.pk: WorkStatus.SANDBOX,
    }
    progress = project_progress(project=project, now=timezone.now())
    assert (progress.assignments_sandbox, progress.assignments_rejected) == (2, 0)
    _sync(on_sandbox)
    assert _raw_status_of(benchmark) == expected
    assert not counted_assignments().exists()


def test_an_empty_hit_id_is_no_sandbox_hit(client, on_sandbox, fake_mturk, admin):
    """Work that stores no HIT id (in-house work of a worker who came through MTurk, whom an
    admin gave an account) matched every sandbox HIT not created yet (pending, or refused by
    the platform: its id is empty too): the project's progress and its API counted real
    submitted work as sandbox test work. The raw export and the endpoint of a block read it
    as the work of no HIT, as they do now."""
    hit = _first_hit(on_sandbox)
    project = hit.task.batch.project
    other_task = project.batches.get().tasks.exclude(pk=hit.task_id).order_by("id").first()
    in_house = crowd_assignment(task=other_task, worker="AREAL9")
    assert (in_house.platform_hit_id, in_house.status) == ("", AssignmentStatus.SUBMITTED)
    on_sandbox.hits.exclude(pk=hit.pk).update(status=HitStatus.FAILED, hit_id="")
    client.force_login(admin)
    row = client.get(reverse("annotate-api:project-progress", args=[project.pk])).json()
    assert (row["assignments_submitted"], row["assignments_sandbox"]) == (1, 0)
    statuses = work_statuses(benchmark=hit.task.instruction.benchmark)
    assert statuses[in_house.pk] == WorkStatus.UNCONFIRMED  # needs MTurk's confirmation
    assert review.workers_on_sandbox(annotator_ids=[in_house.annotator_id]) == {
        in_house.annotator_id: None
    }
