"""The worker's side: MTurk preview and accept, submit and hand back, self-hosted links."""

import importlib
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.fake import FakePlatform
from annotate.crowd.models import Hit, WorkerBlock
from annotate.crowd.services import publishing
from annotate.crowd.services.publishing import PublishSettings
from annotate.crowd.services.workers import worker_assignment_get
from annotate.errors import CrowdPlatformError
from annotate.models import (
    Annotator,
    AnnotatorKind,
    Assignment,
    AssignmentStatus,
    Label,
    ProjectMode,
)
from tests.annotate.crowd.conftest import published_on_fake

pytestmark = pytest.mark.django_db
SUBMIT_TO = "https://workersandbox.mturk.com"


@pytest.fixture
def published(crowd_batch):
    return published_on_fake(crowd_batch)


def _hit(publication) -> Hit:
    return publication.hits.order_by("id").first()


def _open(client, hit, worker="AWORKER1", assignment_id=None, submit_to=SUBMIT_TO, **extra):
    if assignment_id is None:
        assignment_id = FakePlatform().worker_accept(hit_id=hit.hit_id, worker_id=worker)
    params = {
        "assignmentId": assignment_id,
        "hitId": hit.hit_id,
        "workerId": worker,
        "turkSubmitTo": submit_to,
        **extra,
    }
    return client.get(reverse("crowd:mturk-task", args=[hit.unique_request_token]), params)


def _published_and_opened(client, batch, **chosen):
    """Publish `batch` on the offline platform (`chosen`: any `PublishSettings` field) and open
    its first HIT as AWORKER1, who accepts it there; the HIT and the page's answer."""
    hit = _hit(published_on_fake(batch, **chosen))
    return hit, _open(client, hit)


def _answers(page_text):
    names = sorted(set(re.findall(r'name="(r\d+_q\d+)"', page_text)))
    assert names
    return {name: "yes" for name in names}


def test_preview_is_read_only_and_creates_nothing(client, published):
    hit = _hit(published)
    page = client.get(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]),
        {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": hit.hit_id},
    )
    assert page.status_code == 200
    assert hit.task.instruction.text in page.text
    assert 'id="preview-notice"' in page.text
    assert "disabled" in page.text and 'type="submit"' not in page.text
    assert not Assignment.objects.exists() and not Annotator.objects.exists()


def test_preview_shows_the_questions_but_no_count_of_answers(client, published):
    """The preview showed "0 / 4 answered" (and an empty sticky bar) where nothing can be
    answered: the questions stay, read-only, and nothing suggests answering them."""
    hit = _hit(published)
    page = client.get(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]),
        {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": hit.hit_id},
    )
    question = hit.task.instruction.questions.first().text
    assert question in page.text and 'name="r1_q1"' in page.text
    assert 'id="progress"' not in page.text and "answered</p>" not in page.text
    assert 'class="submit-bar"' not in page.text and 'id="missing"' not in page.text
    assert "<kbd>y</kbd> YES" not in page.text and "<kbd>Enter</kbd> submit" not in page.text


def test_accepted_hit_links_an_assignment_to_the_worker(client, published):
    hit = _hit(published)
    assignment_id = FakePlatform().worker_accept(hit_id=hit.hit_id, worker_id="AWORKER1")
    opened = _open(client, hit, assignment_id=assignment_id)
    assert opened.status_code == 302
    assignment = Assignment.objects.get()
    assert assignment.task == hit.task
    assert assignment.platform_assignment_id == assignment_id
    assert assignment.platform_hit_id == hit.hit_id
    worker = assignment.annotator
    assert (worker.kind, worker.platform, worker.worker_id) == (
        AnnotatorKind.CROWD,
        "fake",
        "AWORKER1",
    )
    # A reload inside MTurk's frame reopens the same assignment.
    again = _open(client, hit, assignment_id=assignment_id)
    assert Assignment.objects.count() == 1

    # The links carry a signed, timestamped token: the two differ when the requests fall in
    # different seconds, but open the same assignment, with the same place to submit to.
    def opens(response):
        token = response["Location"].rstrip("/").rsplit("/", 1)[1]
        held = worker_assignment_get(token=token)
        return held.assignment.pk, held.submit_to

    assert opens(opened)[0] == assignment.pk and opens(again) == opens(opened)


def test_submit_stores_labels_then_hands_the_assignment_back(client, published):
    hit = _hit(published)
    opened = _open(client, hit, submit_to=SUBMIT_TO + "/")
    client.cookies.clear()  # third-party cookies blocked in the iframe: the token is enough
    task_page = client.get(opened["Location"])
    assert task_page.status_code == 200
    answers = _answers(task_page.text)
    client.cookies.clear()
    done = client.post(opened["Location"], answers)
    assert done.status_code == 200
    assignment = Assignment.objects.get()
    assert assignment.status == AssignmentStatus.SUBMITTED
    assert Label.objects.filter(annotator=assignment.annotator).count() == len(answers)
    assert f'action="{SUBMIT_TO}/mturk/externalSubmit"' in done.text
    assert f'name="assignmentId" value="{assignment.platform_assignment_id}"' in done.text
    assert "sessionid" not in done.cookies


def test_incomplete_submit_shows_what_is_missing_and_stores_nothing(client, published):
    opened = _open(client, _hit(published))
    page = client.post(opened["Location"], {"r1_q1": "yes"})
    assert page.status_code == 400
    assert "Still to answer" in page.text
    assert not Label.objects.exists()
    # The list is below the form, not in the sticky bar: the bar has a short line and a link.
    start = page.text.index('class="submit-bar"')
    end = page.text.index("</form>", start)
    bar = page.text[start:end]
    assert 'id="missing-list"' not in bar and "Still to answer" not in bar
    assert 'id="missing-count">3<' in bar and 'href="#f-r1_q2" id="missing-first"' in bar
    after = page.text[end:]
    assert 'id="missing" class="missing missing-list" role="alert"' in after
    assert "System A, question 2</a>" in after


