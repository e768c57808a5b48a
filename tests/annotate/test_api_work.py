import json

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotate.models import Label, Project
from annotate.roles import ANNOTATOR
from tests.factories import UserFactory, benchmark_with_responses, project_with_tasks

pytestmark = pytest.mark.django_db


def api_for(user, *, csrf=False):
    client = APIClient(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def test_claim_and_submit_through_the_api(annotator_user):
    project = project_with_tasks(instructions=1, systems=3, questions=2)
    client = api_for(annotator_user)
    claimed = client.post(reverse("annotate-api:claim", args=[project.id]))
    assert claimed.status_code == 201
    body = claimed.json()
    assert [item["label"] for item in body["responses"]] == ["System A", "System B", "System C"]
    for item in body["responses"]:
        assert set(item) == {"position", "label", "text", "score_field", "questions"}
    assert "system" not in json.dumps(sorted(body))
    answers = {name: "yes" for name in body["fields"]}
    url = reverse("annotate-api:submit", args=[body["assignment"]])
    missing = client.post(url, {"answers": {"r1_q1": "yes"}}, format="json")
    assert missing.status_code == 400 and "r3_q2" in missing.json()["missing"]
    done = client.post(url, {"answers": answers, "active_seconds": 5}, format="json")
    assert done.status_code == 200 and done.json()["outcome"] == "accepted"
    assert client.post(url, {"answers": answers}, format="json").json()["outcome"] == "unchanged"
    changed = client.post(url, {"answers": {**answers, "r1_q1": "no"}}, format="json")
    assert changed.status_code == 409
    assert Label.objects.count() == 6


def test_claiming_again_answers_200_with_the_live_claim_and_201_only_for_a_new_one(
    annotator_user,
):
    project = project_with_tasks(instructions=2, systems=2, questions=1)
    client = api_for(annotator_user)
    url = reverse("annotate-api:claim", args=[project.id])
    first = client.post(url)
    again = client.post(url)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()  # the same live assignment, nothing new claimed
    body = first.json()
    answers = {name: "yes" for name in body["fields"]}
    submit = reverse("annotate-api:submit", args=[body["assignment"]])
    assert client.post(submit, {"answers": answers}, format="json").status_code == 200
    following = client.post(url)
    assert following.status_code == 201 and following.json()["assignment"] != body["assignment"]


def test_api_needs_csrf_with_a_session(annotator_user):
    project = project_with_tasks(instructions=1)
    client = api_for(annotator_user, csrf=True)
    assert client.post(reverse("annotate-api:claim", args=[project.id])).status_code == 403


def test_other_annotators_assignment_is_404(annotator_user):
    project = project_with_tasks(instructions=1)
    other = api_for(UserFactory(username="someone", roles=[ANNOTATOR]))
    assignment_id = other.post(reverse("annotate-api:claim", args=[project.id])).json()[
        "assignment"
    ]
    client = api_for(annotator_user)
    assert client.get(reverse("annotate-api:assignment", args=[assignment_id])).status_code == 404
    submit = client.post(
        reverse("annotate-api:submit", args=[assignment_id]), {"answers": {}}, format="json"
    )
    assert submit.status_code == 404


@pytest.mark.parametrize(
    "name", ["annotate-api:assignment", "annotate-api:submit", "annotate-api:return"]
)
def test_an_assignment_id_no_column_holds_is_404(annotator_user, name):
    client = api_for(annotator_user)
    url = reverse(name, args=[10**20])
    answer = client.get(url) if name == "annotate-api:assignment" else client.post(url, {})
    assert answer.status_code == 404 and answer.json() == {"detail": "No such assignment."}


def test_no_work_left_is_404_with_a_message(annotator_user):
    project = project_with_tasks(instructions=1, assignments_per_task=1)
    api_for(UserFactory(username="first", roles=[ANNOTATOR])).post(
        reverse("annotate-api:claim", args=[project.id])
    )
    answer = api_for(annotator_user).post(reverse("annotate-api:claim", args=[project.id]))
    assert answer.status_code == 404 and "No task left" in answer.json()["detail"]


def test_only_admins_create_projects_and_batches(admin_user, researcher):
    benchmark, systems = benchmark_with_responses(instructions=3, systems=2)
    ids = list(benchmark.instructions.values_list("external_id", flat=True))
    payload = {
        "name": "api-project",
        "benchmark": benchmark.id,
        "systems": [system.id for system in systems],
        "selection": "ids",
        "external_ids": ids[:2],
        "mode": "both",
        "researchers": [researcher.id],
    }
    url = reverse("annotate-api:project-create")
    assert api_for(researcher).post(url, payload, format="json").status_code == 403
    created = api_for(admin_user).post(url, payload, format="json")
    assert created.status_code == 201
    project = Project.objects.get(pk=created.json()["id"])
    assert project.mode == "both" and project.batches.get().tasks.count() == 2
    bad = api_for(admin_user).post(
        url, {**payload, "name": "x", "external_ids": ["nope"]}, format="json"
    )
    assert bad.status_code == 400 and "nope" in bad.json()["detail"]
    batch_url = reverse("annotate-api:batch-create", args=[project.id])
    assert api_for(researcher).post(batch_url, {"name": "B2"}, format="json").status_code == 403
    batch = api_for(admin_user).post(batch_url, {"name": "B2"}, format="json")
    assert batch.status_code == 201 and batch.json()["tasks"] == 1


def test_a_refused_project_or_batch_names_the_field_at_fault(admin_user):
    benchmark, systems = benchmark_with_responses(instructions=2, systems=1)
    payload = {"name": "p", "benchmark": benchmark.id, "systems": [systems[0].id]}
    client, url = api_for(admin_user), reverse("annotate-api:project-create")
    project_id = client.post(url, payload, format="json").json()["id"]
    for changes, field in [
        ({}, "name"),  # taken
        ({"name": "q", "selection": "ids", "external_ids": ["nope"]}, "external_ids"),
        ({"name": "q", "selection": "random"}, "per_subset"),
        ({"name": "q", "systems": []}, "systems"),
    ]:
        refused = client.post(url, {**payload, **changes}, format="json")
        assert refused.status_code == 400 and refused.json()["field"] == field, changes
    batch_url = reverse("annotate-api:batch-create", args=[project_id])
    refused = client.post(batch_url, {"name": "Batch 1"}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "name"
    assert Project.objects.count() == 1


def test_progress_for_researchers_of_the_project(researcher, annotator_user):
    project = project_with_tasks(instructions=2, systems=1, questions=1, assignments_per_task=1)
    client = api_for(annotator_user)
    body = client.post(reverse("annotate-api:claim", args=[project.id])).json()
    client.post(
        reverse("annotate-api:submit", args=[body["assignment"]]),
        {"answers": {"r1_q1": "yes"}},
        format="json",
    )
    url = reverse("annotate-api:project-progress", args=[project.id])
    assert api_for(researcher).get(url).status_code == 404
    project.researchers.add(researcher)
    progress = api_for(researcher).get(url).json()
    assert progress["tasks_total"] == 2 and progress["tasks_done"] == 1
    assert progress["per_annotator"][0]["annotator"] == annotator_user.username
    assert api_for(annotator_user).get(url).status_code == 404


def test_work_endpoints_are_in_the_api_schema(researcher):
    schema = api_for(researcher).get(reverse("api-schema"))
    assert schema.status_code == 200
    text = schema.content.decode()
    assert "/api/annotate/assignments/{assignment_id}/submit/" in text
    assert "SubmitInput" in text


def test_researchers_download_labels_with_late_submissions_marked(client, researcher):
    from datetime import timedelta

    from django.utils import timezone

    from annotate.services.assignments import assignment_claim_next
    from annotate.services.submissions import Outcome, assignment_submit
    from tests.factories import AnnotatorFactory

    project = project_with_tasks(instructions=1, systems=2, questions=1, assignments_per_task=1)
    now = timezone.now()
    slow = assignment_claim_next(annotator=AnnotatorFactory(name="slow"), project=project, now=now)
    later = slow.expires_at + timedelta(minutes=1)
    quick = assignment_claim_next(
        annotator=AnnotatorFactory(name="quick"), project=project, now=later
    )
    answers = {"r1_q1": "yes", "r2_q1": "no"}
    for assignment, outcome in ((slow, Outcome.LATE), (quick, Outcome.ACCEPTED)):
        result = assignment_submit(
            assignment_id=assignment.id,
            annotator=assignment.annotator,
            answers=answers,
            now=later,
        )
        assert result.outcome == outcome

    url = reverse("annotate-api:project-labels", args=[project.id])
    assert api_for(researcher).get(url).status_code == 404  # not one of their projects
    project.researchers.add(researcher)
    # A script asking for CSV gets it (DRF's content negotiation answered 406).
    download = api_for(researcher).get(url, HTTP_ACCEPT="text/csv")
    assert download.status_code == 200 and download["Content-Type"].startswith("text/csv")
    lines = b"".join(download.streaming_content).decode().strip().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]
    assert sorted((r["annotator"], r["value"], r["late"]) for r in rows) == [
        ("quick", "NO", "0"),
        ("quick", "YES", "0"),
        ("slow", "NO", "1"),
        ("slow", "YES", "1"),
    ]
    assert Label.objects.filter(assignment=slow).count() == 0  # kept, not counted

    client.force_login(researcher)
    page = client.get(reverse("work:project-detail", args=[project.id])).text
    assert "1 submitted, 0 in progress, 1 late (kept, not counted)" in page


def test_researchers_list_the_benchmarks_with_their_systems_and_report(researcher, annotator_user):
    """A researcher using the API had to know a benchmark's exact name: now they can list them."""
    from django.test import Client

    from tests.factories import ResponseFactory

    first = ResponseFactory(system__name="gpt-4")
    ResponseFactory(instruction=first.instruction, system__name="alpaca")
    client = Client()
    client.force_login(researcher)
    listed = client.get("/api/annotate/benchmarks/").json()
    benchmark = first.instruction.benchmark
    mine = next(row for row in listed if row["id"] == benchmark.pk)
    assert mine == {
        "id": benchmark.pk,
        "name": benchmark.name,
        "description": benchmark.description,
        "instructions": 1,
        "systems": ["alpaca", "gpt-4"],
        "report": f"/api/reports/{benchmark.pk}/",
    }
    client.force_login(annotator_user)
    assert client.get("/api/annotate/benchmarks/").status_code == 404


def test_rejected_work_is_not_counted_as_submitted_in_a_projects_progress(client, researcher):
    """The project page and the progress API counted a rejected assignment under "Submitted"."""
    from django.utils import timezone

    from annotate.models import Assignment, AssignmentStatus
    from annotate.services.assignments import assignment_claim_next
    from annotate.services.submissions import assignment_submit
    from tests.factories import AnnotatorFactory

    project = project_with_tasks(instructions=2, systems=2, questions=1, assignments_per_task=1)
    project.researchers.add(researcher)
    now = timezone.now()
    worker = AnnotatorFactory(name="worker")
    for _ in range(2):
        claimed = assignment_claim_next(annotator=worker, project=project, now=now)
        assignment_submit(
            assignment_id=claimed.id, annotator=worker, answers={"r1_q1": "yes", "r2_q1": "no"},
            now=now,
        )  # fmt: skip
    # The state a review leaves: one of the two rejected.
    Assignment.objects.filter(pk=claimed.pk).update(status=AssignmentStatus.REJECTED)

    url = reverse("annotate-api:project-progress", args=[project.id])
    progress = api_for(researcher).get(url).json()
    assert progress["assignments_submitted"] == 1 and progress["assignments_rejected"] == 1
    row = progress["per_annotator"][0]
    assert (row["annotator"], row["submitted"], row["rejected"]) == ("worker", 1, 1)

    client.force_login(researcher)
    page = client.get(reverse("work:project-detail", args=[project.id])).text
    assert "1 submitted, 0 in progress, 0 late (kept, not counted), 1 rejected" in page
    # Annotator | Submitted | In progress | Late | Unconfirmed | Rejected
    assert "<td>worker</td><td>1</td><td>0</td><td>0</td><td>0</td><td>1</td>" in page


def test_claim_in_a_project_never_offered_to_the_annotator_is_404_without_its_name(
    annotator_user,
):
    """The API's claim answered "No task left for you in '<its name>'" for any project id, the
    names of closed studies of others one request away, which the pages' start-next and All-done
    refuse (404, no name). A closed project of their own still says nothing is left in it."""
    closed = project_with_tasks(instructions=1, systems=2, questions=1)
    closed.name = "A closed study of someone else"
    closed.save(update_fields=["name"])
    closed.batches.update(active=False)
    client = api_for(annotator_user)
    refused = client.post(reverse("annotate-api:claim", args=[closed.id]))
    assert refused.status_code == 404 and closed.name not in refused.content.decode()
    worked = project_with_tasks(instructions=1, systems=2, questions=1)
    worked.name = "Their own closed study"
    worked.save(update_fields=["name"])
    claimed = client.post(reverse("annotate-api:claim", args=[worked.id])).json()
    client.post(reverse("annotate-api:return", args=[claimed["assignment"]]))
    worked.batches.update(active=False)
    told = client.post(reverse("annotate-api:claim", args=[worked.id]))
    assert told.status_code == 404 and "No task left for you in" in told.json()["detail"]
