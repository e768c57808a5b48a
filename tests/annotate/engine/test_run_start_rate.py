"""The per-user limit on starting engine runs (RUN_START_RATE): every page and API that starts or
resumes a run counts against one counter per user, admins included; over it nothing is made."""

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.engine.models import Endpoint, EngineRun, RunStatus
from annotate.models import Benchmark, System
from tests.annotate.engine.conftest import make_endpoint, make_instructions
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def refusal(rate: str) -> str:
    return f"Too many run starts from your account (at most {rate}). Please wait 60 min"


@pytest.fixture(autouse=True)
def fake(db):
    """Two instructions and the offline fake endpoint, free: anyone may start runs on it."""
    make_instructions(2)
    return make_endpoint("", name="fake")


def _generation_form(system: str) -> dict:
    return {
        "endpoint": Endpoint.objects.get(name="fake").pk,
        "benchmark": Benchmark.objects.get().pk,
        "system": system,
        "template": "generation_infobench_v1",
        "seed": "0",
        "start": "1",
    }


def _api_body(system: str) -> dict:
    return {"benchmark": "bench", "system": system, "endpoint": "fake"}


def test_the_generation_page_refuses_the_start_over_the_limit_keeping_the_form(
    client, admin_user, worker_rates
):
    """Admins are limited too. The refused start makes no run and no system; the form comes
    back with what was typed and says when to try again."""
    clock = worker_rates(run_starts="2/hour")
    client.force_login(admin_user)
    url = reverse("engine:generation-new")
    assert client.post(url, _generation_form("first")).status_code == 302
    assert client.post(url, _generation_form("second")).status_code == 302

    refused = client.post(url, {**_generation_form("typed-name"), "sample": "1", "seed": "7"})

    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert refusal("2/hour") in " ".join(refused.context["form"].non_field_errors())
    page = refused.content.decode()
    assert 'value="typed-name"' in page and 'value="7"' in page
    assert EngineRun.objects.count() == 2 and not System.objects.filter(name="typed-name")
    clock[0] += 3600
    assert client.post(url, _generation_form("later")).status_code == 302


def test_the_generation_api_answers_429_with_retry_after_and_makes_nothing(
    client, researcher, worker_rates
):
    worker_rates(run_starts="2/hour")
    client.force_login(researcher)
    url = reverse("api-engine-generation-runs")
    for system in ("first", "second"):
        assert client.post(url, _api_body(system), "application/json").status_code == 202

    refused = client.post(url, _api_body("third"), "application/json")

    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert refused.json() == {
        "detail": f"{refusal('2/hour')} and try again. Nothing was started.",
    }
    assert EngineRun.objects.count() == 2 and not System.objects.filter(name="third")
    # A dry run spends nothing and is not held up.
    estimate = client.post(url, {**_api_body("third"), "dry_run": True}, "application/json")
    assert estimate.status_code == 200


def test_the_limit_is_per_user_and_shared_by_pages_and_api(client, researcher, worker_rates):
    worker_rates(run_starts="1/hour")
    client.force_login(researcher)
    page = client.post(reverse("engine:generation-new"), _generation_form("by-page"))
    assert page.status_code == 302
    api = reverse("api-engine-generation-runs")
    assert client.post(api, _api_body("by-api"), "application/json").status_code == 429
    other = UserFactory(username="other-researcher", roles=["researcher"])
    client.force_login(other)
    assert client.post(api, _api_body("by-api"), "application/json").status_code == 202
    assert EngineRun.objects.filter(created_by=researcher).count() == 1


def test_a_start_the_engine_refuses_is_not_counted(client, admin_user, worker_rates, fake):
    """Only starts that go count: Run again on a run that is starting already is refused (the
    engine's own check, after the limit's) and uses up nothing."""
    worker_rates(run_starts="1/hour")
    starting = EngineRun.objects.create(
        kind="generation", endpoint=fake, params={}, status=RunStatus.PENDING,
        heartbeat=timezone.now(),
    )  # fmt: skip
    stopped = EngineRun.objects.create(
        kind="generation", endpoint=fake, params={}, status=RunStatus.CANCELLED
    )
    client.force_login(admin_user)
    for _ in range(3):
        again = client.post(
            reverse("api-engine-run-resume", args=[starting.pk]), {}, "application/json"
        )
        assert again.status_code == 400 and "starting already" in again.json()["detail"]
    resumed = client.post(
        reverse("api-engine-run-resume", args=[stopped.pk]), {}, "application/json"
    )
    assert resumed.status_code == 202


@pytest.mark.parametrize("way", ["page", "api"])
def test_running_a_run_again_counts_and_is_refused_over_the_limit(
    client, admin_user, worker_rates, fake, way
):
    worker_rates(run_starts="1/hour")
    runs = [
        EngineRun.objects.create(
            kind="generation", endpoint=fake, params={}, status=RunStatus.CANCELLED
        )
        for _ in range(2)
    ]
    client.force_login(admin_user)

    def again(run):
        if way == "page":
            url = reverse("engine:run-resume", args=[run.pk])
            return client.post(url, {"spending_cap_usd": "5"})
        url = reverse("api-engine-run-resume", args=[run.pk])
        return client.post(url, {"spending_cap_usd": "5"}, "application/json")

    assert again(runs[0]).status_code in (202, 302)
    refused = again(runs[1])

    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert refusal("1/hour") in refused.content.decode()
    runs[1].refresh_from_db()
    assert (runs[1].status, runs[1].spending_cap_usd) == (RunStatus.CANCELLED, None)