@pytest.mark.parametrize(
    "submit_to",
    ["https://evil.example.com", "http://www.mturk.com", "https://www.mturk.com/x", "javascript:1"],
)
def test_only_mturk_hosts_may_receive_the_submit(client, published, submit_to):
    page = _open(client, _hit(published), submit_to=submit_to)
    assert page.status_code == 400
    assert "not a Mechanical Turk address" in page.text
    assert not Assignment.objects.exists()


def test_worker_cannot_take_the_same_task_twice(client, published):
    hit = _hit(published)
    opened = _open(client, hit)
    client.post(opened["Location"], _answers(client.get(opened["Location"]).text))
    again = _open(client, hit, assignment_id="ANOTHERASSIGNMENT")
    assert again.status_code == 409
    assert Assignment.objects.count() == 1


def test_wrong_hit_id_or_bad_token_is_404(client, published):
    hit = _hit(published)
    assert _open(client, hit, hitId="OTHER").status_code in (302, 404)
    page = client.get(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]),
        {"assignmentId": "A1", "hitId": "NOTOURS", "workerId": "W", "turkSubmitTo": SUBMIT_TO},
    )
    assert page.status_code == 404
    assert client.get(reverse("crowd:work-task", args=["forged-token"])).status_code == 404
    assert client.get(reverse("crowd:mturk-task", args=["nope"])).status_code == 404


def test_blocked_worker_is_refused(client, published):
    worker = Annotator.objects.create(
        name="fake:AWORKER1", kind=AnnotatorKind.CROWD, platform="fake", worker_id="AWORKER1"
    )
    WorkerBlock.objects.create(annotator=worker, reason="spam")
    assert _open(client, _hit(published)).status_code == 403
    assert not Assignment.objects.exists()


