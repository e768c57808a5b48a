"""The researchers' pages and API that start KIWI classifier and rating-judge runs."""

from decimal import Decimal

import pytest
from django.apps import apps
from django.urls import reverse
from django.utils import timezone

from annotate.engine.models import EngineRun
from annotate.engine.services import engine_background_wait, engine_run_estimate
from annotate.revision.models import Study
from annotate.templatetags.money import usd_at_most
from evaluation.revision.judges import judge_run_prepare, rating_split
from evaluation.revision.models import RevisionJudgeRun, RevisionPrediction
from evaluation.revision.reports import revision_report_build
from tests.annotate.engine.conftest import dollar_a_thousand, make_endpoint, start_confirmed
from tests.evaluation.openai_stub import StubOpenAI
from tests.evaluation.revision.sample import sample_study
from tests.evaluation.revision.test_judge_engine import judge_reply

pytestmark = pytest.mark.django_db


def url(study, task="rating-judge"):
    return reverse("revision-reports:judge-new", args=[study.pk, task])


def rating_form(chosen, **extra):
    return {"endpoint": chosen.pk, "mode": "zero-shot", "shots": "", "seed": 0} | extra


@pytest.mark.django_db(transaction=True)
def test_researcher_runs_the_rating_judge_on_the_fake_endpoint_in_the_background(
    client, researcher, tmp_path
):
    study = sample_study(tmp_path)
    fake = make_endpoint("", name="offline")
    client.force_login(researcher)
    page = client.post(url(study), rating_form(fake, mode="k-shot", shots=2, seed=2))

    engine_background_wait(30)  # SQLite's shared test database: read after the writer ends
    run = RevisionJudgeRun.objects.get()
    assert page.status_code == 302
    assert page["Location"] == reverse("engine:run-detail", args=[run.engine_run_id])
    assert (run.task, run.mode, run.shots, run.seed) == ("rating-judge", "k-shot", 2, 2)
    assert run.created_by == researcher and run.endpoint_name == "offline"
    # The engine's on_finish hook marked the judge run done, so the report counts it.
    assert run.status == "done" and run.engine_run.status == "done"
    assert RevisionPrediction.objects.filter(run=run).count() == len(run.split["test"])
    detail = client.get(page["Location"])
    assert reverse("revision-reports:report", args=[study.pk]) in detail.text  # "See the results"
    # Named as the report's run table names it, not by the engine's own run number.
    assert f"<h1>Rating judge (Table 5): run #{run.pk} of {study.name}</h1>" in detail.text
    rows = revision_report_build(study=study, n_resamples=10)["table5"]["rows"]
    assert [r["model"] for r in rows] == ["Majority", "Random", "offline"]


def test_the_engine_run_pages_name_the_judge_run_by_its_number_and_the_engines_as_such(
    client, researcher, tmp_path
):
    """The rating judge's run page read "run #5" over "Model run #4": one run, two numbers,
    nothing saying which the report's run table (#5) meant; the Model runs list named neither."""
    study = sample_study(tmp_path)
    fake = make_endpoint("", name="offline")
    EngineRun.objects.create(kind="judge", endpoint=fake)  # numbers no longer agree
    run = judge_run_prepare(
        study=study, task="rating-judge", endpoint=fake, user=researcher, mode="zero-shot",
        now=timezone.now(),
    )  # fmt: skip
    assert run.pk != run.engine_run_id
    client.force_login(researcher)
    engine_page = client.get(reverse("engine:run-detail", args=[run.engine_run_id])).text
    report = client.get(reverse("revision-reports:report", args=[study.pk])).text
    runs_list = client.get(reverse("engine:run-list")).text

    assert f"<h1>Rating judge (Table 5): run #{run.pk} of {study.name}</h1>" in engine_page
    assert f"Its model calls: engine run #{run.engine_run_id} (revision-judge) on" in engine_page
    assert "Model run #" not in engine_page
    engine_url = reverse("engine:run-detail", args=[run.engine_run_id])
    assert f'<a href="{engine_url}">#{run.pk}</a>' in report
    assert f"#{run.engine_run_id}</a> KIWI rating-judge run #{run.pk} zero-shot on" in runs_list


