"""Crowd work in a real browser: an admin publishes a batch to (fake) MTurk, a worker previews
and accepts the HIT inside MTurk's frame, submits, and the browser hands the assignment back to
MTurk; the admin syncs and approves, and the labels are stored as a crowd worker's. Then the same
for a self-hosted study link with a completion code."""

import json
import re
from urllib.parse import urlencode

import pytest

from annotate.crowd.models import Bonus, Hit, Publication, PublicationStatus
from annotate.crowd.services import review
from annotate.models import Annotator, AnnotatorKind, Assignment, AssignmentStatus, Label
from annotate.roles import ADMIN
from tests.annotate.crowd.conftest import (
    crowd_assignment,
    fake_publication,
    submitted_on_fake_platform,
)
from tests.annotate.crowd.fake_mturk import FakeMTurkServer
from tests.factories import UserFactory, project_with_tasks

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fake_mturk(monkeypatch, settings):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFAKEFAKEFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    with FakeMTurkServer() as server:
        settings.CROWD_BACKEND = "mturk"
        settings.MTURK_ENDPOINT_URL = server.url
        settings.CROWD_PUBLIC_URL = ""
        settings.CROWD_SUBMIT_HOSTS = [*settings.CROWD_SUBMIT_HOSTS, server.host]
        settings.CROWD_FRAME_ANCESTORS = [*settings.CROWD_FRAME_ANCESTORS, server.url]
        yield server


def publish_in_browser(page, batch, platform):
    page.goto(f"/crowd/batches/{batch.pk}/publish/")
    page.select_option("#id_platform", platform)
    page.click("text=Preview the cost")
    total = page.locator("#cost-total").inner_text()
    page.click("button[name=publish]")
    page.wait_for_url("**/crowd/publications/*/")
    return total, Publication.objects.get(batch=batch, platform=platform)


def answer_everything(frame, value="YES"):
    for fieldset in frame.locator("fieldset.answer").all():
        fieldset.get_by_label(value, exact=True).check()


def external_url(fake_mturk, hit):
    question = fake_mturk.state.hits[hit.hit_id]["Question"]
    return re.search(r"<ExternalURL>(.*)</ExternalURL>", question).group(1).replace("&amp;", "&")


