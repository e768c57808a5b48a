"""POST /api/judge/runs/: start an InFoBench judge run (or estimate it) without the page."""

from decimal import Decimal

import pytest
from django.apps import apps
from django.urls import reverse

from annotate.engine.services import engine_background_wait, engine_run_estimate
from annotate.models import Label
from annotate.roles import RESEARCHER
from evaluation.models import JudgeRun
from evaluation.services.judge_runs import judge_run_create
from tests.evaluation.judge_helpers import make_benchmark, make_judge
from tests.evaluation.openai_stub import StubOpenAI
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

URL = "/api/judge/runs/"


def _body(judge, benchmark, systems, **extra):
    return {
        "judge": judge.name,
        "benchmark": benchmark.name,
        "systems": [system.name for system in systems],
        **extra,
    }


def _row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


def _paid_judge(stub):
    return make_judge(
        stub.base_url,
        max_tokens=5,
        price_prompt_per_1k=Decimal("0.03"),
        price_completion_per_1k=Decimal("0.06"),
    )


def test_the_route_is_the_one_the_docs_give():
    assert reverse("api-judge-runs") == URL


@pytest.mark.django_db(transaction=True)
def test_a_researcher_starts_the_fake_judge_and_follows_it_to_the_end(client, researcher):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a", "b"))
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(researcher)

    started = client.post(URL, _body(judge, benchmark, systems), content_type="application/json")

    engine_background_wait(30)
    assert started.status_code == 202, started.content
    run = JudgeRun.objects.get()
    answer = started.json()
    assert answer["run_id"] == run.pk and answer["engine_run_id"] == run.engine_run_id
    assert answer["url"] == reverse("judge:run-detail", args=[run.pk])
    assert answer["estimate"] is None
    progress = client.get(answer["progress_url"]).json()
    assert progress["status"] == "done" and progress["questions_answered"] == 10
    assert run.created_by == researcher
    assert Label.objects.filter(annotator=judge.annotator).count() == 10


def test_a_dry_run_answers_the_estimate_calls_nothing_and_keeps_nothing(client, admin_user):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a", "b"))
    client.force_login(admin_user)
    with StubOpenAI() as stub:
        judge = _paid_judge(stub)
        before = _row_counts()
        answer = client.post(
            URL,
            _body(judge, benchmark, systems, dry_run=True, spending_cap_usd="2.5"),
            content_type="application/json",
        )
        assert stub.requests == []
    assert answer.status_code == 200, answer.content
    assert _row_counts() == before
    estimate = answer.json()["estimate"]
    assert answer.json()["run_id"] is None
    expected = engine_run_estimate(
        run=judge_run_create(config=judge, benchmark=benchmark, systems=systems).engine_run
    )
    assert (estimate["units"], estimate["calls"]) == (expected.units, expected.calls) == (4, 10)
    assert Decimal(estimate["cost_usd"]) == expected.cost_usd


def test_only_an_admin_may_start_a_judge_that_costs_money(client, researcher, admin_user):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    with StubOpenAI() as stub:
        judge = _paid_judge(stub)
        client.force_login(researcher)
        for dry_run in (False, True):
            refused = client.post(
                URL,
                _body(judge, benchmark, systems, dry_run=dry_run),
                content_type="application/json",
            )
            assert refused.status_code == 403 and "admin" in refused.json()["detail"]
            assert refused.json()["field"] == "judge"
        assert stub.requests == [] and not JudgeRun.objects.exists()
        client.force_login(admin_user)
        started = client.post(
            URL,
            _body(judge, benchmark, systems, spending_cap_usd="0.5"),
            content_type="application/json",
        )
        assert started.status_code == 202, started.content
        engine_background_wait(30)
    run = JudgeRun.objects.get()
    assert run.engine_run.spending_cap_usd == Decimal("0.5")