@pytest.mark.django_db(transaction=True)
def test_only_an_admin_may_start_a_run_on_a_paid_endpoint(client, researcher, admin_user, tmp_path):
    study = sample_study(tmp_path)
    with StubOpenAI(responder=judge_reply) as stub:
        paid = make_endpoint(stub.base_url, name="paid-judge", price_prompt_per_1k=Decimal("1"))
        client.force_login(researcher)
        refused = client.post(url(study), rating_form(paid))
        assert refused.status_code == 403
        assert "only an admin may start a run on it" in str(
            refused.context["form"].errors["endpoint"]
        )
        assert "paid-judge (paid API: admins only)" in refused.text
        assert not RevisionJudgeRun.objects.exists() and not EngineRun.objects.exists()

        client.force_login(admin_user)
        page = start_confirmed(client, url(study, "instruction-category"), {"endpoint": paid.pk})
        assert page.status_code == 302
        engine_background_wait(30)
    run = RevisionJudgeRun.objects.get()
    assert run.task == "instruction-category" and run.status == "done"
    assert len(stub.requests) == 6  # every rated turn of the finished sessions
    assert run.predictions.count() == 6


def _row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


@pytest.mark.parametrize(
    ("task", "form", "units"),
    [
        ("instruction-category", {}, 6),
        ("error-category", {}, 4),
        ("rating-judge", {"mode": "k-shot", "shots": "2", "seed": "2"}, 1),
    ],
)
def test_the_estimate_shows_what_the_run_would_call_and_cost_and_keeps_nothing(
    client, admin_user, tmp_path, task, form, units
):
    study = sample_study(tmp_path)
    client.force_login(admin_user)
    with StubOpenAI() as stub:
        paid = dollar_a_thousand(stub, concurrency=1, name="paid-judge")
        before = _row_counts()
        data = {"endpoint": paid.pk, "spending_cap_usd": "3", "estimate": "1", **form}
        page = client.post(url(study, task), data)
        assert stub.requests == []
    assert page.status_code == 200 and _row_counts() == before
    # The run the Start button would make, made for real: the page showed its estimate.
    arguments = {"mode": form.get("mode", ""), "shots": 2, "seed": 2} if form else {}
    run = judge_run_prepare(
        study=study, task=task, endpoint=paid, user=admin_user, now=timezone.now(), **arguments
    )
    expected = engine_run_estimate(run=run.engine_run)
    assert page.context["estimate"] == expected and expected.units == units
    assert expected.prompt_tokens > 100 * units  # the prompts, not the engine's 0 default
    shown = page.text[page.text.index('id="estimate"') :]
    words = ("turn to label", "call") if units == 1 else ("turns to label", "calls")
    assert f"{units} {words[0]} (0 done already), {units} {words[1]}," in shown
    assert f"about {expected.prompt_tokens} prompt tokens" in shown
    assert (
        f"at most {100 * units} completion tokens: at most {usd_at_most(expected.cost_usd)}"
        in shown
    )
    bound = page.context["form"]  # the form keeps what was typed, ready for Start
    assert bound["spending_cap_usd"].value() == "3" and 'value="3"' in page.text
    if form:
        assert (bound["mode"].value(), bound["shots"].value()) == ("k-shot", "2")


def test_an_estimate_on_a_paid_endpoint_is_an_admins_as_starting_is(client, researcher, tmp_path):
    study = sample_study(tmp_path)
    paid = make_endpoint("http://127.0.0.1:9/v1", name="paid-judge")
    client.force_login(researcher)
    refused = client.post(url(study), rating_form(paid, estimate="1"))
    assert refused.status_code == 403 and refused.context["estimate"] is None
    assert "only an admin" in str(refused.context["form"].errors["endpoint"])
    assert not RevisionJudgeRun.objects.exists() and not EngineRun.objects.exists()
    fake = make_endpoint("", name="offline")
    page = client.post(url(study), rating_form(fake, estimate="1"))
    assert page.status_code == 200 and page.context["estimate"].units == 1
    assert not RevisionJudgeRun.objects.exists() and not EngineRun.objects.exists()


def test_the_cap_given_on_the_page_is_the_engine_runs(
    client, researcher, tmp_path, django_capture_on_commit_callbacks
):
    study = sample_study(tmp_path)
    fake = make_endpoint("", name="offline")
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=False) as started:
        page = client.post(
            url(study, "error-category"), {"endpoint": fake.pk, "spending_cap_usd": "0.5"}
        )
    run = RevisionJudgeRun.objects.get()
    assert page.status_code == 302 and len(started) == 1  # starts once it commits
    assert run.engine_run.spending_cap_usd == Decimal("0.5")