def test_mturk_publish_preview_accept_submit_sync_approve(page_for, browser, fake_mturk, settings):
    project = project_with_tasks(instructions=2, systems=2, questions=2, assignments_per_task=1)
    batch = project.batches.get()
    admin = page_for(UserFactory(username="boss", roles=[ADMIN], is_staff=True))

    total, publication = publish_in_browser(admin, batch, "mturk")
    assert total == "$2.40"  # 2 HITs of 1 assignment × ($1 + MTurk's 20 %)
    admin.reload()
    assert admin.locator("#progress-text").inner_text() == "2 of 2"
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PUBLISHED
    hit = Hit.objects.filter(publication=publication).order_by("id").first()
    url = external_url(fake_mturk, hit)

    worker = page_for()  # no login, no cookies of ours
    worker.set_default_timeout(10_000)
    preview = {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": hit.hit_id}
    worker.goto(f"{fake_mturk.url}/frame?" + urlencode({"src": f"{url}?{urlencode(preview)}"}))
    frame = worker.frame_locator("#hit-frame")
    frame.locator("#preview-notice").wait_for()
    assert frame.locator("button[type=submit]").count() == 0
    assert not Assignment.objects.exists()

    assignment_id = fake_mturk.api.worker_accept(hit.hit_id, "AE2EWORKER")
    accepted = {
        "assignmentId": assignment_id,
        "hitId": hit.hit_id,
        "workerId": "AE2EWORKER",
        "turkSubmitTo": fake_mturk.url,
    }
    worker.goto(f"{fake_mturk.url}/frame?" + urlencode({"src": f"{url}?{urlencode(accepted)}"}))
    frame = worker.frame_locator("#hit-frame")
    frame.locator("#task-form").wait_for()
    answer_everything(frame)
    frame.locator("#task-form button[type=submit]").click()
    frame.locator("text=HIT submitted.").wait_for()  # the fake MTurk's reply, inside the frame

    (posted,) = fake_mturk.state.external_submits
    assert posted["assignmentId"] == assignment_id and "labels=4" in posted["summary"]
    assert fake_mturk.state.assignments[assignment_id]["AssignmentStatus"] == "Submitted"

    # A forged worker opens the same HIT with invented ids: our page takes the answers, MTurk
    # refuses the hand-back, and nothing of it will count.
    forger = browser.new_context().new_page()
    forger.set_default_timeout(10_000)
    forged = {**accepted, "assignmentId": "FORGEDASSIGNMENT1", "workerId": "AFORGED1"}
    forger.goto(f"{fake_mturk.url}/frame?" + urlencode({"src": f"{url}?{urlencode(forged)}"}))
    forged_frame = forger.frame_locator("#hit-frame")
    forged_frame.locator("#task-form").wait_for()
    answer_everything(forged_frame, "NO")
    forged_frame.locator("#task-form button[type=submit]").click()
    forged_frame.locator("text=There was a problem submitting your results").wait_for()
    assert [s["assignmentId"] for s in fake_mturk.state.refused_submits] == ["FORGEDASSIGNMENT1"]
    forged_assignment = Assignment.objects.get(annotator__worker_id="AFORGED1")
    assert Label.objects.filter(annotator__worker_id="AFORGED1").count() == 4

    # The admin syncs at once, not CROWD_RELEASE_GRACE_SECONDS after the submits: without the
    # grace, this sync is the one that finds the forged work missing.
    settings.CROWD_RELEASE_GRACE_SECONDS = 0
    admin.goto(f"/crowd/publications/{publication.pk}/")
    admin.click("text=Sync assignments now")
    admin.locator(".messages", has_text="Syncing").wait_for()
    admin.goto(f"/crowd/publications/{publication.pk}/review/")
    forged_row = admin.locator("tr:has-text('AFORGED1')")
    assert forged_row.locator(".confirmation").inner_text() == "unknown to the platform"
    row = admin.locator("tr:has-text('AE2EWORKER')")
    assert row.locator(".confirmation").inner_text() == "confirmed"
    row.get_by_role("button", name="Approve").click()
    admin.locator(".messages", has_text="Approved.").wait_for()
    assert fake_mturk.state.assignments[assignment_id]["AssignmentStatus"] == "Approved"
    assignment = Assignment.objects.get(platform_assignment_id=assignment_id)
    assert assignment.status == AssignmentStatus.APPROVED

    crowd = Annotator.objects.get(worker_id="AE2EWORKER")
    assert crowd.kind == AnnotatorKind.CROWD
    assert Label.objects.filter(annotator=crowd).count() == 4
    instruction = hit.task.instruction
    admin.goto(f"/benchmarks/{instruction.benchmark_id}/instructions/{instruction.pk}/")
    # The labels matrix: the worker is a column under each system, with a label per question.
    matrix = admin.locator("#label-matrix")
    assert matrix.locator("th", has_text="mturk:AE2EWORKER").count() == 2  # both systems
    assert matrix.locator("td.cell:not(:empty)").count() >= 4

    # In the report the worker's labels are the crowd source, paid $1 plus MTurk's 20% fee.
    admin.goto(f"/reports/{instruction.benchmark_id}/")
    leaderboard = admin.locator("#leaderboard + .table-scroll table")
    assert leaderboard.locator("tr", has_text="crowd-majority").count() == 2  # both systems
    report = json.loads(admin.request.get(f"/api/reports/{instruction.benchmark_id}/").text())
    crowd_rows = [r for r in report["sources"] if r["source"] == "crowd-majority"]
    overall = next(r for r in crowd_rows if r["subset"] == "overall")
    assert overall["source_kind"] == "crowd" and overall["cost_usd"] == 1.20
    # Only the real worker's YES answers: the forged NO answers moved nothing.
    crowd_board = [r for r in report["leaderboard"] if r["source"] == "crowd-majority"]
    assert {(r["yes"], r["questions"]) for r in crowd_board if r["subset"] == "overall"} == {(2, 2)}
    assert "AFORGED1" not in admin.locator("main").inner_text()

    # The forged worker's own link now says plainly that the work does not count, and a new
    # forged worker is refused at the door: the HIT has its one confirmed worker.
    forger.goto(f"{fake_mturk.url}/frame?" + urlencode({"src": f"{url}?{urlencode(forged)}"}))
    message = forger.frame_locator("#hit-frame").locator("#worker-message")
    assert "does not know assignment FORGEDASSIGNMENT1" in message.inner_text()
    second = {**accepted, "assignmentId": "FORGEDASSIGNMENT2", "workerId": "AFORGED2"}
    forger.goto(f"{fake_mturk.url}/frame?" + urlencode({"src": f"{url}?{urlencode(second)}"}))
    message = forger.frame_locator("#hit-frame").locator("#worker-message")
    assert "already has the 1 workers it asked for" in message.inner_text()
    assert not Assignment.objects.filter(annotator__worker_id="AFORGED2").exists()
    assert forged_assignment.labels.count() == 4  # kept, with its status, in the raw export


def test_selfhosted_link_to_completion_code(page_for, browser):
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=2)
    project.completion_code = "THANKS-7"
    project.save()
    admin = page_for(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    total, publication = publish_in_browser(admin, project.batches.get(), "selfhosted")
    assert total == "$2.00"  # 1 task × 2 participants × $1, paid on the recruiting site
    assert publication.completion_code == "THANKS-7"  # the form started from the project's
    join_url = admin.locator("#join-url").inner_text()

    worker = page_for()
    worker.set_default_timeout(10_000)
    worker.goto(join_url + "?PROLIFIC_PID=P-123&STUDY_ID=S-1&SESSION_ID=X-9")
    worker.click("text=Start")
    worker.locator("#task-form").wait_for()
    answer_everything(worker, "NO")
    worker.locator("#task-form button[type=submit]").click()
    assert worker.locator("#completion-code").inner_text() == "THANKS-7"

    assignment = Assignment.objects.get(annotator__worker_id="P-123")
    assert assignment.status == AssignmentStatus.SUBMITTED
    assert assignment.platform_assignment_id == "X-9"
    assert Label.objects.filter(annotator=assignment.annotator, value=0).count() == 2

    worker.goto(join_url + "?PROLIFIC_PID=P-123")
    worker.click("text=Start")
    assert "No task left" in worker.locator("#worker-message").inner_text()


def test_the_publish_form_hides_the_hit_only_settings_while_a_link_is_chosen(page_for):
    """MTurk's approval rate, lifetime... have no effect on a self-hosted link: choosing it
    hides them (site.js, as the server renders the form for the platform sent), choosing the
    platform again shows them."""
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=2)
    admin = page_for(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    admin.goto(f"/crowd/batches/{project.batches.get().pk}/publish/")
    rate, lifetime = admin.locator("#id_min_percent_approved"), admin.locator("#id_lifetime_hours")
    assert rate.is_visible() and lifetime.is_visible()
    admin.select_option("#id_platform", "selfhosted")
    assert rate.is_hidden() and lifetime.is_hidden()
    assert admin.locator("#id_assignment_minutes").is_visible()
    admin.click("text=Preview the cost")
    admin.wait_for_load_state()  # site.js (deferred) listens before the choice changes again
    assert admin.locator("#cost-total").is_visible() and rate.is_hidden()
    admin.select_option("#id_platform", "fake")
    assert rate.is_visible() and lifetime.is_visible()


def test_hit_only_settings_left_wrong_then_a_link_chosen_do_not_block_the_publish(page_for):
    """An approved-HITs count emptied and a lifetime of 0 under the platform's choice, then the
    link chosen: the hidden inputs' `required` and `min` refused the submit in the browser, with
    nothing to see and no request sent. Hidden inputs are disabled: not checked, not sent, taken
    at their defaults; choosing the platform again gives them back."""
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=2)
    batch = project.batches.get()
    admin = page_for(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    admin.goto(f"/crowd/batches/{batch.pk}/publish/")
    admin.fill("#id_min_hits_approved", "")
    admin.fill("#id_lifetime_hours", "0")
    admin.select_option("#id_platform", "selfhosted")
    admin.click("text=Preview the cost")
    admin.locator("#cost-total").wait_for()
    admin.wait_for_load_state()  # site.js (deferred) listens before the choice changes again
    admin.select_option("#id_platform", "fake")
    assert admin.locator("#id_lifetime_hours").is_enabled()
    assert admin.locator("#id_lifetime_hours").input_value() == "168"  # the default a link took
    admin.select_option("#id_platform", "selfhosted")
    admin.click("button[name=publish]")
    admin.wait_for_url("**/crowd/publications/*/")
    assert Publication.objects.get(batch=batch).platform == "selfhosted"


def test_an_admin_plays_a_worker_on_the_offline_demo_platform(page_for, settings, snap):
    """make run's offline platform: the admin takes a HIT as a demo worker, the done page's
    script hands it to the platform's stand-in for externalSubmit (allowed by the CSP), a sync
    confirms it and the review page approves it."""
    from annotate.crowd.fake import FakePlatform

    settings.CROWD_BACKEND = "fake"
    project = project_with_tasks(instructions=1, systems=2, questions=2, assignments_per_task=1)
    batch = project.batches.get()
    admin = page_for(UserFactory(username="demo-boss", roles=[ADMIN], is_staff=True))
    admin.set_default_timeout(10_000)
    _, publication = publish_in_browser(admin, batch, "fake")
    admin.reload()
    admin.get_by_role("button", name="Do it as a worker").click()
    admin.locator("#task-form").wait_for()
    # The worker's view: no site menu, and the admin is told whose view it is.
    assert admin.locator(".site-nav").count() == 0 and admin.locator("#worker-view").is_visible()
    snap(admin, "worker-view")
    answer_everything(admin)
    admin.locator("#task-form button[type=submit]").click()
    admin.locator("text=The offline demo platform took assignment").wait_for()  # the script
    assignment = Assignment.objects.get(annotator__worker_id="DEMOWORKER1")
    platform_id = assignment.platform_assignment_id
    assert FakePlatform.store.assignments[platform_id].status == "Submitted"

    admin.goto(f"/crowd/publications/{publication.pk}/")
    assert admin.locator("td.hit-work").inner_text() == "1 / 1 / 1"
    admin.click("text=Sync assignments now")
    admin.locator(".messages", has_text="Syncing").wait_for()
    admin.goto(f"/crowd/publications/{publication.pk}/review/")
    row = admin.locator("tr:has-text('DEMOWORKER1')")
    assert row.locator(".confirmation").inner_text() == "confirmed"
    row.get_by_role("button", name="Approve").click()
    admin.locator(".messages", has_text="Approved.").wait_for()
    assert FakePlatform.store.assignments[platform_id].status == "Approved"
    assert Label.objects.filter(annotator__worker_id="DEMOWORKER1").count() == 4


DRAFTS = "Object.keys(localStorage).filter((key) => key.includes('task-draft-'))"


def test_a_selfhosted_participant_returns_a_task_after_confirming(page_for, browser):
    """The return asks first (a cancelled dialog keeps the task), then frees the slot at once:
    the next participant gets the task the first one gave back."""
    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=1)
    admin = page_for(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    publish_in_browser(admin, project.batches.get(), "selfhosted")
    join_url = admin.locator("#join-url").inner_text()

    worker = page_for()
    worker.set_default_timeout(10_000)
    worker.goto(join_url + "?PROLIFIC_PID=P-1")
    worker.click("text=Start")
    worker.locator("#task-form").wait_for()
    answer_everything(worker, "YES")
    asked = []
    worker.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    worker.get_by_role("button", name="Return this task").click()
    assert asked and asked[0].startswith("Return this task?")
    assert Assignment.objects.get(annotator__worker_id="P-1").status == AssignmentStatus.CLAIMED
    assert worker.evaluate(DRAFTS) != []  # the answers given so far, kept while they work

    worker.once("dialog", lambda dialog: dialog.accept())
    worker.get_by_role("button", name="Return this task").click()
    worker.locator("#returned-note").wait_for()
    assert worker.locator("#no-code").is_visible()
    assert worker.evaluate(DRAFTS) == []  # a returned task's answers stay nowhere
    assert Assignment.objects.get(annotator__worker_id="P-1").status == AssignmentStatus.RETURNED

    other = page_for()
    other.set_default_timeout(10_000)
    other.goto(join_url + "?PROLIFIC_PID=P-2")
    other.click("text=Start")
    other.locator("#task-form").wait_for()
    assert not Label.objects.exists()


def test_an_mturk_preview_shows_the_questions_and_nothing_to_answer_them(page_for, settings):
    """The preview showed "0 / 4 answered" in a sticky bar where nothing can be answered: the
    questions stay, read-only, and the page's script runs without the bar."""
    from django.urls import reverse

    from tests.annotate.crowd.conftest import published_on_fake

    settings.CROWD_BACKEND = "fake"
    project = project_with_tasks(instructions=1, systems=2, questions=2, assignments_per_task=1)
    hit = Hit.objects.get(publication=published_on_fake(project.batches.get()))
    worker = page_for(viewport={"width": 375, "height": 700})
    errors = []
    worker.on("pageerror", lambda error: errors.append(str(error)))
    preview = {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": hit.hit_id}
    worker.goto(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]) + "?" + urlencode(preview)
    )
    worker.locator("#preview-notice").wait_for()
    assert worker.locator("fieldset.answer").count() == 4
    assert worker.locator("fieldset.answer input[type=radio]:not([disabled])").count() == 0
    assert worker.locator("#progress, .submit-bar, #missing").count() == 0
    assert "answered" not in worker.locator("main").inner_text()
    worker.keyboard.press("?")  # the script's keys still work: the help opens
    assert worker.locator("#key-help").is_visible()
    assert not errors, errors