def test_worker_pages_are_framable_by_mturk_only_and_others_not_at_all(client, published):
    opened = _open(client, _hit(published))
    page = client.get(opened["Location"])
    policy = page["Content-Security-Policy"]
    assert "frame-ancestors https://www.mturk.com https://workersandbox.mturk.com" in policy
    assert "X-Frame-Options" not in page
    home = client.get(reverse("login"))
    assert home["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in home["Content-Security-Policy"]


# --- Self-hosted links ----------------------------------------------------------------------


@pytest.fixture
def study(crowd_batch):
    project = crowd_batch.project
    project.completion_code = "C0DE42"
    project.save()
    return publishing.publication_create(
        batch=crowd_batch,
        platform_name="selfhosted",
        chosen=PublishSettings(title="A study", description="d"),
        base_url="https://annotate.example.org",
    )


def _join(client, study, **params):
    url = reverse("crowd:selfhosted-join", args=[study.link_token])
    before = Assignment.objects.count()
    landing = client.get(url, params)  # link previews only GET: nothing is handed out
    assert landing.status_code == 200 and Assignment.objects.count() == before
    return client.post(url, params)


def test_selfhosted_link_gives_a_task_and_then_the_completion_code(client, study):
    started = _join(client, study, PROLIFIC_PID="P1", STUDY_ID="S1", SESSION_ID="X1")
    assert started.status_code == 302
    assignment = Assignment.objects.get()
    assert assignment.annotator.worker_id == "P1" and assignment.annotator.platform == "selfhosted"
    assert (assignment.platform_hit_id, assignment.platform_assignment_id) == ("S1", "X1")
    done = client.post(started["Location"], _answers(client.get(started["Location"]).text))
    assert done.status_code == 200 and 'id="completion-code">C0DE42<' in done.text


def test_selfhosted_redirects_to_the_completion_url(client, study):
    study.batch.project.completion_url = "https://app.prolific.com/submissions/complete?cc=C0DE42"
    study.batch.project.save()
    started = _join(client, study, PROLIFIC_PID="P2")
    done = client.post(started["Location"], _answers(client.get(started["Location"]).text))
    assert done.status_code == 302
    assert done["Location"] == "https://app.prolific.com/submissions/complete?cc=C0DE42"


def test_a_blocked_participant_reads_that_the_work_does_not_count_before_the_completion_url(
    client, study
):
    """A participant blocked while holding a task was sent straight on to the study site's
    completion URL after the submit, and never read that their answers do not count: the done
    page says so first, with a link on to the study site (the redirect stays for the others)."""
    url = "https://app.prolific.com/submissions/complete?cc=C0DE42"
    study.batch.project.completion_url = url
    study.batch.project.save()
    started = _join(client, study, PROLIFIC_PID="PBLOCK")["Location"]
    task = client.get(started).text
    WorkerBlock.objects.create(annotator=Annotator.objects.get(worker_id="PBLOCK"), reason="x")

    done = client.post(started, _answers(task))

    assert done.status_code == 200
    assert 'id="blocked-note"' in done.text and "do not count in the results" in done.text
    assert f'<a href="{url.replace("&", "&amp;")}" id="completion-continue">' in done.text
    assert 'id="completion-code">C0DE42<' in done.text
    assert Assignment.objects.get(annotator__worker_id="PBLOCK").labels.exists()  # kept
    assert client.get(started).status_code == 200  # the done page again: the note again
    other = _join(client, study, PROLIFIC_PID="PFINE")["Location"]
    finished = client.post(other, _answers(client.get(other).text))
    assert finished.status_code == 302 and finished["Location"] == url


def test_a_late_participant_reads_that_the_work_does_not_count_before_the_completion_url(
    client, study
):
    from annotate.services.assignments import assignments_expire

    url = "https://app.prolific.com/submissions/complete?cc=C0DE42"
    project = study.batch.project
    project.completion_url, project.assignments_per_task = url, 1
    project.save()
    started = _join(client, study, PROLIFIC_PID="PSLOW")["Location"]
    task = client.get(started).text
    claim = Assignment.objects.get(annotator__worker_id="PSLOW")
    assignments_expire(now=claim.expires_at)
    _join(client, study, PROLIFIC_PID="PQUICK")  # takes the lapsed claim's task

    done = client.post(started, _answers(task))

    claim.refresh_from_db()
    assert claim.status == AssignmentStatus.EXPIRED and claim.is_late
    assert done.status_code == 200 and 'id="late-note"' in done.text
    assert 'id="completion-continue"' in done.text


def test_a_selfhosted_participant_blocked_while_holding_a_task_is_warned_on_its_page(client, study):
    started = _join(client, study, PROLIFIC_PID="PBLOCK")["Location"]
    assert 'id="blocked-task-note"' not in client.get(started).text
    other = _join(client, study, PROLIFIC_PID="POTHER")["Location"]
    worker = Annotator.objects.get(worker_id="PBLOCK")
    WorkerBlock.objects.create(annotator=worker, reason="bot answers")
    page = client.get(started).text
    note = page.split('id="blocked-task-note"')[1].split("</p>")[0]
    assert "answers you give to this task are kept but will not count in the results" in note
    assert "Mechanical Turk" not in note  # a self-hosted link hands nothing back to a platform
    assert "bot answers" not in page and "POTHER" not in page
    assert 'id="blocked-task-note"' not in client.get(other).text


def test_selfhosted_worker_gets_each_task_once(client, study):
    for _ in range(3):
        started = _join(client, study, PROLIFIC_PID="P3")
        client.post(started["Location"], _answers(client.get(started["Location"]).text))
    assert Assignment.objects.filter(annotator__worker_id="P3").count() == 3
    last = _join(client, study, PROLIFIC_PID="P3")
    assert last.status_code == 404 and "No task left" in last.text


def test_anonymous_selfhosted_workers_get_their_own_identity(study):
    _join(Client(), study)  # two browsers: two participants (one browser is one: its cookie)
    _join(Client(), study)
    workers = Annotator.objects.filter(platform="selfhosted")
    assert workers.count() == 2 and all(w.worker_id.startswith("anon-") for w in workers)


def test_the_done_page_offers_the_next_task_while_one_is_left(client, study):
    tasks = study.batch.tasks.count()
    assert tasks >= 2
    started = _join(client, study, PROLIFIC_PID="P4")
    for number in range(1, tasks + 1):
        done = client.post(started["Location"], _answers(client.get(started["Location"]).text))
        if number < tasks:
            assert 'id="next-task"' in done.text and 'value="P4"' in done.text
            join = reverse("crowd:selfhosted-join", args=[study.link_token])
            assert f'action="{join}"' in done.text
            started = client.post(join, {"workerId": "P4"})  # the button on the done page
            assert started.status_code == 302
        else:
            assert 'id="next-task"' not in done.text  # the last one: nothing more to offer
    assert (
        Assignment.objects.filter(annotator__worker_id="P4", submitted_at__isnull=False).count()
        == tasks
    )


@pytest.mark.parametrize("refusal", ["worker blocked", "link closed"])
def test_the_done_page_offers_no_next_task_the_link_would_refuse(client, study, refusal):
    """A participant blocked since their submit, or on a link closed since, is not invited to
    "Do the next task" only to be told they can no longer take tasks."""
    started = _join(client, study, PROLIFIC_PID="P5")
    done = client.post(started["Location"], _answers(client.get(started["Location"]).text))
    assert 'id="next-task"' in done.text  # tasks are left, and the link would hand one out
    if refusal == "worker blocked":
        WorkerBlock.objects.create(
            annotator=Annotator.objects.get(worker_id="P5"), reason="all UNKNOWN"
        )
    else:
        study.link_closed_at = timezone.now()
        study.save(update_fields=["link_closed_at"])
    again = client.get(started["Location"])  # the done page, opened again
    assert again.status_code == 200 and 'id="next-task"' not in again.text
    # A blocked participant is not handed the code again (their work counts nowhere).
    assert ('id="completion-code"' in again.text) == (refusal == "link closed")
    join = reverse("crowd:selfhosted-join", args=[study.link_token])
    assert client.post(join, {"workerId": "P5"}).status_code in (403, 410)  # what it would get


def test_a_participant_blocked_after_their_submit_is_told_so_by_the_link_and_given_no_code(
    client, study
):
    """Back on the link for their completion code, a participant blocked since their submit
    read "Sorry, you can no longer take tasks from this requester" and nothing of their work.
    They read now that their answers are kept but do not count and that the code is not shown
    again (the recruiting site pays on it); the done page opened again says the same. An
    unblock gives the code back."""
    from annotate.crowd.services import review
    from annotate.roles import ADMIN
    from tests.factories import UserFactory

    admin = UserFactory(username="link-admin", roles=[ADMIN])
    started = _join(client, study, PROLIFIC_PID="P6")
    done = client.post(started["Location"], _answers(client.get(started["Location"]).text))
    assert "C0DE42" in done.text  # handed out with the submission, as always
    worker = Annotator.objects.get(worker_id="P6")
    review.worker_block(annotator_id=worker.pk, reason="all UNKNOWN", user=admin)

    join = reverse("crowd:selfhosted-join", args=[study.link_token])
    for back in (
        client.get(join, {"PROLIFIC_PID": "P6"}),
        client.post(join, {"PROLIFIC_PID": "P6"}),
    ):
        assert back.status_code == 403
        assert 'id="blocked-participant"' in back.text and 'id="blocked-work"' in back.text
        assert "do not count in the study's results" in back.text
        assert "C0DE42" not in back.text and "Start" not in back.text
    reopened = client.get(started["Location"])
    assert reopened.status_code == 200 and 'id="blocked-note"' in reopened.text
    assert 'id="code-withheld"' in reopened.text and "C0DE42" not in reopened.text
    # Another participant's id, blocked before doing anything here, is told only the block.
    other = Annotator.objects.create(
        platform="selfhosted", worker_id="P7", name="selfhosted:P7", kind="crowd"
    )
    review.worker_block(annotator_id=other.pk, reason="duplicate", user=admin)
    fresh = client.post(join, {"PROLIFIC_PID": "P7"})
    assert fresh.status_code == 403 and 'id="blocked-participant"' in fresh.text
    assert 'id="blocked-work"' not in fresh.text

    review.worker_unblock(annotator_id=worker.pk, user=admin)
    assert "C0DE42" in client.get(started["Location"]).text
    assert client.post(join, {"PROLIFIC_PID": "P6"}).status_code == 302  # their next task


def test_an_admin_walks_a_hit_through_the_offline_demo_platform_as_a_worker(
    client, published, admin_user, django_capture_on_commit_callbacks
):
    """make run has no worker to accept a demo HIT: the admin takes it as a demo worker, MTurk's
    way (ExternalQuestion URL, then externalSubmit), and the work counts only after a sync
    confirms it and the admin approves it, as on MTurk."""
    from annotate.selectors.results import counted_assignments

    client.force_login(admin_user)
    hit = _hit(published)
    page = client.get(reverse("crowd:publication", args=[published.pk]))
    start = reverse("crowd:demo-worker", args=[hit.pk])
    assert f'action="{start}"' in page.text and 'id="demo-worker-note"' in page.text
    opened = client.post(start)
    assert opened.status_code == 302 and "workerId=DEMOWORKER1" in opened["Location"]
    assert "turkSubmitTo=%2Fcrowd%2Fdemo-platform" in opened["Location"]
    task_url = client.get(opened["Location"])["Location"]
    task = client.get(task_url).text
    # What the worker sees: no site menu (the admin is told whose view it is).
    assert 'class="site-nav"' not in task and 'id="worker-view"' in task
    done = client.post(task_url, _answers(task))
    submit = reverse("crowd:demo-external-submit")
    assert f'action="{submit}"' in done.text
    assert 'class="site-nav"' not in done.text and 'id="worker-view"' in done.text
    assignment = Assignment.objects.get(annotator__worker_id="DEMOWORKER1")
    token = re.search(r'name="token" value="([^"]+)"', done.text).group(1)
    mine = {"assignmentId": assignment.platform_assignment_id, "token": token}
    # Only the worker's own token submits their HIT.
    assert client.post(submit, {**mine, "token": "forged"}).status_code == 404
    assert client.post(submit, {**mine, "assignmentId": "FAKEASG1"}).status_code == 404
    taken = client.post(submit, mine)
    assert taken.status_code == 200 and "took assignment" in taken.text
    # The admin's way on from the worker's view: the publication, to sync and review the work.
    back = reverse("crowd:publication", args=[published.pk])
    assert f'id="back-to-publication"><a href="{back}">' in taken.text
    assert "counts once a sync" in taken.text and "never counts" not in taken.text
    # Sent again (the worker reloads the page): the platform keeps the first submit, and the
    # worker is told so rather than shown "Not Found".
    again = client.post(submit, mine)
    assert again.status_code == 200 and "submitted before" in again.text
    assert "took assignment" not in again.text and f'href="{back}"' in again.text
    assert FakePlatform.store.assignments[assignment.platform_assignment_id].status == "Submitted"
    assert not counted_assignments().filter(pk=assignment.pk).exists()  # not confirmed yet

    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("crowd:publication-action", args=[published.pk]), {"action": "sync"})
    review = client.get(reverse("crowd:review", args=[published.pk]))
    assert "DEMOWORKER1" in review.text and 'value="approve"' in review.text
    client.post(
        reverse("crowd:assignment-action", args=[assignment.pk]),
        {"action": "approve"},
        HTTP_REFERER=reverse("crowd:review", args=[published.pk]),
    )
    assert counted_assignments().filter(pk=assignment.pk).exists()
    assert FakePlatform.store.assignments[assignment.platform_assignment_id].status == "Approved"

    # The HIT asked for 3 workers: two more demo workers may take it, a fourth may not.
    assert "workerId=DEMOWORKER2" in client.post(start)["Location"]
    assert "workerId=DEMOWORKER3" in client.post(start)["Location"]
    full = client.post(start, follow=True)
    assert "Every worker this HIT asked for has taken it" in full.text