def test_annotators_get_the_403_page(client, annotator_user, tmp_path):
    study = sample_study(tmp_path)
    fake = make_endpoint("", name="offline")
    client.force_login(annotator_user)
    for task in ("instruction-category", "error-category", "rating-judge"):
        assert client.get(url(study, task)).status_code == 403
    assert client.post(url(study), rating_form(fake)).status_code == 403
    assert not RevisionJudgeRun.objects.exists()


def test_each_task_asks_only_for_what_it_needs(client, researcher, tmp_path):
    study = sample_study(tmp_path)
    make_endpoint("", name="offline")
    client.force_login(researcher)
    judge = client.get(url(study))
    assert {"endpoint", "mode", "shots", "seed", "spending_cap_usd"} == set(
        judge.context["form"].fields
    )
    classifier = client.get(url(study, "error-category"))
    assert set(classifier.context["form"].fields) == {"endpoint", "spending_cap_usd"}
    assert "Classify error categories (Table 4)" in classifier.text
    assert client.get(url(study, "no-such-task")).status_code == 404
    assert (
        client.get(reverse("revision-reports:judge-new", args=[999, "rating-judge"])).status_code
        == 404
    )


def test_the_seed_help_gives_the_split_of_this_studys_turns(client, researcher, tmp_path):
    study = sample_study(tmp_path)
    make_endpoint("", name="offline")
    client.force_login(researcher)
    help_text = client.get(url(study)).context["form"].fields["seed"].help_text
    split = rating_split(study=study, seed=0)  # what a run on this study stores
    sizes = "/".join(str(len(split[part])) for part in ("train", "dev", "test"))
    total = sum(len(ids) for ids in split.values())
    assert f"this study's {total} rated turns: {sizes} (the paper:" in help_text


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ({"mode": "k-shot", "shots": ""}, "shots", "A k-shot judge needs k, at least 1."),
        ({"mode": "k-shot", "shots": 0}, "shots", "greater than or equal to 1"),
        ({"seed": -1}, "seed", "greater than or equal to 0"),
        ({"seed": 2**31}, "seed", "less than or equal to 2147483647"),  # a 500 on PostgreSQL
        ({"mode": "nine-shot"}, "mode", "Select a valid choice"),
        ({"endpoint": 999}, "endpoint", "Select a valid choice"),
        ({"spending_cap_usd": "-1"}, "spending_cap_usd", "The spending cap cannot be negative"),
        ({"spending_cap_usd": "lots"}, "spending_cap_usd", "Enter a number."),
        ({"spending_cap_usd": "-1", "estimate": "1"}, "spending_cap_usd", "cannot be negative"),
    ],
)
def test_bad_input_is_shown_beside_its_field_and_nothing_starts(
    client, researcher, tmp_path, extra, field, message
):
    study = sample_study(tmp_path)
    fake = make_endpoint("", name="offline")
    client.force_login(researcher)
    page = client.post(url(study), rating_form(fake, **extra))
    assert page.status_code == 400
    assert message in str(page.context["form"].errors[field])
    assert page.text.count("has-error") == 1
    assert not RevisionJudgeRun.objects.exists() and not EngineRun.objects.exists()


def test_k_above_the_training_turns_is_refused_beside_k_and_nothing_starts(
    client, researcher, tmp_path
):
    """k-shot with k = 50 on a split of 4 training turns ran with 4 examples while the run and
    Table 5 said "k-shot (k = 50)"."""
    study = sample_study(tmp_path)
    fake = make_endpoint("", name="offline")
    trained = len(rating_split(study=study, seed=0)["train"])
    client.force_login(researcher)
    page = client.post(url(study), rating_form(fake, mode="k-shot", shots=trained + 1))

    assert page.status_code == 400
    assert (
        f"k = {trained + 1} examples, but the split of seed 0 has only {trained} training turns"
        in str(page.context["form"].errors["shots"])
    )
    assert not RevisionJudgeRun.objects.exists() and not EngineRun.objects.exists()
    judge_run_prepare(
        study=study, task="rating-judge", endpoint=fake, user=researcher, mode="k-shot",
        shots=trained, now=timezone.now(),
    )  # fmt: skip  # every training turn as an example is allowed


