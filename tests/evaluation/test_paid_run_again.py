"""Run again of a run on a paid endpoint asks first, on the engine run's page and on the judge
run's page: its button's dialog says what it would cost, the form sends that total, and the run
starts only if it is still the estimate's (annotate/engine/pages.py `run_again`)."""

from dataclasses import dataclass
from decimal import Decimal
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.engine.models import Endpoint, EngineRun, RunStatus
from annotate.engine.services import engine_run_estimate, engine_run_stop
from annotate.templatetags.money import usd_at_most
from evaluation.services.judge_configs import judge_config_create
from evaluation.services.judge_runs import judge_run_create
from tests.annotate.engine.conftest import again_total, make_endpoint
from tests.evaluation.judge_helpers import make_benchmark
from tests.evaluation.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db

PRICE = {"price_prompt_per_1k": Decimal("1"), "price_completion_per_1k": Decimal("2")}


@dataclass
class RunPage:
    run: EngineRun
    page: str  # the page with the Run again button
    resume: str  # where its form goes


def engine_run_page(endpoint) -> RunPage:
    judge = judge_config_create(name=f"judge-{endpoint.name}", endpoint=endpoint)
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2, 1))
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems).engine_run
    engine_run_stop(run=run)
    return RunPage(
        run,
        reverse("engine:run-detail", args=[run.pk]),
        reverse("engine:run-resume", args=[run.pk]),
    )


def judge_run_page(endpoint) -> RunPage:
    judge = judge_config_create(name=f"judge-{endpoint.name}", endpoint=endpoint)
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2, 1))
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    engine_run_stop(run=run.engine_run)
    return RunPage(
        run.engine_run,
        reverse("judge:run-detail", args=[run.pk]),
        reverse("judge:run-resume", args=[run.pk]),
    )


PAGES = pytest.mark.parametrize("page_for", [engine_run_page, judge_run_page])


@pytest.fixture
def stub():
    with StubOpenAI() as server:
        yield server


def _status(run: EngineRun) -> str:
    run.refresh_from_db()
    return run.status


@PAGES
def test_run_again_on_a_paid_endpoint_asks_with_the_cost_and_sends_it(
    client, admin_user, stub, page_for, django_capture_on_commit_callbacks
):
    paid = make_endpoint(stub.base_url, name="paid", max_tokens=10, **PRICE)
    run_page = page_for(paid)
    client.force_login(admin_user)
    page = client.get(run_page.page).text
    estimate = engine_run_estimate(run=run_page.run)
    assert estimate.units > 0 and again_total(page) == str(estimate.cost_usd)
    button = page[page.index('id="run-again"') :].split(">")[0]
    assert "data-confirm=" in button and "a paid API?" in unescape(button)
    assert f"at most {usd_at_most(estimate.cost_usd)}." in unescape(button)

    with django_capture_on_commit_callbacks(execute=False) as started:
        unconfirmed = client.post(run_page.resume, {"spending_cap_usd": "9"})
    assert unconfirmed.status_code == 409 and started == []
    assert f"would now cost at most ${estimate.cost_usd} (no total was confirmed)" in (
        unconfirmed.text
    )
    assert "nothing was started" in unconfirmed.text
    assert _status(run_page.run) == RunStatus.CANCELLED
    assert run_page.run.spending_cap_usd is None  # the cap sent with it is not kept either

    with django_capture_on_commit_callbacks(execute=False) as started:
        confirmed = client.post(run_page.resume, {"confirm_total": again_total(page)})
    assert confirmed.status_code == 302 and len(started) == 1
    assert _status(run_page.run) == RunStatus.PENDING


@PAGES
def test_run_again_with_a_stale_total_is_refused_with_the_new_one(
    client, admin_user, stub, page_for, django_capture_on_commit_callbacks
):
    paid = make_endpoint(stub.base_url, name="paid", max_tokens=10, **PRICE)
    run_page = page_for(paid)
    client.force_login(admin_user)
    old = again_total(client.get(run_page.page).text)
    Endpoint.objects.filter(pk=paid.pk).update(price_prompt_per_1k=Decimal("3"))
    new = engine_run_estimate(run=EngineRun.objects.get(pk=run_page.run.pk)).cost_usd
    assert new != Decimal(old)

    with django_capture_on_commit_callbacks(execute=False) as started:
        refused = client.post(run_page.resume, {"confirm_total": old})
    assert refused.status_code == 409 and started == []
    assert f"would now cost at most ${new} (you confirmed ${old})" in refused.text
    assert _status(run_page.run) == RunStatus.CANCELLED
    assert again_total(client.get(run_page.page).text) == str(new)  # the page asks anew


