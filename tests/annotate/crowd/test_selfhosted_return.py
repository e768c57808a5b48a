"""A self-hosted participant hands a task back ("Return this task"), as an MTurk worker returns
a HIT: the slot is free at once for another participant, nothing they gave on it counts, and
the page says what comes next."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from annotate.crowd.services import publishing
from annotate.crowd.services.publishing import PublishSettings
from annotate.crowd.services.workers import assignment_token
from annotate.models import Assignment, AssignmentStatus, DirectScore, Label, ProjectMode
from annotate.selectors.results import counted_assignment_q
from annotate.services.assignments import assignments_expire
from tests.annotate.crowd.conftest import crowd_assignment, fake_publication
from tests.factories import project_with_tasks

pytestmark = pytest.mark.django_db


def _link(*, instructions: int, assignments_per_task: int = 1, **fields):
    project = project_with_tasks(
        instructions=instructions,
        systems=2,
        questions=1,
        assignments_per_task=assignments_per_task,
        **fields,
    )
    return publishing.publication_create(
        batch=project.batches.get(),
        platform_name="selfhosted",
        chosen=PublishSettings(title="A study", description="d", completion_code="C0DE42"),
        base_url="https://annotate.example.org",
    )


def _start(client, link, participant):
    started = client.post(
        reverse("crowd:selfhosted-join", args=[link.link_token]), {"PROLIFIC_PID": participant}
    )
    assert started.status_code == 302, started.content
    return started["Location"]


def _return_url(page_html: str) -> str:
    return re.search(r'<form method="post" action="([^"]+)" class="return-form"', page_html)[1]


def _answers(page_html: str, value: str = "yes") -> dict[str, str]:
    return {name: value for name in set(re.findall(r'name="(r\d+_q\d+)"', page_html))}


def test_a_returned_task_goes_to_the_next_participant_at_once_and_its_answers_never_count(
    client,
):
    link = _link(instructions=1)
    task_url = _start(client, link, "P1")
    page = client.get(task_url).text
    assert 'data-confirm="Return this task?' in page
    answers = _answers(page)
    # The only task's only slot is P1's: nobody else gets it while they hold it.
    refused = client.post(
        reverse("crowd:selfhosted-join", args=[link.link_token]), {"PROLIFIC_PID": "P2"}
    )
    assert refused.status_code == 404

    returned = client.post(_return_url(page))
    assert returned.status_code == 302 and returned["Location"] == task_url
    held = Assignment.objects.get(annotator__worker_id="P1")
    assert held.status == AssignmentStatus.RETURNED
    after = client.get(task_url)
    assert "You returned this task." in after.text
    assert 'id="no-code"' in after.text and "C0DE42" not in after.text
    assert 'class="return-form"' not in after.text

    # The slot is free at once (no wait for the claim's time to run out).
    p2_url = _start(client, link, "P2")
    assert Assignment.objects.get(annotator__worker_id="P2").task_id == held.task_id
    # P1's answers, sent after the return, are refused and nothing of theirs counts.
    late = client.post(task_url, answers)
    assert late.status_code == 400 and "returned" in late.text
    assert not Label.objects.filter(annotator=held.annotator).exists()
    assert not Assignment.objects.filter(counted_assignment_q(), pk=held.pk).exists()
    # P2's work on the same task is taken and counts.
    assert client.post(p2_url, _answers(client.get(p2_url).text)).status_code == 200
    assert Label.objects.filter(annotator__worker_id="P2").count() == 2


def test_after_a_return_the_participant_is_offered_another_task_never_the_returned_one(client):
    link = _link(instructions=2)
    first_url = _start(client, link, "P1")
    client.post(_return_url(client.get(first_url).text))
    page = client.get(first_url).text
    assert 'id="next-task"' in page and 'value="P1"' in page
    next_url = _start(client, link, "P1")  # the page's "Do another task"
    assert next_url != first_url
    tasks = dict(Assignment.objects.filter(annotator__worker_id="P1").values_list("status", "task"))
    assert set(tasks) == {AssignmentStatus.RETURNED, AssignmentStatus.CLAIMED}
    assert tasks[AssignmentStatus.RETURNED] != tasks[AssignmentStatus.CLAIMED]


def test_a_participant_who_submitted_a_task_gets_the_completion_code_after_returning_the_last(
    client,
):
    link = _link(instructions=2)
    done_url = _start(client, link, "P1")
    assert client.post(done_url, _answers(client.get(done_url).text)).status_code == 200
    last_url = _start(client, link, "P1")
    client.post(_return_url(client.get(last_url).text))
    page = client.get(last_url).text
    assert 'id="completion-code">C0DE42<' in page and 'id="next-task"' not in page
    # Their submitted work is untouched.
    assert Assignment.objects.filter(
        annotator__worker_id="P1", status=AssignmentStatus.SUBMITTED
    ).exists()


def test_returning_twice_is_one_return_and_submitted_work_cannot_be_returned(client):
    link = _link(instructions=2, assignments_per_task=2)
    url = _start(client, link, "P1")
    page = client.get(url).text
    return_url = _return_url(page)
    assert client.post(return_url).status_code == 302
    assert client.post(return_url).status_code == 302  # a resent form
    assert Assignment.objects.get(annotator__worker_id="P1").status == AssignmentStatus.RETURNED

    other = _start(client, link, "P2")
    other_page = client.get(other).text
    other_return = _return_url(other_page)
    assert client.post(other, _answers(other_page)).status_code == 200
    refused = client.post(other_return)
    assert refused.status_code == 409 and "cannot be returned" in refused.text
    kept = Assignment.objects.get(annotator__worker_id="P2")
    assert kept.status == AssignmentStatus.SUBMITTED
    assert Label.objects.filter(assignment=kept).count() == 2


def test_a_both_projects_first_step_scores_do_not_count_once_the_task_is_returned(client):
    link = _link(instructions=1, mode=ProjectMode.BOTH)
    url = _start(client, link, "P1")
    page = client.get(url).text
    scores = {name: "4" for name in set(re.findall(r'name="(r\d+_score)"', page))}
    assert scores and client.post(url, scores).status_code == 302  # on to the questions
    client.post(_return_url(client.get(url).text))
    assert not DirectScore.objects.filter(annotator__worker_id="P1").exists()
    assert _start(client, link, "P2")  # the slot is free


def test_a_platform_worker_returns_the_hit_on_the_platform_not_here(client, crowd_batch):
    fake_publication(crowd_batch)
    assignment = crowd_assignment(task=crowd_batch.tasks.first(), platform="fake", worker="W1")
    assignment.status, assignment.submitted_at = AssignmentStatus.CLAIMED, None
    assignment.save()
    token = assignment_token(assignment=assignment, submit_to="https://www.mturk.com")
    page = client.get(reverse("crowd:work-task", args=[token])).text
    assert 'class="return-form"' not in page
    refused = client.post(reverse("crowd:work-return", args=[token]))
    assert refused.status_code == 400 and "Return the HIT on Mechanical Turk" in refused.text
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.CLAIMED


def test_a_forged_token_returns_nothing(client):
    link = _link(instructions=1)
    url = _start(client, link, "P1")
    token = url.rstrip("/").rsplit("/", 1)[1]
    for bad in ("forged", token[:-1] + ("A" if token[-1] != "A" else "B")):
        assert client.post(reverse("crowd:work-return", args=[bad])).status_code == 404
    assert Assignment.objects.get().status == AssignmentStatus.CLAIMED


def test_a_claim_whose_time_ran_out_can_still_be_returned_and_then_takes_no_late_answers(client):
    link = _link(instructions=1)
    url = _start(client, link, "P1")
    page = client.get(url).text
    held = Assignment.objects.get()
    assignments_expire(now=held.expires_at + timedelta(seconds=1))
    page = client.get(url).text
    assert client.post(_return_url(page)).status_code == 302
    held.refresh_from_db()
    assert held.status == AssignmentStatus.RETURNED
    late = client.post(url, _answers(page))
    assert late.status_code == 400
    assert not Label.objects.exists()