def test_annotators_and_strangers_do_not_find_it(client, annotator_user):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    judge = make_judge(name="fake-judge", backend="fake")
    body = _body(judge, benchmark, systems)
    assert client.post(URL, body, content_type="application/json").status_code == 401
    client.force_login(annotator_user)
    assert client.post(URL, body, content_type="application/json").status_code == 404
    assert not JudgeRun.objects.exists()


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"judge": "nobody"}, "judge", "no judge named 'nobody'"),
        ({"benchmark": "nothing"}, "benchmark", "no benchmark named 'nothing'"),
        ({"systems": ["a", "ghost"]}, "systems", "no system named 'ghost'"),
        ({"systems": []}, "systems", None),
        ({"spending_cap_usd": "-1"}, "spending_cap_usd", None),
        ({"subset": "medium"}, "subset", None),
        ({"instruction_ids": ["task_9"]}, "instruction_ids", "task_9"),
        ({"sample": 5}, "sample", "between 1 and 1"),
        ({"prompt_version": "v999"}, "prompt_version", "v999"),
    ],
)
def test_bad_input_names_its_field_and_starts_nothing(client, researcher, change, field, message):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(researcher)
    body = {**_body(judge, benchmark, systems), **change}

    refused = client.post(URL, body, content_type="application/json")

    assert refused.status_code in (400, 404), refused.content
    detail = refused.json()
    text = str(detail)
    if field is not None:
        assert field in text
    if refused.status_code == 404:  # what was not found is named as the 400s name theirs
        assert detail["field"] == field
    if message is not None:
        assert message in text
    assert not JudgeRun.objects.exists()


def test_a_seed_too_long_to_describe_is_refused_naming_the_field(client, researcher):
    """The run's selection ("sample of 1 (seed ...) from all") is stored in 200 characters: a
    seed of 190 digits failed on PostgreSQL with a 500."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1, 1), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(researcher)
    body = {**_body(judge, benchmark, systems), "sample": 1, "seed": 10**190}

    refused = client.post(URL, body, content_type="application/json")

    assert refused.status_code == 400, refused.content
    assert "Field 'seed': at most 18 digits." in refused.json()["detail"]
    assert not JudgeRun.objects.exists()


def test_systems_named_twice_are_judged_once_and_every_missing_one_is_named(client, researcher):
    """The system lookup the API shares with `manage.py judge` (systems_by_name)."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,), systems=("a", "b"))
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(researcher)
    body = {**_body(judge, benchmark, systems), "dry_run": True}

    twice = client.post(URL, {**body, "systems": ["a", "a"]}, content_type="application/json")
    assert twice.status_code == 200 and twice.json()["estimate"]["units"] == 1

    missing = {**body, "systems": ["zed", "a", "ghost"]}
    refused = client.post(URL, missing, content_type="application/json")
    assert refused.status_code == 404
    assert refused.json() == {
        "detail": "Field 'systems': no system named 'ghost', 'zed'.",
        "field": "systems",
    }


def test_a_start_over_the_users_run_start_limit_answers_429_and_makes_nothing(
    client, researcher, worker_rates
):
    worker_rates(run_starts="1/hour")
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1, 1))
    judge = make_judge(name="fake-judge", backend="fake")
    # The first run judges task_1 only: a start over its responses is refused while it is queued.
    first = _body(judge, benchmark, systems, instruction_ids=["task_1"])
    body = _body(judge, benchmark, systems, instruction_ids=["task_2"])
    client.force_login(researcher)
    assert client.post(URL, first, content_type="application/json").status_code == 202
    before = _row_counts()

    refused = client.post(URL, body, content_type="application/json")

    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert refused.json()["detail"].startswith(
        "Too many run starts from your account (at most 1/hour). Please wait 60 min"
    )
    assert _row_counts() == before
    other = UserFactory(username="other-researcher", roles=[RESEARCHER])
    client.force_login(other)  # the limit is per user
    assert client.post(URL, body, content_type="application/json").status_code == 202


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_system_with_no_response_in_the_benchmark_is_refused_naming_it(
    client, researcher, dry_run
):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,), systems=("beta-7b",))
    _, (alpha,), _ = make_benchmark(questions_per_instruction=(1,), systems=("alpha-7b",))
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(researcher)
    body = _body(judge, benchmark, [alpha, *systems], dry_run=dry_run)

    refused = client.post(URL, body, content_type="application/json")

    assert refused.status_code == 400
    assert refused.json() == {
        "detail": "Every chosen system needs a response to every selected instruction: alpha-7b "
        "has no response to task_1. Leave those systems or instructions out, or import the "
        "responses first.",
        "field": "systems",
    }
    assert not JudgeRun.objects.exists()