def test_late_work_handed_back_on_the_demo_platform_is_told_it_never_counts(
    client, published, admin_user, django_capture_on_commit_callbacks
):
    """A demo worker whose claim lapsed while in-house annotators filled the task submits late
    and hands the HIT back: the message said it counts once a sync confirms it, though late
    work never counts."""
    from annotate.selectors.results import counted_assignments
    from annotate.services.assignments import assignments_expire
    from tests.factories import AnnotatorFactory, AssignmentFactory

    client.force_login(admin_user)
    hit = _hit(published)
    opened = client.post(reverse("crowd:demo-worker", args=[hit.pk]))
    task_url = client.get(opened["Location"])["Location"]
    task = client.get(task_url).text
    assignment = Assignment.objects.get(annotator__worker_id="DEMOWORKER1")
    assert assignments_expire(now=assignment.expires_at) >= 1
    for n in range(published.batch.project.assignments_per_task):
        AssignmentFactory(
            task=assignment.task,
            annotator=AnnotatorFactory(name=f"in-house {n}"),
            status=AssignmentStatus.SUBMITTED,
            submitted_at=timezone.now(),
        )
    done = client.post(task_url, _answers(task))
    assert 'id="late-note"' in done.text
    token = re.search(r'name="token" value="([^"]+)"', done.text).group(1)
    mine = {"assignmentId": assignment.platform_assignment_id, "token": token}
    taken = client.post(reverse("crowd:demo-external-submit"), mine)
    assert taken.status_code == 200 and "took assignment" in taken.text
    assert "never counts in the results" in taken.text
    assert "counts once a sync" not in taken.text
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("crowd:publication-action", args=[published.pk]), {"action": "sync"})
    assert not counted_assignments().filter(pk=assignment.pk).exists()


def test_the_publication_page_says_how_many_workers_each_hit_asked_for(client, study, admin_user):
    """A task with work from a self-hosted link before the batch went on the platform gets a
    HIT asking only for the assignments it still needed: the page says so, not the project's
    assignments per task (it said 0 / 0 / 3 beside "0 of 2 took it on the platform")."""
    started = _join(client, study, PROLIFIC_PID="P7")
    client.post(started["Location"], _answers(client.get(started["Location"]).text))
    done_task = Assignment.objects.get(annotator__worker_id="P7").task
    published = published_on_fake(study.batch)
    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[published.pk])).text
    for hit in published.hits.all():
        asked = 2 if hit.task_id == done_task.pk else 3
        assert hit.max_assignments == asked  # what the platform was asked for
        row = page.split(f"<code>{hit.hit_id}</code>")[1].split("</tr>")[0]
        assert f'<td class="hit-work">0 / 0 / {asked}</td>' in row
        assert f"0 of {asked} took it on the platform" in row


