"""Hostile requests to the pages and the API: each is answered 4xx and writes nothing.

Forged question ids, another annotator's assignment, replayed worker tokens, oversized bodies and
wrong methods. Tampered tokens and empty POSTs to every URL are in test_permission_matrix.
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings as django_settings
from django.core import signing
from django.test import Client
from django.urls import reverse

from annotate.crowd.services.workers import TOKEN_SALT
from annotate.models import Assignment, AssignmentStatus, Label
from annotate.selectors import work as work_selectors
from tests.config.test_permission_matrix import written
from tests.config.world import World, build_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings, tmp_path) -> World:
    settings.MEDIA_ROOT = tmp_path
    return build_world()


def client_of(world: World, role: str) -> Client:
    client = Client()
    client.force_login(world.users[role])
    return client


def full_answers(assignment: Assignment) -> dict[str, str]:
    page = work_selectors.task_page_for(assignment=assignment)
    return {name: "yes" for name in page.field_names}


def post_json(client: Client, url: str, payload) -> int:
    body = payload if isinstance(payload, str) else json.dumps(payload)
    return client.post(url, body, content_type="application/json").status_code


FORGERIES = [
    {"r1_q99": "yes"},  # a question the instruction does not have
    {"r9_q1": "yes"},  # a response position beyond the ones shown
    {"r1_q0": "yes"},
    {"r1_score": "5"},  # a score field in a labels-only project
    {"question_1": "yes"},
]


@pytest.mark.parametrize("forged", FORGERIES)
def test_forged_question_ids_are_refused_everywhere(world, forged):
    answers = {**full_answers(world.assignment), **forged}
    before = written(world)
    page = client_of(world, "owner").post(
        reverse("work:assignment", args=[world.assignment.pk]), answers
    )
    api = post_json(
        client_of(world, "owner"),
        reverse("annotate-api:submit", args=[world.assignment.pk]),
        {"answers": answers},
    )
    worker = Client().post(
        reverse("crowd:work-task", args=[world.worker_token]),
        {**full_answers(world.crowd_assignment), **forged},
    )
    assert (page.status_code, api, worker.status_code) == (400, 400, 400)
    assert written(world) == before


def test_another_annotators_assignment_is_404_with_valid_answers(world):
    answers = full_answers(world.assignment)
    other = client_of(world, "other")
    before = written(world)
    page = other.post(reverse("work:assignment", args=[world.assignment.pk]), answers)
    api = post_json(
        other, reverse("annotate-api:submit", args=[world.assignment.pk]), {"answers": answers}
    )
    returned = other.post(reverse("work:assignment-return", args=[world.assignment.pk]))
    assert (page.status_code, api, returned.status_code) == (404, 404, 404)
    assert written(world) == before


def test_replayed_worker_token_changes_nothing(world):
    url = reverse("crowd:work-task", args=[world.worker_token])
    answers = full_answers(world.crowd_assignment)
    assert Client().post(url, answers).status_code == 200
    labels = set(Label.objects.values_list("pk", "value"))
    assert labels
    before = written(world)
    assert Client().post(url, answers).status_code == 200  # the same answers: nothing changes
    different = Client().post(url, {name: "no" for name in answers})
    assert different.status_code == 409
    assert written(world) == before and set(Label.objects.values_list("pk", "value")) == labels


def test_token_signed_with_another_key_or_for_an_experts_assignment_is_404(world):
    forged = signing.dumps(
        {"a": world.crowd_assignment.pk, "s": ""}, salt=TOKEN_SALT, key="not-our-secret-key"
    )
    # Correctly signed, but for an expert's assignment: worker links only reach crowd work.
    expert = signing.dumps({"a": world.assignment.pk, "s": ""}, salt=TOKEN_SALT, compress=True)
    before = written(world)
    for token in (forged, expert):
        url = reverse("crowd:work-task", args=[token])
        assert Client().get(url).status_code == 404
        assert Client().post(url, full_answers(world.assignment)).status_code == 404
    assert written(world) == before


def oversized() -> str:
    return "x" * (django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1024)


def test_oversized_form_and_json_bodies_are_refused(world):
    answers = full_answers(world.assignment)
    owner = client_of(world, "owner")
    before = written(world)
    page = owner.post(
        reverse("work:assignment", args=[world.assignment.pk]), {**answers, "r1_q1": oversized()}
    )
    api = post_json(
        owner,
        reverse("annotate-api:submit", args=[world.assignment.pk]),
        {"answers": {**answers, "r1_q1": oversized()}},
    )
    worker = Client().post(
        reverse("crowd:work-task", args=[world.worker_token]),
        {**full_answers(world.crowd_assignment), "r1_q1": oversized()},
    )
    assert (page.status_code, api, worker.status_code) == (400, 400, 400)
    assert written(world) == before
    assert Assignment.objects.get(pk=world.assignment.pk).status == AssignmentStatus.CLAIMED


def test_too_many_form_fields_are_refused(world):
    fields = {f"f{n}": "x" for n in range(django_settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)}
    before = written(world)
    page = client_of(world, "owner").post(
        reverse("work:assignment", args=[world.assignment.pk]), fields
    )
    worker = Client().post(reverse("crowd:work-task", args=[world.worker_token]), fields)
    assert (page.status_code, worker.status_code) == (400, 400)
    assert written(world) == before


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
def test_wrong_methods_are_405_and_write_nothing(world, method):
    urls = {
        "owner": [
            reverse("work:assignment-return", args=[world.assignment.pk]),
            reverse("work:start-next", args=[world.project.pk]),
            reverse("annotate-api:submit", args=[world.assignment.pk]),
            reverse("annotate-api:assignment", args=[world.assignment.pk]),
            reverse("annotate-api:claim", args=[world.project.pk]),
        ],
        "admin": [
            reverse("annotate-api:project-create"),
            reverse("crowd-api:sync", args=[world.publication.pk]),
            reverse("crowd:publication-action", args=[world.publication.pk]),
            reverse("judge:run-resume", args=[world.judge_run.pk]),
            reverse("judge:run-new"),
        ],
    }
    before = written(world)
    answers = []
    for role, role_urls in urls.items():
        client = client_of(world, role)
        answers += [(url, getattr(client, method)(url).status_code) for url in role_urls]
    worker = getattr(Client(), method)(reverse("crowd:work-task", args=[world.worker_token]))
    answers.append(("work-task", worker.status_code))
    assert [url for url, status in answers if status != 405] == []
    assert written(world) == before


DEEP_JSON = '{"answers": ' + "[" * 200_000 + "]" * 200_000 + "}"


def test_deeply_nested_json_to_any_api_is_a_400_not_a_500(world):
    from tests.config.test_permission_matrix import concrete_url, site_patterns

    api_urls = [
        concrete_url(route, world.ids) for _, route in site_patterns() if route.startswith("api/")
    ]
    assert len(api_urls) > 10
    answers = {}
    for role in ("owner", "admin"):
        client = client_of(world, role)
        for url in api_urls:
            answers[(role, url)] = post_json(client, url, DEEP_JSON)
    assert not {key: status for key, status in answers.items() if status >= 500}
    submit = reverse("annotate-api:submit", args=[world.assignment.pk])
    assert answers[("owner", submit)] == 400