def test_prerequisites_say_what_to_do_and_link_there(client, researcher, admin_user, tmp_path):
    empty = Study.objects.create(name="empty", created_at="2026-01-01T00:00:00Z")
    client.force_login(researcher)
    page = client.get(url(empty))
    problems = [(p.problem, p.url) for p in page.context["prerequisites"]]
    assert problems == [
        (
            "The study has fewer than 4 rated turns of finished sessions.",
            reverse("revision:upload"),
        ),
        ("There is no engine endpoint yet.", ""),
    ]
    assert "Ask an admin to create one." in page.text and "disabled" in page.text
    client.force_login(admin_user)
    admin_page = client.get(url(empty, "error-category"))
    assert [(p.problem, p.url) for p in admin_page.context["prerequisites"]] == [
        ("The study has no neutral or bad turns of finished sessions.", reverse("revision:upload")),
        ("There is no engine endpoint yet.", reverse("engine:endpoint-new")),
    ]
    # Only paid endpoints: a researcher is told before filling the form, an admin is not.
    make_endpoint("http://127.0.0.1:9/v1", name="paid")
    study = sample_study(tmp_path)
    assert client.get(url(study)).context["prerequisites"] == []
    client.force_login(researcher)
    (paid_only,) = client.get(url(study)).context["prerequisites"]
    assert paid_only.problem.startswith("Every endpoint calls a paid API")
    assert paid_only.action == (
        "Ask an admin to start the run, or to create an offline fake endpoint "
        "(no address: it bills nobody, so researchers may use it)."
    )


def test_a_classifier_with_no_turn_to_label_is_refused(client, researcher):
    empty = Study.objects.create(name="empty", created_at="2026-01-01T00:00:00Z")
    fake = make_endpoint("", name="offline")
    client.force_login(researcher)
    page = client.post(url(empty, "error-category"), {"endpoint": fake.pk})
    assert page.status_code == 400
    assert "no neutral or bad turn" in str(page.context["form"].non_field_errors())
    assert not RevisionJudgeRun.objects.exists() and not EngineRun.objects.exists()


def test_the_report_page_links_every_action_and_lists_the_runs(client, researcher, tmp_path):
    study = sample_study(tmp_path)
    client.force_login(researcher)
    page = client.get(reverse("revision-reports:report", args=[study.pk]))
    assert reverse("revision:rerate", args=[study.pk]) in page.text
    for task in ("instruction-category", "error-category", "rating-judge"):
        assert url(study, task) in page.text


def test_api_starts_a_run_and_applies_the_same_rules(
    client, researcher, annotator_user, tmp_path, django_capture_on_commit_callbacks
):
    study = sample_study(tmp_path)
    make_endpoint("", name="offline")
    make_endpoint("http://127.0.0.1:9/v1", name="paid")
    api = reverse("api-revision-judge-runs", args=[study.pk])
    body = {"task": "rating-judge", "endpoint": "offline", "mode": "one-shot", "seed": 3}
    client.force_login(annotator_user)
    assert client.post(api, body, "application/json").status_code == 404
    client.force_login(researcher)
    paid = client.post(api, {**body, "endpoint": "paid"}, "application/json")
    assert paid.status_code == 403 and "only an admin" in paid.json()["detail"]
    assert client.post(api, {**body, "task": "nope"}, "application/json").status_code == 400
    too_big = client.post(api, {**body, "seed": 2**31}, "application/json")
    assert too_big.status_code == 400 and "seed" in too_big.json()  # a 500 on PostgreSQL
    assert client.post(api, {**body, "endpoint": "none"}, "application/json").status_code == 404
    assert not RevisionJudgeRun.objects.exists()
    with django_capture_on_commit_callbacks(execute=False) as started:
        answer = client.post(api, body, "application/json")
    assert answer.status_code == 202 and len(started) == 1  # starts after the commit
    run = RevisionJudgeRun.objects.get()
    assert (run.mode, run.shots, run.seed) == ("one-shot", 1, 3)
    assert answer.json() == {
        "run_id": run.pk,
        "engine_run_id": run.engine_run_id,
        "url": reverse("engine:run-detail", args=[run.engine_run_id]),
        "progress_url": reverse("api-engine-run", args=[run.engine_run_id]),
        "report_url": reverse("api-revision-report", args=[study.pk]),
        "estimate": None,
    }