def test_no_demo_worker_takes_an_expired_hit(client, published, admin_user):
    """MTurk lets nobody accept an expired HIT: neither does the offline platform, and the
    publication page offers no "Do it as a worker" on one (a demo worker took it and worked)."""
    from annotate.crowd.services import review

    review.publication_expire(publication_id=published.pk, now=timezone.now(), user=admin_user)
    client.force_login(admin_user)
    page = client.get(reverse("crowd:publication", args=[published.pk])).text
    hit = _hit(published)
    assert page.count("expired: extend it to let workers take it") == published.hits.count()
    for each in published.hits.all():
        assert f'action="{reverse("crowd:demo-worker", args=[each.pk])}"' not in page
    answer = client.post(reverse("crowd:demo-worker", args=[hit.pk]), follow=True)
    assert "has expired: no worker can take it" in answer.text
    with pytest.raises(CrowdPlatformError, match="has expired"):
        FakePlatform().worker_accept(hit_id=hit.hit_id, worker_id="AWORKER9")
    assert not Assignment.objects.exists()


def test_a_blocked_demo_worker_is_not_sent_to_a_hit(client, published, admin_user):
    """MTurk keeps a blocked worker from the requester's HITs: "Do it as a worker" goes on to
    the next demo worker instead of opening a refusal as the blocked one."""
    from annotate.crowd.services import review

    client.force_login(admin_user)
    first, second = published.hits.order_by("id")[:2]
    client.get(client.post(reverse("crowd:demo-worker", args=[first.pk]))["Location"])
    worker = Annotator.objects.get(worker_id="DEMOWORKER1")
    review.worker_block(annotator_id=worker.pk, reason="garbage", user=admin_user)
    opened = client.post(reverse("crowd:demo-worker", args=[second.pk]))
    assert "workerId=DEMOWORKER2" in opened["Location"]
    assert client.get(opened["Location"]).status_code == 302  # to the task page, not refused
    with pytest.raises(CrowdPlatformError, match="blocked"):
        FakePlatform().worker_accept(hit_id=second.hit_id, worker_id="DEMOWORKER1")


def test_a_demo_worker_blocked_while_working_is_told_the_work_does_not_count(
    client, published, admin_user
):
    """Blocked while the task was open: the offline platform still takes the HIT (MTurk lets a
    blocked worker submit what they accepted before), and neither the done page nor the demo
    externalSubmit may say the work counts once a sync confirms it."""
    from annotate.crowd.services import review

    client.force_login(admin_user)
    opened = client.post(reverse("crowd:demo-worker", args=[_hit(published).pk]))
    task_url = client.get(opened["Location"])["Location"]
    task = client.get(task_url).text
    worker = Annotator.objects.get(worker_id="DEMOWORKER1")
    review.worker_block(annotator_id=worker.pk, reason="garbage", user=admin_user)
    done = client.post(task_url, _answers(task))
    assert 'id="blocked-note"' in done.text and 'id="confirmation-note"' not in done.text
    assignment = Assignment.objects.get(annotator=worker)
    assert assignment.status == AssignmentStatus.SUBMITTED  # kept
    token = re.search(r'name="token" value="([^"]+)"', done.text).group(1)
    taken = client.post(
        reverse("crowd:demo-external-submit"),
        {"assignmentId": assignment.platform_assignment_id, "token": token},
    )
    assert taken.status_code == 200 and "took assignment" in taken.text
    assert "counts in no result while the block lasts" in taken.text
    assert "counts once a sync" not in taken.text


def test_only_the_demo_platform_may_send_the_work_back_to_this_site(
    client, published, settings, admin_user
):
    page = _open(client, _hit(published), submit_to="/crowd/demo-platform")
    assert page.status_code == 302  # the fake platform's own page
    # A deployment on MTurk: a fake publication left from the demo offers no demo worker, and
    # this site is no place to send work to.
    settings.CROWD_BACKEND = "mturk"
    refused = _open(client, _hit(published), worker="AWORKER2", submit_to="/crowd/demo-platform")
    assert refused.status_code == 400 and "not a Mechanical Turk address" in refused.text
    client.force_login(admin_user)
    detail = client.get(reverse("crowd:publication", args=[published.pk]))
    assert detail.status_code == 200 and "demo-worker" not in detail.text
    assert client.post(reverse("crowd:demo-worker", args=[_hit(published).pk])).status_code == 404
    submit = client.post(reverse("crowd:demo-external-submit"), {"assignmentId": "x"})
    assert submit.status_code == 404


def test_the_publication_page_shows_how_full_each_demo_hit_is(client, published, admin_user):
    client.force_login(admin_user)
    hit = _hit(published)
    start = reverse("crowd:demo-worker", args=[hit.pk])
    task_url = client.get(client.post(start)["Location"])["Location"]
    client.post(task_url, _answers(client.get(task_url).text))  # DEMOWORKER1 submits
    client.get(client.post(start)["Location"])  # DEMOWORKER2 opens it and stops
    client.post(start)  # DEMOWORKER3 accepts it on the platform, never opens it
    page = client.get(reverse("crowd:publication", args=[published.pk]))
    row = page.text.split(f"<code>{hit.hit_id}</code>")[1].split("</tr>")[0]
    assert '<td class="hit-work">1 / 2 / 3</td>' in row  # submitted / opened here / asked
    assert "3 of 3 took it on the platform" in row and f'action="{start}"' not in row
    assert "every worker it asked for took it" in row
    other = published.hits.order_by("id")[1]
    assert f'action="{reverse("crowd:demo-worker", args=[other.pk])}"' in page.text
    assert "<title>" in page.text and " on Offline demo · crowd" in page.text