class WorkerKilled(BaseException):
    """The worker's process ended mid-publish: no `except Exception` of ours runs."""


def test_an_admin_resumes_a_publish_whose_worker_died_half_way(
    page_for, fake_mturk, settings, monkeypatch, snap
):
    """Killed after 2 of 3 HITs were made on MTurk (the second's reply never stored), the
    publication stayed "publishing" and its page refreshed, waiting, for good. Once its publish
    is silent the page says stalled and offers Resume for the missing HITs' cost; resuming
    finishes it with exactly one HIT per task on the server."""
    from datetime import timedelta
    from decimal import Decimal

    from django.utils import timezone

    from annotate.crowd.services import publishing

    project = project_with_tasks(instructions=3, systems=2, questions=1, assignments_per_task=2)
    publication = publishing.publication_create(
        batch=project.batches.get(),
        platform_name="mturk",
        chosen=publishing.PublishSettings(title="t", description="d", reward_usd=Decimal("1")),
        base_url="https://annotate.example.org",
    )
    real, stored = publishing._hit_created, []

    def dying(hit, info):
        if len(stored) == 1:
            raise WorkerKilled()
        stored.append(hit.pk)
        real(hit, info)

    monkeypatch.setattr(publishing, "_hit_created", dying)
    with pytest.raises(WorkerKilled):
        publishing.publication_publish(publication_id=publication.pk, now=timezone.now())
    monkeypatch.setattr(publishing, "_hit_created", real)
    silent = timezone.now() - timedelta(seconds=settings.CROWD_PUBLISH_STALE_SECONDS + 1)
    Publication.objects.filter(pk=publication.pk).update(heartbeat_at=silent)
    assert len(fake_mturk.state.hits) == 2

    admin = page_for(UserFactory(username="resumer", roles=[ADMIN], is_staff=True))
    admin.goto(f"/crowd/publications/{publication.pk}/")
    assert admin.locator("meta[http-equiv=refresh]").count() == 0
    assert admin.locator("#status strong").inner_text() == (
        "Stalled (the publish stopped before its end)"
    )
    assert "1 of 3 HITs made; Resume makes the 2 missing" in admin.locator("#status").inner_text()
    assert admin.locator("#resume-total").inner_text() == "$4.80"  # 2 HITs × 2 × $1.20
    snap(admin, "stalled")
    admin.get_by_role("button", name="Resume: publish the 2 missing HITs ($4.80)").click()
    admin.locator(".messages", has_text="Publishing the missing HITs").wait_for()
    assert admin.locator("#status strong").inner_text() == "Published"
    assert admin.locator("#progress-text").inner_text() == "3 of 3"
    assert admin.locator("#resume").count() == 0
    with fake_mturk.state.lock:
        on_server = set(fake_mturk.state.hits)
    ours = set(publication.hits.values_list("hit_id", flat=True))
    assert len(on_server) == 3 and ours == on_server