@PAGES
def test_run_again_on_the_offline_fake_asks_nothing(
    client, researcher, page_for, django_capture_on_commit_callbacks
):
    run_page = page_for(make_endpoint("", name="offline", **PRICE))
    client.force_login(researcher)
    page = client.get(run_page.page).text
    assert "data-confirm" not in page[page.index('id="run-again"') :].split(">")[0]
    with django_capture_on_commit_callbacks(execute=False) as started:
        again = client.post(run_page.resume, {})
    assert again.status_code == 302 and len(started) == 1


def test_the_progress_json_gives_run_again_its_total_once_the_run_has_ended(
    client, admin_user, stub
):
    """The run page's script puts it on the button when the run ends while the page is open."""
    run_page = engine_run_page(make_endpoint(stub.base_url, name="paid", **PRICE))
    client.force_login(admin_user)
    progress = client.get(reverse("engine:run-progress", args=[run_page.run.pk])).json()
    estimate = engine_run_estimate(run=run_page.run)
    assert progress["again_confirm"]["total"] == str(estimate.cost_usd)
    assert f"at most {usd_at_most(estimate.cost_usd)}." in progress["again_confirm"]["question"]
    EngineRun.objects.filter(pk=run_page.run.pk).update(
        status=RunStatus.RUNNING, heartbeat=timezone.now()
    )
    running = client.get(reverse("engine:run-progress", args=[run_page.run.pk])).json()
    assert running["again_confirm"] is None


@PAGES
def test_run_again_priced_at_nothing_asks_nothing_and_a_reader_gets_no_estimate(
    client, admin_user, researcher, stub, page_for, django_capture_on_commit_callbacks
):
    paid = make_endpoint(stub.base_url, name="paid", max_tokens=10, **PRICE)
    run_page = page_for(paid)
    client.force_login(researcher)  # may read the page, may not run a paid endpoint again
    assert 'id="run-again"' not in client.get(run_page.page).text
    if run_page.page.startswith("/engine/"):  # the engine page polls its progress JSON
        progress = client.get(reverse("engine:run-progress", args=[run_page.run.pk])).json()
        assert progress["again_confirm"] is None
    Endpoint.objects.filter(pk=paid.pk).update(
        price_prompt_per_1k=Decimal("0"), price_completion_per_1k=Decimal("0")
    )
    client.force_login(admin_user)
    page = client.get(run_page.page).text
    assert "data-confirm" not in page[page.index('id="run-again"') :].split(">")[0]
    with django_capture_on_commit_callbacks(execute=False) as started:
        again = client.post(run_page.resume, {})
    assert again.status_code == 302 and len(started) == 1


@PAGES
def test_run_again_with_a_price_edited_between_the_check_and_the_start_starts_nothing(
    client, admin_user, stub, page_for, monkeypatch, django_capture_on_commit_callbacks
):
    """The total is checked again inside the start's transaction, the endpoint's row locked
    (annotate.engine.services.runs.engine_run_cost_confirmed)."""
    from annotate.engine.services import runs

    paid = make_endpoint(stub.base_url, name="paid", max_tokens=10, **PRICE)
    run_page = page_for(paid)
    client.force_login(admin_user)
    old = again_total(client.get(run_page.page).text)
    Endpoint.objects.filter(pk=paid.pk).update(price_prompt_per_1k=Decimal("3"))
    new = engine_run_estimate(run=EngineRun.objects.get(pk=run_page.run.pk)).cost_usd
    Endpoint.objects.filter(pk=paid.pk).update(**PRICE)
    assert new != Decimal(old)
    reopen = runs.engine_run_reopen

    def edited_then_reopen(*, run, user=None):  # after the page's check, before the start's
        Endpoint.objects.filter(pk=paid.pk).update(price_prompt_per_1k=Decimal("3"))
        return reopen(run=run, user=user)

    monkeypatch.setattr(runs, "engine_run_reopen", edited_then_reopen)
    with django_capture_on_commit_callbacks(execute=False) as started:
        refused = client.post(run_page.resume, {"confirm_total": old})
    assert refused.status_code == 409 and started == []
    assert f"would now cost at most ${new} (you confirmed ${old})" in refused.text
    assert _status(run_page.run) == RunStatus.CANCELLED