def test_an_admin_continues_a_demo_workers_unfinished_hit(client, published, admin_user):
    """An admin who leaves a demo worker's page keeps that worker's slot on the offline platform:
    the publication page links back to the same assignment until it is submitted there."""
    client.force_login(admin_user)
    hit = _hit(published)
    start = reverse("crowd:demo-worker", args=[hit.pk])
    client.get(client.post(start)["Location"])  # DEMOWORKER1 opens the task and leaves
    client.post(start)  # DEMOWORKER2 accepts it on the platform, never opens our page
    _open(client, hit, worker="AWORKER9")  # not a demo worker: the admin cannot act as them
    detail = reverse("crowd:publication", args=[published.pk])
    section = client.get(detail).text.split('id="demo-unfinished"')[1].split("</section>")[0]
    continues = dict(re.findall(r'<a href="([^"]+)">Continue as (DEMOWORKER\d)</a>', section))
    assert sorted(continues.values()) == ["DEMOWORKER1", "DEMOWORKER2"]
    assert "AWORKER9" not in section

    first = {worker: url.replace("&amp;", "&") for url, worker in continues.items()}
    task_url = client.get(first["DEMOWORKER1"])["Location"]
    assert task_url.startswith("/crowd/work/")
    held = Assignment.objects.get(annotator__worker_id="DEMOWORKER1")
    assert client.get(task_url).status_code == 200  # the task page, where it was left
    done = client.post(task_url, _answers(client.get(task_url).text))
    assert Assignment.objects.filter(annotator__worker_id="DEMOWORKER1").count() == 1
    token = re.search(r'name="token" value="([^"]+)"', done.text).group(1)
    client.post(
        reverse("crowd:demo-external-submit"),
        {"assignmentId": held.platform_assignment_id, "token": token},
    )
    assert FakePlatform.store.assignments[held.platform_assignment_id].status == "Submitted"
    section = client.get(detail).text.split('id="demo-unfinished"')[1].split("</section>")[0]
    assert "Continue as DEMOWORKER2" in section and "DEMOWORKER1" not in section


def test_a_demo_worker_who_did_the_instruction_elsewhere_is_not_the_one_sent_again(
    client, published, admin_user
):
    """A second study of the same instructions on the offline platform: "Do it as a worker"
    took the HIT as DEMOWORKER1 again, who had done that instruction in the first study, so the
    page refused ("already worked on this task") and the platform slot stayed taken."""
    from annotate.services.projects import InstructionSelection, project_create

    client.force_login(admin_user)
    hit = _hit(published)
    task_url = client.get(client.post(reverse("crowd:demo-worker", args=[hit.pk]))["Location"])
    client.post(task_url["Location"], _answers(client.get(task_url["Location"]).text))
    project = published.batch.project
    again = project_create(
        name="same instructions again",
        benchmark=project.benchmark,
        systems=list(project.systems.all()),
        selection=InstructionSelection(),
    )
    second = published_on_fake(again.batches.get())
    same = second.hits.get(task__instruction=hit.task.instruction)
    opened = client.post(reverse("crowd:demo-worker", args=[same.pk]))
    assert "workerId=DEMOWORKER2" in opened["Location"]
    assert client.get(client.get(opened["Location"])["Location"]).status_code == 200


def test_a_demo_worker_our_page_refuses_gives_the_hit_back_on_the_offline_platform(
    client, published, admin_user
):
    """In-house annotators hold every slot of a published task: "Do it as a worker" took the
    HIT as DEMOWORKER1, our page refused them (409, "please return the HIT"), and the offline
    platform kept their accepted assignment for good: the HIT counted one more worker than it
    had, listed a "Continue as DEMOWORKER1" that is refused again, and once its
    MaxAssignments were used up that way offered no demo worker while the task needed one."""
    from tests.factories import AnnotatorFactory, AssignmentFactory

    client.force_login(admin_user)
    hit = _hit(published)
    in_house = [
        AssignmentFactory(task=hit.task, annotator=AnnotatorFactory(name=f"in-house {n}"))
        for n in range(hit.max_assignments)
    ]
    start = reverse("crowd:demo-worker", args=[hit.pk])
    for worker in ("DEMOWORKER1", "DEMOWORKER2", "DEMOWORKER3"):
        opened = client.post(start)
        assert f"workerId={worker}" in opened["Location"]  # one refused is not sent again
        refused = client.get(opened["Location"])
        assert refused.status_code == 409 and "please return the HIT" in refused.text

    assert FakePlatform().taken_per_hit().get(hit.hit_id, 0) == 0
    page = client.get(reverse("crowd:publication", args=[published.pk])).text
    row = page.split(f"<code>{hit.hit_id}</code>")[1].split("</tr>")[0]
    assert "0 of 3 took it on the platform" in row and f'action="{start}"' in row
    assert 'id="demo-unfinished"' not in page
    assert not Assignment.objects.filter(annotator__worker_id__startswith="DEMOWORKER").exists()

    # An in-house annotator gives their task back: a demo worker takes the slot and works.
    in_house[0].status = AssignmentStatus.RETURNED
    in_house[0].save()
    opened = client.post(start)
    assert "workerId=DEMOWORKER4" in opened["Location"]
    task_url = client.get(opened["Location"])["Location"]
    assert client.get(task_url).status_code == 200
    assert FakePlatform().taken_per_hit()[hit.hit_id] == 1


def test_the_offline_platform_returns_only_the_named_workers_accepted_assignment(published):
    hit = _hit(published)
    platform = FakePlatform()
    accepted = platform.worker_accept(hit_id=hit.hit_id, worker_id="DEMOWORKER1")
    submitted = platform.worker_accept(hit_id=hit.hit_id, worker_id="DEMOWORKER2")
    platform.worker_submit(assignment_id=submitted)
    other = published.hits.order_by("id")[1].hit_id
    assert not platform.worker_return(hit_id=hit.hit_id, assignment_id=accepted, worker_id="X")
    assert not platform.worker_return(hit_id=other, assignment_id=accepted, worker_id="DEMOWORKER1")
    assert not platform.worker_return(
        hit_id=hit.hit_id, assignment_id=submitted, worker_id="DEMOWORKER2"
    )
    assert platform.taken_per_hit()[hit.hit_id] == 2
    assert platform.worker_return(
        hit_id=hit.hit_id, assignment_id=accepted, worker_id="DEMOWORKER1"
    )
    assert platform.taken_per_hit()[hit.hit_id] == 1
    assert [a.assignment_id for a in platform.assignments_list(hit_id=hit.hit_id)] == [submitted]
    with pytest.raises(Exception, match="does not exist"):
        platform.assignment_get(assignment_id=accepted)