def test_the_bonus_confirm_names_the_amount_its_fee_and_the_worker(page_for, settings, snap):
    """A walkthrough typed $10,000 on a $0.40 task and was asked only "Pay this bonus now?": the
    dialog now says what is paid, the platform's fee on it and to whom (the worker's id, text a
    worker chose, shown as text); cancelling sends nothing, and a bonus above
    CROWD_BONUS_MAX_USD confirmed all the same is refused by the server, nothing paid."""
    from annotate.crowd.fake import FakePlatform

    settings.CROWD_BACKEND = "fake"
    project = project_with_tasks(instructions=1, systems=2, questions=2, assignments_per_task=1)
    batch = project.batches.get()
    publication = fake_publication(batch, fee_rate=None)  # MTurk's schedule: 20%, at least 1¢
    worker = 'A1B2"><img src=x id=injected>'
    assignment = crowd_assignment(task=batch.tasks.get(), platform="fake", worker=worker)
    submitted_on_fake_platform(assignment, publication=publication)
    boss = UserFactory(username="bonus-boss", roles=[ADMIN], is_staff=True)
    review.assignment_approve(assignment_id=assignment.pk, user=boss)
    admin = page_for(boss)
    admin.goto(f"/crowd/publications/{publication.pk}/review/")
    row = admin.locator(f'tr[data-assignment="{assignment.pk}"]')
    row.locator("input[name=amount]").fill("0.50")
    row.locator("input[name=feedback]").last.fill("careful work")
    asked = []
    admin.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    row.get_by_role("button", name="Pay bonus").click()
    assert asked == [
        f"Pay a bonus of $0.50 (+ $0.10 MTurk fee) to worker {worker} now? "
        "The platform pays it at once, and a bonus cannot be taken back."
    ]
    assert admin.locator("#injected").count() == 0
    assert not Bonus.objects.exists()

    row.locator("input[name=amount]").fill("10000")
    admin.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    row.get_by_role("button", name="Pay bonus").click()
    admin.locator(".messages", has_text="CROWD_BONUS_MAX_USD").wait_for()
    snap(admin, "refused")
    assert asked[1].startswith("Pay a bonus of $10,000.00 (+ $2,000.00 MTurk fee) to worker A1B2")
    assert "Bonus amount: $10,000.00 is more than the most one bonus may be, $20.00" in (
        admin.locator(".messages").inner_text()
    )
    assert not Bonus.objects.exists() and FakePlatform.store.bonuses == []


