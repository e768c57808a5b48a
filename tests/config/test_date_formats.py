"""Pages write every date and time one way, in UTC and saying so (2026-11-27 18:05 UTC), where
some wrote Django's English default (Nov. 27, 2026, 6:05 p.m.) and others 2026-11-27 18:05.
Files and the API keep ISO 8601."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from annotate.models import Project
from evaluation.services.judge_configs import judge_config_create
from evaluation.services.judge_runs import judge_run_create
from tests.annotate.engine.conftest import make_endpoint
from tests.evaluation.judge_helpers import make_benchmark
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db

WHEN = datetime(2026, 11, 27, 18, 5, tzinfo=UTC)


@pytest.fixture
def judge_run():
    judge = judge_config_create(name="dated-judge", endpoint=make_endpoint("", name="offline"))
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    run.started_at = WHEN
    run.save(update_fields=["started_at"])
    return run


def test_a_datetime_a_page_prints_as_it_is_is_written_in_utc(client, researcher, judge_run):
    client.force_login(researcher)
    for url in (reverse("judge:run-list"), reverse("judge:run-detail", args=[judge_run.pk])):
        page = client.get(url)
        assert "2026-11-27 18:05 UTC" in page.text, url
        assert "p.m." not in page.text and "Nov. 27" not in page.text, url


def test_lists_that_wrote_their_own_format_say_utc_too(client, researcher):
    project = ProjectFactory(name="dated project", created_by=researcher)
    Project.objects.filter(pk=project.pk).update(created_at=WHEN)
    client.force_login(researcher)
    page = client.get(reverse("work:project-list"))
    assert "<td>2026-11-27 18:05 UTC</td>" in page.text


def test_the_api_keeps_iso_dates(client, researcher, judge_run):
    client.force_login(researcher)
    progress = client.get(reverse("api-judge-run-progress", args=[judge_run.pk])).json()
    assert progress["started_at"] == "2026-11-27T18:05:00+00:00"