def test_scores_sent_twice_lead_to_the_questions_not_to_the_completion_code(client, study):
    # A double click on "Save scores and continue": the second send finds the scores stored.
    study.batch.project.mode = ProjectMode.BOTH
    study.batch.project.save()
    started = _join(client, study, PROLIFIC_PID="P5")
    scores = {"r1_score": "4", "r2_score": "2"}
    first = client.post(started["Location"], scores)
    again = client.post(started["Location"], scores)
    assert first.status_code == again.status_code == 302
    assert again["Location"] == started["Location"]
    page = client.get(again["Location"])
    assert "Step 2 of 2" in page.text and "C0DE42" not in page.text
    assert Assignment.objects.get(annotator__worker_id="P5").submitted_at is None


@pytest.mark.parametrize(("platform_minutes", "held_minutes"), [(120, 120), (30, 60)])
def test_a_claim_lasts_as_long_as_the_platform_gives_the_worker(
    client, crowd_batch, platform_minutes, held_minutes
):
    """A HIT published with a 2-hour assignment duration on a project of 60 minutes: the claim
    expired after an hour while MTurk still let the worker work, freeing the slot under them
    (their submit then came late). The claim now lasts the longer of the two."""
    from annotate.services.assignments import assignments_expire

    assert crowd_batch.project.allotted_minutes == 60
    _, opened = _published_and_opened(
        client, crowd_batch, assignment_duration_seconds=platform_minutes * 60
    )
    assert opened.status_code == 302
    claim = Assignment.objects.get(annotator__worker_id="AWORKER1")
    assert claim.expires_at - claim.claimed_at == timedelta(minutes=held_minutes)
    assert assignments_expire(now=claim.claimed_at + timedelta(minutes=held_minutes - 1)) == 0
    assert assignments_expire(now=claim.claimed_at + timedelta(minutes=held_minutes)) == 1


def test_a_hit_returned_and_accepted_again_holds_its_claim_for_the_new_accepts_duration(
    client, crowd_batch
):
    """A worker who returns the HIT unfinished and accepts it again gets the whole assignment
    duration anew from MTurk; their claim kept the first accept's end, and expired under them."""
    hit, opened = _published_and_opened(client, crowd_batch, assignment_duration_seconds=7200)
    assert opened.status_code == 302
    earlier = timezone.now() - timedelta(minutes=100)  # the first accept, 100 minutes ago
    Assignment.objects.update(claimed_at=earlier, expires_at=earlier + timedelta(hours=2))
    before = timezone.now()
    assert _open(client, hit, assignment_id="RE-ACCEPTED").status_code == 302
    claim = Assignment.objects.get(annotator__worker_id="AWORKER1")
    assert claim.platform_assignment_id == "RE-ACCEPTED"
    assert claim.expires_at >= before + timedelta(hours=2)


def test_a_lapsed_claim_taken_up_again_keeps_the_scores_saved_on_it(client, crowd_batch):
    """A worker saved their direct scores, returned the HIT and accepted it again in another
    browser: once the earlier claim lapsed, the new accept takes it up with the scores saved
    (it was refused as a task done already)."""
    from django.test import Client

    from annotate.services.assignments import assignments_expire

    crowd_batch.project.mode = ProjectMode.BOTH
    crowd_batch.project.save()
    hit, opened = _published_and_opened(client, crowd_batch)
    saved = client.post(opened["Location"], {"r1_score": "4", "r2_score": "2"})
    assert saved.status_code == 302
    claim = Assignment.objects.get(annotator__worker_id="AWORKER1")
    assert assignments_expire(now=claim.expires_at) == 1

    again = _open(Client(), hit, assignment_id="ACCEPTED-AGAIN")
    assert again.status_code == 302
    claim.refresh_from_db()
    assert claim.status == AssignmentStatus.CLAIMED
    assert claim.direct_scores and claim.platform_assignment_id == "ACCEPTED-AGAIN"
    assert "Step 2 of 2" in Client().get(again["Location"]).text


def _restart(monkeypatch):
    """A new server process: the offline platform's module loaded afresh (nothing of the old
    process's memory), as the pages and the platform registry then see it."""
    from annotate.crowd import fake, views, worker_views

    fresh = importlib.reload(fake)
    for module in (views, worker_views):
        monkeypatch.setattr(module, "FakePlatform", fresh.FakePlatform)
    return fresh.FakePlatform


def test_a_demo_hit_and_its_worker_outlive_a_restart_of_the_server(
    client, published, admin_user, monkeypatch, django_capture_on_commit_callbacks
):
    """The offline platform kept its HITs in memory: after `make run` again, "Do it as a
    worker" said "Hit ... does not exist" and the demo worker's claim stayed in progress."""
    client.force_login(admin_user)
    hit = _hit(published)
    start = reverse("crowd:demo-worker", args=[hit.pk])
    client.get(client.post(start)["Location"])  # DEMOWORKER1 opens the task and leaves
    platform = _restart(monkeypatch)
    assert platform().hit_get(hit_id=hit.hit_id).max_assignments == 3
    detail = reverse("crowd:publication", args=[published.pk])
    section = client.get(detail).text.split('id="demo-unfinished"')[1].split("</section>")[0]
    (url,) = re.findall(r'<a href="([^"]+)">Continue as DEMOWORKER1</a>', section)
    task_url = client.get(url.replace("&amp;", "&"))["Location"]
    done = client.post(task_url, _answers(client.get(task_url).text))
    held = Assignment.objects.get(annotator__worker_id="DEMOWORKER1")
    token = re.search(r'name="token" value="([^"]+)"', done.text).group(1)
    submit = {"assignmentId": held.platform_assignment_id, "token": token}
    handed = client.post(reverse("crowd:demo-external-submit"), submit)
    assert handed.status_code == 200 and "took assignment" in handed.text
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("crowd:publication-action", args=[published.pk]), {"action": "sync"})
    held.refresh_from_db()
    assert held.platform_record.status == "Submitted"  # confirmed by the platform
    # The platform still knows who took the HIT: the next demo worker is a new one.
    assert "workerId=DEMOWORKER2" in client.post(start)["Location"]