def test_api_takes_a_spending_cap_and_a_dry_run_that_keeps_nothing(client, admin_user, tmp_path):
    study = sample_study(tmp_path)
    api = reverse("api-revision-judge-runs", args=[study.pk])
    client.force_login(admin_user)
    with StubOpenAI() as stub:
        dollar_a_thousand(stub, concurrency=1, name="paid-judge")
        body = {"task": "instruction-category", "endpoint": "paid-judge", "spending_cap_usd": "2"}
        before = _row_counts()
        dry = client.post(api, {**body, "dry_run": True}, "application/json")
        assert dry.status_code == 200 and _row_counts() == before and stub.requests == []
        negative = client.post(api, {**body, "spending_cap_usd": "-1"}, "application/json")
        assert negative.status_code == 400 and "spending_cap_usd" in negative.json()
        started = client.post(api, body, "application/json")  # starts after a commit: never
    assert started.status_code == 202 and started.json()["estimate"] is None
    run = RevisionJudgeRun.objects.get(pk=started.json()["run_id"])
    assert run.engine_run.spending_cap_usd == Decimal("2")
    expected = engine_run_estimate(run=run.engine_run)  # nothing done yet: the whole run
    nothing_kept = dict.fromkeys(("run_id", "engine_run_id", "url", "progress_url"))
    assert {key: dry.json()[key] for key in nothing_kept} == nothing_kept
    assert dry.json()["report_url"] == reverse("api-revision-report", args=[study.pk])
    assert dry.json()["estimate"] == {
        "units": expected.units,
        "units_done_before": 0,
        "calls": expected.calls,
        "prompt_tokens": expected.prompt_tokens,
        "completion_tokens": expected.completion_tokens,
        "cost_usd": str(expected.cost_usd),
    }
    assert expected.units == 6 and expected.prompt_tokens > 0  # the six rated turns


def test_api_refuses_a_researchers_dry_run_on_a_paid_endpoint_and_keeps_nothing(
    client, researcher, tmp_path
):
    """An estimate on a paid endpoint is refused as the run is: only an admin may use one."""
    study = sample_study(tmp_path)
    api = reverse("api-revision-judge-runs", args=[study.pk])
    client.force_login(researcher)
    with StubOpenAI() as stub:
        dollar_a_thousand(stub, concurrency=1, name="paid-judge")
        body = {"task": "instruction-category", "endpoint": "paid-judge", "dry_run": True}
        before = _row_counts()
        dry = client.post(api, body, "application/json")
    assert dry.status_code == 403 and "only an admin" in dry.json()["detail"]
    assert _row_counts() == before and stub.requests == []


def test_the_engine_run_page_links_the_report_while_the_judge_run_exists(
    client, researcher, tmp_path
):
    study = sample_study(tmp_path)
    fake = make_endpoint("", name="offline")
    client.force_login(researcher)
    started = client.post(url(study, "instruction-category"), {"endpoint": fake.pk})
    run_page = started["Location"]  # not run: the test's transaction never commits
    report = reverse("revision-reports:report", args=[study.pk])
    assert f'href="{report}" id="run-results"' in client.get(run_page).text
    RevisionJudgeRun.objects.all().delete()  # an admin deleted it; the engine run stays
    page = client.get(run_page)
    assert page.status_code == 200 and 'id="run-results"' not in page.text


def test_a_runs_reason_is_shown_under_its_status_not_run_into_it(client, researcher, tmp_path):
    study = sample_study(tmp_path)
    reason = "Stopped: the next call would exceed the spending cap of $0.1 (raise the cap)."
    RevisionJudgeRun.objects.create(
        study=study,
        task="rating-judge",
        prompt_version="v1",
        status="failed",
        error=reason,
        created_at=timezone.now(),
    )
    client.force_login(researcher)
    page = client.get(reverse("revision-reports:report", args=[study.pk])).text
    row = page[page.index('id="judge-runs"') :]
    assert f'Failed<br><span class="run-message">{reason}</span>' in row
    assert "Failed: Stopped" not in row


@pytest.mark.parametrize("way", ["page", "api"])
def test_a_start_over_the_users_run_start_limit_is_refused_and_makes_nothing(
    client, researcher, tmp_path, worker_rates, way
):
    """RUN_START_RATE holds for the KIWI classifiers and rating judge: the refused start keeps
    no run; the page keeps the form as sent, the API answers 429 with Retry-After."""
    worker_rates(run_starts="1/hour")
    study = sample_study(tmp_path)
    fake = make_endpoint("", name="offline")
    api = reverse("api-revision-judge-runs", args=[study.pk])
    body = {"task": "rating-judge", "endpoint": "offline", "mode": "zero-shot", "seed": 0}
    client.force_login(researcher)
    assert client.post(url(study), rating_form(fake)).status_code == 302
    before = _row_counts()

    if way == "page":
        refused = client.post(url(study), rating_form(fake, seed=37))
        assert 'value="37"' in refused.text
    else:
        refused = client.post(api, {**body, "seed": 37}, "application/json")
        assert refused.json()["detail"].endswith("and try again. Nothing was started.")

    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert "Too many run starts from your account (at most 1/hour)" in refused.text
    assert _row_counts() == before
