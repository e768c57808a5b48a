"""What the crowd publish preview and the publication page say a batch costs is what the report's
Table 4 counts once the work is in (docs/reports.md, Cost)."""

import re
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from annotate.crowd.models import Publication
from annotate.roles import ADMIN
from evaluation.selectors.report_costs import source_costs
from tests.factories import UserFactory, project_with_tasks

pytestmark = pytest.mark.django_db

FORM = {
    "platform": "selfhosted",
    "title": "Judge AI answers",
    "description": "Yes/no questions",
    "keywords": "ai",
    "reward_usd": "2.00",
    "assignment_minutes": "60",
    "auto_approval_hours": "72",
    "lifetime_hours": "168",
    "min_percent_approved": "90",
    "min_hits_approved": "500",
    "locale": "",
    "qualifications_json": "",
    "completion_code": "C0DE-1",
    "completion_url": "",
}


def _table4_crowd_cost(benchmark) -> Decimal:
    cost = source_costs(benchmark=benchmark)["overall"]["crowd-majority"].cost_usd
    return Decimal(str(cost)).quantize(Decimal("0.01"))


def _do_every_task(participant: str, publication: Publication) -> None:
    worker = Client()
    join = reverse("crowd:selfhosted-join", args=[publication.link_token])
    for _ in range(publication.batch.tasks.count()):
        started = worker.post(join, {"PROLIFIC_PID": participant})
        page = worker.get(started["Location"]).text
        answers = {name: "yes" for name in set(re.findall(r'name="(r\d+_q\d+)"', page))}
        done = worker.post(started["Location"], answers)
        assert 'id="completion-code">C0DE-1<' in done.text


def test_selfhosted_preview_is_what_table_4_counts_once_the_work_is_in(
    client, settings, django_capture_on_commit_callbacks
):
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    project = project_with_tasks(instructions=2, systems=2, questions=1, assignments_per_task=2)
    batch = project.batches.get()
    client.force_login(UserFactory(username="boss", roles=[ADMIN], is_staff=True))
    url = reverse("crowd:publish", args=[batch.pk])

    preview = client.post(url, {**FORM, "preview": "1"})
    # 2 tasks × 2 assignments × $2.00, no platform fee: paid on the recruiting site.
    assert 'id="cost-total">$8.00<' in preview.text
    assert 'id="paid-outside"' in preview.text and "Prolific" in preview.text
    assert "Confirm: publish ($8.00 to pay on your recruiting site)" in preview.text
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url, {**FORM, "confirm_total": "8.00", "publish": "1"})
    publication = Publication.objects.get(batch=batch)

    for participant in ("P1", "P2"):
        _do_every_task(participant, publication)
    assert _table4_crowd_cost(project.benchmark) == Decimal("8.00")