def test_work_submitted_late_is_not_taken_up_again_by_a_new_accept(client, crowd_batch):
    """A worker whose claim lapsed and whose slot another worker took submits late: their work
    is kept, not counted. Accepting the HIT again took the late work up as a live claim again
    (out of the review page, where it can no longer be rejected, while its done page hands it
    back to the platform under the new assignment id); it is a task done, as before."""
    from django.test import Client

    from annotate.services.assignments import assignments_expire

    crowd_batch.project.assignments_per_task = 1
    crowd_batch.project.save()
    hit, opened = _published_and_opened(client, crowd_batch)
    claim = Assignment.objects.get(annotator__worker_id="AWORKER1")
    assert assignments_expire(now=claim.expires_at) == 1
    taken = _open(Client(), hit, worker="AWORKER2", assignment_id="OTHER-ACCEPT")
    assert taken.status_code == 302  # takes the slot
    client.post(opened["Location"], _answers(client.get(opened["Location"]).text))
    claim.refresh_from_db()
    assert claim.is_late and claim.status == AssignmentStatus.EXPIRED

    again = _open(Client(), hit, assignment_id="ACCEPTED-AGAIN")
    assert again.status_code == 409
    assert "already done this task" in again.text
    claim.refresh_from_db()
    assert claim.status == AssignmentStatus.EXPIRED
    assert claim.platform_assignment_id != "ACCEPTED-AGAIN"


def test_the_done_page_tells_a_late_worker_their_answers_do_not_count(client, crowd_batch):
    """Work submitted after the claim lapsed and another worker took the slot is kept, not
    counted: the page that hands it to the platform must not promise it counts once confirmed."""
    from django.test import Client

    from annotate.services.assignments import assignments_expire

    crowd_batch.project.assignments_per_task = 1
    crowd_batch.project.save()
    hit, opened = _published_and_opened(client, crowd_batch)
    claim = Assignment.objects.get(annotator__worker_id="AWORKER1")
    assignments_expire(now=claim.expires_at)
    assert _open(Client(), hit, worker="AWORKER2", assignment_id="OTHER-ACCEPT").status_code == 302

    done = client.post(opened["Location"], _answers(client.get(opened["Location"]).text))

    assert done.status_code == 200
    assert 'id="late-note"' in done.text and "do not count" in done.text
    assert "count once Mechanical Turk confirms" not in done.text
    assert 'id="external-submit"' in done.text  # still handed back to the platform


def test_the_done_page_of_work_in_time_says_it_counts_once_confirmed(client, published):
    opened = _open(client, _hit(published))
    done = client.post(opened["Location"], _answers(client.get(opened["Location"]).text))
    assert "count once Mechanical Turk confirms" in done.text
    assert 'id="late-note"' not in done.text


def test_no_worker_page_may_be_kept_by_a_browser_or_proxy(client, published, study):
    """On a shared computer the back button (or a proxy) must not show the next person a
    worker's task and answers: every worker page says Cache-Control: no-store."""
    opened = _open(client, _hit(published))
    task = client.get(opened["Location"])
    refused = client.post(opened["Location"], {"r1_q1": "yes"})  # the answers given, shown again
    started = _join(client, study, PROLIFIC_PID="P1")
    done = client.post(started["Location"], _answers(client.get(started["Location"]).text))
    assert refused.status_code == 400 and done.status_code == 200
    for page in (opened, task, refused, started, done):
        assert "no-store" in page["Cache-Control"] and "private" in page["Cache-Control"]


def test_a_demo_hit_of_a_closed_batch_takes_no_worker_and_keeps_its_slot(
    client, published, admin_user
):
    """A batch deactivated while its demo HITs are open: "Do it as a worker" opens the page
    that asks to return the HIT, nothing is claimed, and the offline platform gets the
    assignment back (nobody there presses Return), so the HIT is not shown as taken."""
    published.target.active = False
    published.target.save()
    client.force_login(admin_user)
    hit = _hit(published)
    opened = client.post(reverse("crowd:demo-worker", args=[hit.pk]))
    refused = client.get(opened["Location"])
    assert refused.status_code == 410 and "it takes no new workers" in refused.text
    assert not Assignment.objects.exists()
    page = client.get(reverse("crowd:publication", args=[published.pk])).text
    row = page.split(f"<code>{hit.hit_id}</code>")[1].split("</tr>")[0]
    assert '<td class="hit-work">0 / 0 / ' in row and '">0 of ' in row  # 0 of N took it


def test_a_blocked_participant_who_returns_a_task_is_given_no_code(client, study):
    """The page after a return gave the code for the tasks submitted; to a participant blocked
    since, it says their work does not count and gives none, as the link does."""
    from annotate.crowd.services import review
    from annotate.roles import ADMIN
    from tests.factories import UserFactory

    first = _join(client, study, PROLIFIC_PID="P8")
    client.post(first["Location"], _answers(client.get(first["Location"]).text))
    second = _join(client, study, PROLIFIC_PID="P8")
    assert second.status_code == 302 and second["Location"] != first["Location"]
    worker = Annotator.objects.get(worker_id="P8")
    admin = UserFactory(username="return-admin", roles=[ADMIN])
    review.worker_block(annotator_id=worker.pk, reason="all UNKNOWN", user=admin)
    token = second["Location"].rstrip("/").rsplit("/", 1)[-1]
    client.post(reverse("crowd:work-return", args=[token]))
    returned = client.get(second["Location"])
    assert 'id="code-withheld"' in returned.text and "C0DE42" not in returned.text
