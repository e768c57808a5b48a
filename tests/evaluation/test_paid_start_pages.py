"""Every page that starts an engine run asks before spending money: on a paid endpoint, Start
shows the estimate and a "Start for $X" button, and the run starts only when the total it sends
is still the estimate's (annotate/engine/pages.py). The offline fake starts at once."""

from dataclasses import dataclass
from decimal import Decimal

import pytest
from django.urls import reverse

from annotate.engine.models import Endpoint, EngineRun
from annotate.templatetags.money import usd_at_most
from annotate.verbalizer.services.sets import evaluation_set_create
from evaluation.services.judge_configs import judge_config_create
from tests.annotate.engine.conftest import make_endpoint, make_instructions
from tests.annotate.verbalizer.helpers import fill
from tests.evaluation.judge_helpers import make_benchmark
from tests.evaluation.openai_stub import StubOpenAI
from tests.evaluation.revision.sample import sample_study

pytestmark = pytest.mark.django_db

PRICE = {"price_prompt_per_1k": Decimal("1"), "price_completion_per_1k": Decimal("2")}


@dataclass
class StartPage:
    url: str
    form: dict
    typed: tuple[str, str, str]  # (context form name, field, value the user typed): kept


def generation_page(endpoint, tmp_path) -> StartPage:
    benchmark, _ = make_instructions(2)
    form = {"endpoint": endpoint.pk, "benchmark": benchmark.pk, "system": "typed-system",
            "template": "generation_infobench_v1", "seed": "0", "start": "1"}  # fmt: skip
    return StartPage(reverse("engine:generation-new"), form, ("form", "system", "typed-system"))


def judge_page(endpoint, tmp_path) -> StartPage:
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2, 1))
    judge = judge_config_create(name=f"judge-{endpoint.name}", endpoint=endpoint)
    form = {"config": judge.pk, "benchmark": benchmark.pk, "systems": [s.pk for s in systems],
            "subset": "", "instruction_ids": "", "seed": "7", "start": "1"}  # fmt: skip
    return StartPage(reverse("judge:run-new"), form, ("form", "seed", "7"))


def revision_judge_page(endpoint, tmp_path) -> StartPage:
    study = sample_study(tmp_path)
    url = reverse("revision-reports:judge-new", args=[study.pk, "rating-judge"])
    form = {"endpoint": endpoint.pk, "mode": "zero-shot", "shots": "", "seed": "3", "start": "1"}
    return StartPage(url, form, ("form", "seed", "3"))


def verbalizer_page(endpoint, tmp_path) -> StartPage:
    fill("SST-2", [True, False])
    made = evaluation_set_create(name="s", datasets=["SST-2"], items=2, seed=1, mappings="golden")
    url = reverse("verbalizer:set-detail", args=[made.evaluation_set.pk])
    form = {"run-system": "typed-system", "run-endpoint": endpoint.name, "run-modes": ["direct"]}
    return StartPage(url, form, ("run_form", "system", "typed-system"))


PAGES = pytest.mark.parametrize(
    "page_for", [generation_page, judge_page, revision_judge_page, verbalizer_page]
)


@pytest.fixture
def stub():
    with StubOpenAI() as server:
        yield server


@PAGES
def test_start_on_a_paid_endpoint_shows_the_total_first_and_starts_once_it_is_confirmed(
    client, admin_user, stub, tmp_path, page_for
):
    paid = make_endpoint(stub.base_url, name="paid", max_tokens=10, **PRICE)
    page = page_for(paid, tmp_path)
    client.force_login(admin_user)

    asked = client.post(page.url, page.form)
    assert asked.status_code == 200 and not EngineRun.objects.exists()
    estimate, confirm = asked.context["estimate"], asked.context["confirm"]
    assert estimate.units > 0 and estimate.cost_usd > 0 and confirm.total == estimate.cost_usd
    button = f'name="{confirm.field}" value="{estimate.cost_usd}" id="start-run"'
    assert (
        button in asked.text
        and f"Start for {usd_at_most(estimate.cost_usd)}</button>" in asked.text
    )
    assert "nothing was started" in asked.text
    form_name, field, typed = page.typed
    assert asked.context[form_name][field].value() == typed  # what the user typed is kept

    started = client.post(page.url, {**page.form, confirm.field: str(estimate.cost_usd)})
    run = EngineRun.objects.get()
    assert started.status_code == 302
    assert started["Location"] == reverse("engine:run-detail", args=[run.pk])
    assert run.endpoint == paid and stub.requests == []  # the test never runs its on_commit