def test_a_bonus_without_its_reason_is_not_asked_about_nor_sent(page_for, settings):
    """A walkthrough typed an amount, confirmed "Pay a bonus of $0.50 ... now?", and was then
    told the reason was missing, the amount gone: the browser now asks for the reason first,
    before the confirmation, and keeps what was typed."""
    from annotate.crowd.fake import FakePlatform

    settings.CROWD_BACKEND = "fake"
    project = project_with_tasks(instructions=1, systems=2, questions=2, assignments_per_task=1)
    batch = project.batches.get()
    publication = fake_publication(batch, fee_rate=None)
    assignment = crowd_assignment(task=batch.tasks.get(), platform="fake", worker="W-REASON")
    submitted_on_fake_platform(assignment, publication=publication)
    boss = UserFactory(username="bonus-reason", roles=[ADMIN], is_staff=True)
    review.assignment_approve(assignment_id=assignment.pk, user=boss)
    admin = page_for(boss)
    admin.goto(f"/crowd/publications/{publication.pk}/review/")
    row = admin.locator(f'tr[data-assignment="{assignment.pk}"]')
    row.locator("input[name=amount]").fill("0.50")
    asked = []
    admin.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    row.get_by_role("button", name="Pay bonus").click()
    reason = row.locator("input[name=feedback]").last
    assert reason.evaluate("input => input === document.activeElement")
    assert asked == []
    assert row.locator("input[name=amount]").input_value() == "0.50"
    assert not Bonus.objects.exists() and FakePlatform.store.bonuses == []

    reason.fill("careful work")
    row.get_by_role("button", name="Pay bonus").click()
    assert len(asked) == 1 and asked[0].startswith("Pay a bonus of $0.50")


