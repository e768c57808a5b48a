"""Twenty annotators claiming and submitting at once on PostgreSQL (row locks, skip_locked)."""

import os
from collections import Counter

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from rest_framework.test import APIClient

from annotate.models import Assignment, AssignmentStatus, Label
from annotate.roles import ANNOTATOR, ROLES
from tests.factories import UserFactory, project_with_tasks
from tests.threads import at_once

pytestmark = [
    pytest.mark.services,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="needs PostgreSQL (DATABASE_URL=postgres://...): SQLite serialises every writer",
    ),
]

CLIENTS = 20
TASKS = 12
PER_TASK = 3
SYSTEMS = 3
QUESTIONS = 2


def logged_in(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def work_until_done(client, project_id, accepted) -> None:
    while True:
        claimed = client.post(reverse("annotate-api:claim", args=[project_id]))
        if claimed.status_code == 404:
            return
        assert claimed.status_code == 201, claimed.content
        body = claimed.json()
        answers = {name: "yes" for name in body["fields"]}
        url = reverse("annotate-api:submit", args=[body["assignment"]])
        submitted = client.post(url, {"answers": answers}, format="json")
        assert submitted.status_code == 200, submitted.content
        accepted.append((body["assignment"], submitted.json()["outcome"]))


def test_concurrent_claims_never_overfill_a_task_and_lose_nothing():
    for name in ROLES:
        Group.objects.get_or_create(name=name)
    project = project_with_tasks(
        instructions=TASKS, systems=SYSTEMS, questions=QUESTIONS, assignments_per_task=PER_TASK
    )
    clients = [
        logged_in(UserFactory(username=f"worker{i}", roles=[ANNOTATOR])) for i in range(CLIENTS)
    ]
    accepted = []
    outcomes = at_once(
        *(lambda c=client: work_until_done(c, project.id, accepted) for client in clients),
        timeout=120,
    )
    errors = [outcome for outcome in outcomes if isinstance(outcome, Exception)]
    assert not errors, errors[0]

    per_task = Counter(
        Assignment.objects.filter(
            task__batch__project=project,
            status__in=[AssignmentStatus.CLAIMED, AssignmentStatus.SUBMITTED],
        ).values_list("task_id", flat=True)
    )
    assert len(per_task) == TASKS and set(per_task.values()) == {PER_TASK}
    pairs = list(Assignment.objects.values_list("task__instruction_id", "annotator_id"))
    assert len(pairs) == len(set(pairs))
    assert len(accepted) == TASKS * PER_TASK
    assert {outcome for _, outcome in accepted} == {"accepted"}
    for assignment_id, _ in accepted:
        assignment = Assignment.objects.get(pk=assignment_id)
        assert assignment.status == AssignmentStatus.SUBMITTED
        assert Label.objects.filter(assignment=assignment).count() == SYSTEMS * QUESTIONS
    assert Label.objects.count() == TASKS * PER_TASK * SYSTEMS * QUESTIONS


def start_next(session_cookie, url, *, page) -> tuple:
    client = APIClient()
    client.cookies["sessionid"] = session_cookie
    answer = client.post(url)
    if page:
        return answer.status_code, answer.get("Location")
    return answer.status_code, answer.json().get("assignment")


@pytest.mark.parametrize("page", [True, False], ids=["page", "api"])
def test_twenty_parallel_start_next_from_one_session_give_one_live_claim(page):
    for name in ROLES:
        Group.objects.get_or_create(name=name)
    project = project_with_tasks(instructions=TASKS, systems=SYSTEMS, questions=QUESTIONS)
    user = UserFactory(username="impatient", roles=[ANNOTATOR])
    session = APIClient()
    session.force_login(user)
    cookie = session.cookies["sessionid"].value
    if page:
        url = reverse("work:start-next", args=[project.id])
    else:
        url = reverse("annotate-api:claim", args=[project.id])
    results = at_once(
        *(lambda: start_next(cookie, url, page=page) for _ in range(CLIENTS)), timeout=120
    )
    assert all(isinstance(result, tuple) for result in results), results
    statuses = sorted(status for status, _ in results)
    if page:
        assert statuses == [302] * CLIENTS, results
    else:  # one request made the claim (201), the others were answered with it (200)
        assert statuses == [200] * (CLIENTS - 1) + [201], results
    assert len({where for _, where in results}) == 1
    live = Assignment.objects.filter(annotator__user=user, status=AssignmentStatus.CLAIMED)
    assert live.count() == 1