@PAGES
def test_a_stale_total_is_refused_with_the_new_one_and_nothing_starts(
    client, admin_user, stub, tmp_path, page_for
):
    paid = make_endpoint(stub.base_url, name="paid", max_tokens=10, **PRICE)
    page = page_for(paid, tmp_path)
    client.force_login(admin_user)
    old = client.post(page.url, page.form).context["confirm"]
    Endpoint.objects.filter(pk=paid.pk).update(price_prompt_per_1k=Decimal("3"))

    refused = client.post(page.url, {**page.form, old.field: old.value})
    new = refused.context["confirm"]
    assert refused.status_code == 200 and not EngineRun.objects.exists()
    assert new.total == refused.context["estimate"].cost_usd and new.total > old.total
    assert new.stale == old.total
    shown = f"The estimate changed since you confirmed {usd_at_most(old.total)}: it is now {usd_at_most(new.total)}"
    assert shown in refused.text
    assert f'value="{new.value}" id="start-run"' in refused.text

    assert client.post(page.url, {**page.form, new.field: new.value}).status_code == 302
    assert EngineRun.objects.count() == 1


@PAGES
def test_the_estimate_button_on_a_paid_endpoint_offers_start_for_its_total(
    client, admin_user, stub, tmp_path, page_for
):
    page = page_for(make_endpoint(stub.base_url, name="paid", **PRICE), tmp_path)
    client.force_login(admin_user)
    shown = client.post(page.url, {**page.form, "estimate": "1"})
    confirm = shown.context["confirm"]
    assert shown.status_code == 200 and not EngineRun.objects.exists()
    assert not confirm.asked and confirm.total == shown.context["estimate"].cost_usd
    assert f"Start for {usd_at_most(confirm.total)}</button>" in shown.text


@PAGES
def test_the_offline_fake_starts_at_once_even_when_priced(client, researcher, tmp_path, page_for):
    fake = make_endpoint("", name="offline", **PRICE)
    page = page_for(fake, tmp_path)
    client.force_login(researcher)
    estimate = client.post(page.url, {**page.form, "estimate": "1"})
    assert estimate.context["estimate"].cost_usd > 0  # priced, yet nobody is billed
    assert estimate.context["confirm"] is None and "Start for" not in estimate.text
    started = client.post(page.url, page.form)
    assert started.status_code == 302 and EngineRun.objects.get().endpoint == fake


@PAGES
def test_a_paid_endpoint_priced_at_nothing_starts_at_once(
    client, admin_user, stub, tmp_path, page_for
):
    """An address (a self-hosted server, say) with no prices: nothing to confirm."""
    free = make_endpoint(stub.base_url, name="own-server", max_tokens=10)
    page = page_for(free, tmp_path)
    client.force_login(admin_user)
    estimate = client.post(page.url, {**page.form, "estimate": "1"})
    assert estimate.context["estimate"].cost_usd == 0
    assert estimate.context["confirm"] is None and "Start for" not in estimate.text
    started = client.post(page.url, page.form)
    assert started.status_code == 302 and EngineRun.objects.get().endpoint == free


@PAGES
def test_a_confirmed_start_sent_twice_starts_one_run(client, admin_user, stub, tmp_path, page_for):
    """A double click on "Start for $X" (or the form sent again) made two runs asking the paid
    API the same prompts, each paid: the estimate of the second was still that of the first."""
    paid = make_endpoint(stub.base_url, name="paid", max_tokens=10, **PRICE)
    page = page_for(paid, tmp_path)
    client.force_login(admin_user)
    confirm = client.post(page.url, page.form).context["confirm"]
    confirmed = {**page.form, confirm.field: confirm.value}
    assert client.post(page.url, confirmed).status_code == 302
    again = client.post(page.url, confirmed)
    assert again.status_code == 409 and EngineRun.objects.count() == 1
    assert "was sent twice" in again.text and "this one started nothing" in again.text