def test_a_rejection_without_its_feedback_is_not_asked_about_nor_sent(page_for, settings):
    """Reject asked "Reject this worker's assignment?" and only then said the feedback was
    missing: the browser now asks for it first, and Approve still needs none."""
    settings.CROWD_BACKEND = "fake"
    project = project_with_tasks(instructions=2, systems=2, questions=2, assignments_per_task=1)
    batch = project.batches.get()
    publication = fake_publication(batch, fee_rate=None)
    first, second = (
        crowd_assignment(task=task, platform="fake", worker=f"W-{task.pk}")
        for task in batch.tasks.order_by("pk")
    )
    for assignment in (first, second):
        submitted_on_fake_platform(assignment, publication=publication)
    admin = page_for(UserFactory(username="reject-reason", roles=[ADMIN], is_staff=True))
    admin.goto(f"/crowd/publications/{publication.pk}/review/")
    asked = []
    admin.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    row = admin.locator(f'tr[data-assignment="{first.pk}"]')
    row.get_by_role("button", name="Reject").click()
    assert row.locator("input[name=feedback]").evaluate("input => input === document.activeElement")
    assert asked == []
    first.refresh_from_db()
    assert first.status == AssignmentStatus.SUBMITTED

    admin.locator(f'tr[data-assignment="{second.pk}"]').get_by_role(
        "button", name="Approve"
    ).click()
    admin.locator(".messages", has_text="Approved").wait_for()
    second.refresh_from_db()
    assert second.status == AssignmentStatus.APPROVED and asked == []
