"""The judge pages and progress API: who may start what, and what the progress shows."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.apps import apps
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from annotate.engine.models import EngineRun
from annotate.engine.services import (
    engine_background_wait,
    engine_run_estimate,
    engine_runs_reap,
)
from annotate.models import Label
from annotate.templatetags.money import usd, usd_at_most
from evaluation.models import JudgeRun, RunStatus
from evaluation.services.judge_runs import judge_run_create, judge_run_mark_started
from tests.annotate.engine.conftest import again_total, start_confirmed
from tests.evaluation.judge_helpers import make_benchmark, make_judge
from tests.evaluation.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db


def _questions(page) -> str:
    """The judge run page's "Questions answered" as read (its percent counts questions, not the
    engine run's conversations)."""
    found = re.search(r'<dd id="questions">(.*?)</dd>', page.text, re.S)
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def _form(judge, benchmark, systems, **extra):
    return {
        "config": judge.pk,
        "benchmark": benchmark.pk,
        "systems": [s.pk for s in systems],
        "subset": "",
        "instruction_ids": "",
        "seed": 0,
        **extra,
    }


@pytest.mark.django_db(transaction=True)
def test_researcher_runs_the_fake_judge_from_the_page_and_sees_progress(client, researcher):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a", "b"))
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(researcher)

    page = client.post(reverse("judge:run-new"), _form(judge, benchmark, systems))

    # The page answers at once and sends the browser to the run's live progress page; the
    # run works in the background. (Wait before reading: the test database is SQLite's shared
    # in-memory cache, whose table locks make a concurrent writer fail instead of waiting.)
    engine_background_wait(30)
    run = JudgeRun.objects.get()
    assert page.status_code == 302
    assert page["Location"] == reverse("engine:run-detail", args=[run.engine_run_id])
    assert run.status == RunStatus.DONE and run.created_by == researcher
    assert Label.objects.filter(annotator=judge.annotator).count() == 10
    detail = client.get(reverse("judge:run-detail", args=[run.pk]))
    assert _questions(detail) == "10 / 10 (100 % of the questions)"
    assert "4 done, 0 failed, of 4" in detail.text
    assert 'http-equiv="refresh"' not in detail.text  # finished: no more refreshing
    api = client.get(reverse("api-judge-run-progress", args=[run.pk])).json()
    assert api["questions_answered"] == 10 and api["status"] == "done"
    assert api["prompt_tokens"] == run.prompt_tokens > 0 and api["cost_usd"] == str(run.cost_usd)
    # Its engine run counts conversations, and its page says so where the judge's says questions.
    engine_page = client.get(reverse("engine:run-detail", args=[run.engine_run_id]))
    assert "100</span> % of the conversations ended" in engine_page.text
    engine_api = client.get(reverse("api-engine-run", args=[run.engine_run_id])).json()
    assert (engine_api["unit_name"], engine_api["units_total"]) == ("conversations", 4)


def _row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


def _paid_judge(stub):
    return make_judge(
        stub.base_url,
        max_tokens=5,
        price_prompt_per_1k=Decimal("0.03"),
        price_completion_per_1k=Decimal("0.06"),
    )


def test_the_estimate_shows_what_the_run_would_call_and_cost_and_keeps_nothing(client, admin_user):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a", "b"))
    client.force_login(admin_user)
    with StubOpenAI() as stub:
        judge = _paid_judge(stub)
        before = _row_counts()
        form = _form(judge, benchmark, systems, spending_cap_usd="2.5", estimate="1")
        page = client.post(reverse("judge:run-new"), form)
        assert stub.requests == []
    assert page.status_code == 200 and _row_counts() == before
    # The run the Start button would make, made for real: the page showed its estimate.
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    expected = engine_run_estimate(run=run.engine_run)
    assert (expected.units, expected.calls, expected.completion_tokens) == (4, 10, 50)
    assert vars(page.context["estimate"]) == {**vars(expected), "labels_before": None}
    shown = page.text[page.text.index('id="estimate"') :]
    assert f"{expected.units} conversations to judge (0 done already), 10 calls" in shown
    assert f"about {expected.prompt_tokens} prompt tokens" in shown
    assert f"at most 50 completion tokens: at most {usd_at_most(expected.cost_usd)}" in shown
    said = shown[: shown.index("</p>")]  # the button keeps the exact total it confirms
    assert str(expected.cost_usd) not in said  # "$0.10", not the six stored decimals
    # The form keeps what was typed, ready for Start.
    assert 'name="spending_cap_usd" value="2.5"' in page.text
    assert page.text.count('name="systems"') == page.text.count("checked") == 2


def test_an_estimate_follows_the_start_rule_researchers_only_on_the_free_fake(client, researcher):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    client.force_login(researcher)
    with StubOpenAI() as stub:
        paid = _paid_judge(stub)
        refused = client.post(
            reverse("judge:run-new"), _form(paid, benchmark, systems, estimate="1")
        )
        assert stub.requests == []
    assert refused.status_code == 403 and "only an admin" in refused.text
    assert refused.context["estimate"] is None and not JudgeRun.objects.exists()
    fake = make_judge(name="fake-judge", backend="fake")
    page = client.post(reverse("judge:run-new"), _form(fake, benchmark, systems, estimate="1"))
    assert page.status_code == 200 and "1 conversation to judge" in page.text
    assert not JudgeRun.objects.exists() and not EngineRun.objects.exists()


@pytest.mark.parametrize("cap", ["-1", "-0.000001", "1000000", "0.0000001"])
def test_a_bad_cap_is_refused_beside_its_field_and_nothing_starts(client, researcher, cap):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    judge = make_judge(backend="fake")
    client.force_login(researcher)
    for button in ("start", "estimate"):
        form = _form(judge, benchmark, systems, spending_cap_usd=cap, **{button: "1"})
        page = client.post(reverse("judge:run-new"), form)
        assert page.status_code == 400 and page.context["estimate"] is None
        assert list(page.context["form"].errors) == ["spending_cap_usd"]
    if cap.startswith("-"):
        assert "The spending cap cannot be negative" in page.text
    assert not JudgeRun.objects.exists() and not EngineRun.objects.exists()


def test_the_cap_given_on_the_page_is_the_engine_runs(
    client, researcher, django_capture_on_commit_callbacks
):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    judge = make_judge(backend="fake")
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=False) as started:
        page = client.post(
            reverse("judge:run-new"), _form(judge, benchmark, systems, spending_cap_usd="0.25")
        )
    run = JudgeRun.objects.get()
    assert page.status_code == 302 and len(started) == 1  # starts once it commits
    assert run.engine_run.spending_cap_usd == Decimal("0.25")


def test_progress_page_refreshes_while_the_run_is_unfinished(client, researcher):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    run = judge_run_create(config=make_judge(backend="fake"), benchmark=benchmark, systems=systems)
    client.force_login(researcher)
    detail = client.get(reverse("judge:run-detail", args=[run.pk]))
    assert (
        'http-equiv="refresh"' in detail.text
        and _questions(detail) == "0 / 2 (0 % of the questions)"
    )


def test_a_judge_runs_page_leads_to_its_labels_and_the_report(client, researcher):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    judge = make_judge(backend="fake")
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    client.force_login(researcher)
    detail = client.get(reverse("judge:run-detail", args=[run.pk])).text
    labels = f"{reverse('annotate:label-list', args=[benchmark.pk])}?annotator={judge.annotator_id}"
    report = reverse("reports:detail", args=[benchmark.pk])
    assert f'href="{labels}"' in detail and f'href="{report}#sources"' in detail


@pytest.mark.django_db(transaction=True)
def test_only_an_admin_may_start_a_paid_judge(client, researcher, admin_user):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    with StubOpenAI() as stub:
        judge = make_judge(stub.base_url, backend="openai")
        client.force_login(researcher)
        refused = client.post(reverse("judge:run-new"), _form(judge, benchmark, systems))
        assert refused.status_code == 403 and "only an admin" in refused.text
        assert not JudgeRun.objects.exists() and stub.requests == []

        client.force_login(admin_user)
        page = start_confirmed(client, reverse("judge:run-new"), _form(judge, benchmark, systems))
        assert page.status_code == 302
        engine_background_wait(30)
        assert len(stub.answered) == 2
        assert JudgeRun.objects.get().status == RunStatus.DONE


def test_annotators_get_the_403_page_and_the_api_404(client, annotator_user):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    run = judge_run_create(config=make_judge(backend="fake"), benchmark=benchmark, systems=systems)
    client.force_login(annotator_user)
    assert client.get(reverse("judge:run-list")).status_code == 403
    assert client.get(reverse("judge:run-detail", args=[run.pk])).status_code == 403
    assert client.get(reverse("api-judge-run-progress", args=[run.pk])).status_code == 404
    assert client.post(reverse("judge:run-new"), {}).status_code == 403


def test_bad_selection_is_refused_and_nothing_is_created(client, researcher):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    judge = make_judge(backend="fake")
    client.force_login(researcher)
    page = client.post(
        reverse("judge:run-new"), _form(judge, benchmark, systems, instruction_ids="task_1, nope")
    )
    assert page.status_code == 400 and "No instruction nope" in page.text
    page = client.post(reverse("judge:run-new"), _form(judge, benchmark, systems, sample=5))
    assert page.status_code == 400 and "between 1 and 1" in page.text
    assert not JudgeRun.objects.exists()


def test_error_messages_from_the_judge_are_escaped(client, researcher):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    run = judge_run_create(config=make_judge(backend="fake"), benchmark=benchmark, systems=systems)
    run.conversations.update(status="failed", error="<script>alert(1)</script>")
    client.force_login(researcher)
    page = client.get(reverse("judge:run-detail", args=[run.pk]))
    assert "<script>alert(1)" not in page.text and "&lt;script&gt;alert(1)" in page.text


def test_the_judge_page_says_what_is_missing_and_links_there(client, admin_user, researcher):
    client.force_login(admin_user)
    page = client.get(reverse("judge:run-new"))
    assert page.status_code == 200
    missing = page.context["prerequisites"]
    assert [item.problem for item in missing] == [
        "There is no judge configuration yet.",
        "There is no benchmark yet.",
    ]
    assert missing[1].url == reverse("annotate:import-list")
    assert missing[0].url  # an admin gets a link to where judges are made
    assert 'id="prerequisites"' in page.text

    make_judge(backend="fake")
    make_benchmark(questions_per_instruction=(1,))
    assert client.get(reverse("judge:run-new")).context["prerequisites"] == []
    client.force_login(researcher)
    assert client.get(reverse("judge:run-new")).context["prerequisites"] == []


def _died_mid_run(run, *, now):
    """The state a killed server leaves: both runs "running", the last beat long ago."""
    judge_run_mark_started(run)
    stale = now - timedelta(seconds=settings.ENGINE_HEARTBEAT_TIMEOUT_SECONDS + 60)
    EngineRun.objects.filter(pk=run.engine_run_id).update(
        status="running", started_at=stale, heartbeat=stale
    )


def test_the_run_lists_fail_a_run_whose_worker_died_without_its_page_being_opened(
    client, researcher
):
    """With no periodic reaper (EMBEDDED_BEAT=false, no Celery beat) the lists said "Running"
    for ever for a run whose server was killed; only opening the run's own page failed it."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    config = make_judge(backend="fake")
    runs = [judge_run_create(config=config, benchmark=benchmark, systems=systems) for _ in "abc"]
    for run in runs:
        _died_mid_run(run, now=timezone.now())
    alive = runs[2]
    EngineRun.objects.filter(pk=alive.engine_run_id).update(heartbeat=timezone.now())
    client.force_login(researcher)

    def status_in(page_name, run_url):
        page = client.get(reverse(page_name)).text
        return page[page.index(f'href="{run_url}"') :].split("</tr>")[0]

    judge_row = status_in("judge:run-list", reverse("judge:run-detail", args=[runs[0].pk]))
    assert "<td>Failed</td>" in judge_row
    # Each list on its own: the judge list above has failed every dead judge run already.
    EngineRun.objects.filter(pk=runs[1].engine_run_id).update(status="running", error="")
    engine_row = status_in(
        "engine:run-list", reverse("engine:run-detail", args=[runs[1].engine_run_id])
    )
    assert "<td>Failed</td>" in engine_row
    for run in runs[:2]:
        run.engine_run.refresh_from_db()
        assert run.engine_run.status == RunStatus.FAILED
        assert "stopped answering" in run.engine_run.error
    alive.refresh_from_db()
    assert alive.engine_run.status == "running"  # beating: left alone


def test_a_judge_run_whose_worker_died_fails_with_its_engine_run_and_offers_run_again(
    client, researcher
):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    run = judge_run_create(config=make_judge(backend="fake"), benchmark=benchmark, systems=systems)
    _died_mid_run(run, now=timezone.now())
    client.force_login(researcher)

    # No beat task needed: reading the page ends the run nobody works on.
    detail = client.get(reverse("judge:run-detail", args=[run.pk]))

    assert 'http-equiv="refresh"' not in detail.text
    assert "refreshes itself" not in detail.text
    assert '<dd id="status">Failed</dd>' in detail.text
    assert '<dd id="run-message">The worker running this run stopped answering' in detail.text
    assert reverse("judge:run-resume", args=[run.pk]) in detail.text  # the Run again form
    api = client.get(reverse("api-judge-run-progress", args=[run.pk])).json()
    assert (api["status"], api["status_display"], api["active"]) == ("failed", "Failed", False)
    assert "stopped answering" in api["error"]
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED == run.engine_run.status and run.finished_at


def test_the_engine_sweep_ends_the_judge_run_too(researcher):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    run = judge_run_create(config=make_judge(backend="fake"), benchmark=benchmark, systems=systems)
    now = timezone.now()
    _died_mid_run(run, now=now)

    assert engine_runs_reap(now=now) == 1  # the beat's sweep, as a worker runs it

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.get_status_display() == "Failed"


@pytest.mark.django_db(transaction=True)
def test_run_again_resumes_a_judge_run_whose_worker_died(client, researcher):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2))
    judge = make_judge(name="fake-judge", backend="fake")
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    _died_mid_run(run, now=timezone.now())
    client.force_login(researcher)
    client.get(reverse("judge:run-detail", args=[run.pk]))  # reaped

    client.post(reverse("judge:run-resume", args=[run.pk]))
    engine_background_wait(30)

    run.refresh_from_db()
    assert run.status == RunStatus.DONE == run.engine_run.status
    assert Label.objects.filter(annotator=judge.annotator).count() == 5
    detail = client.get(reverse("judge:run-detail", args=[run.pk]))
    assert "Done" in detail.text and _questions(detail) == "5 / 5 (100 % of the questions)"
    assert reverse("judge:run-resume", args=[run.pk]) not in detail.text


def test_a_judge_run_stopped_before_it_started_is_stopped_on_its_page(client, researcher):
    from annotate.engine.services import engine_run_stop

    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    run = judge_run_create(config=make_judge(backend="fake"), benchmark=benchmark, systems=systems)
    engine_run_stop(run=run.engine_run)
    client.force_login(researcher)

    detail = client.get(reverse("judge:run-detail", args=[run.pk]))

    assert 'http-equiv="refresh"' not in detail.text
    assert '<dd id="status">Stopped</dd>' in detail.text
    assert '<dd id="run-message">Stopped before it started.</dd>' in detail.text
    assert reverse("judge:run-resume", args=[run.pk]) in detail.text
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED


def test_the_engine_run_page_names_the_judge_run_and_links_back_to_it(client, researcher):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    judge = make_judge(name="fake-judge", backend="fake")
    EngineRun.objects.create(kind="judge", endpoint=judge.endpoint)  # numbers no longer agree
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    assert run.pk != run.engine_run_id
    client.force_login(researcher)

    page = client.get(reverse("engine:run-detail", args=[run.engine_run_id]))

    title = f"Judge run #{run.pk}: fake-judge on {benchmark.name}"
    assert f"<h1>{title}</h1>" in page.text
    assert f'href="{reverse("judge:run-detail", args=[run.pk])}" id="run-results"' in page.text


def test_every_page_of_a_judge_run_names_it_by_its_number_and_the_engines_as_such(
    client, researcher
):
    """The engine run page read "Judge run #5" over "Model run #4", two numbers for one run
    with nothing saying which is which, and the Model runs list named neither judge run."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    judge = make_judge(name="fake-judge", backend="fake")
    EngineRun.objects.create(kind="judge", endpoint=judge.endpoint)  # numbers no longer agree
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    client.force_login(researcher)
    engine_page = client.get(reverse("engine:run-detail", args=[run.engine_run_id])).text
    judge_page = client.get(reverse("judge:run-detail", args=[run.pk])).text
    runs_list = client.get(reverse("engine:run-list")).text

    engine = f"engine run #{run.engine_run_id}"
    assert f"<h1>Judge run #{run.pk}: fake-judge" in engine_page
    assert f"Its model calls: {engine} (judge) on" in engine_page
    assert "Model run #" not in engine_page
    assert f"<h1>Judge run #{run.pk}: fake-judge" in judge_page
    assert f"Live progress, calls and cost</a> ({engine} under Model runs)" in judge_page
    assert f"#{run.engine_run_id}</a> Judge run #{run.pk}: fake-judge on" in runs_list


def test_run_again_follows_the_runs_own_endpoint_not_the_one_its_judge_has_now(
    client, researcher, admin_user, django_capture_on_commit_callbacks
):
    """A judge moved to another endpoint (Django admin) keeps its old runs on the old one:
    'Run again' is an admin's when the run's own endpoint is paid, whatever the judge's now."""
    from annotate.engine.models import RunStatus as EngineRunStatus
    from annotate.engine.services import engine_run_stop
    from evaluation.models import JudgeConfig

    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,))
    with StubOpenAI() as stub:
        paid = _paid_judge(stub)
        run = judge_run_create(config=paid, benchmark=benchmark, systems=systems)  # the console
        engine_run_stop(run=run.engine_run)
        fake = make_judge(name="fake-judge", backend="fake")
        JudgeConfig.objects.filter(pk=paid.pk).update(endpoint=fake.endpoint)
        client.force_login(researcher)
        detail = client.get(reverse("judge:run-detail", args=[run.pk]))
        with django_capture_on_commit_callbacks(execute=False) as started:
            refused = client.post(reverse("judge:run-resume", args=[run.pk]))
        assert stub.requests == []
    assert refused.status_code == 403 and "only an admin" in refused.text
    assert "<main" in refused.text  # the site's page, with the way back
    assert f'href="{reverse("judge:run-detail", args=[run.pk])}"' in refused.text
    assert started == []
    run.engine_run.refresh_from_db()
    assert run.engine_run.status == EngineRunStatus.CANCELLED
    # The run's page offers no button that would be refused, and says why.
    assert reverse("judge:run-resume", args=[run.pk]) not in detail.text
    assert "only an admin may run it again" in detail.text

    client.force_login(admin_user)
    detail = client.get(reverse("judge:run-detail", args=[run.pk]))
    assert reverse("judge:run-resume", args=[run.pk]) in detail.text
    with django_capture_on_commit_callbacks(execute=False) as started:
        again = client.post(
            reverse("judge:run-resume", args=[run.pk]), {"confirm_total": again_total(detail.text)}
        )
    assert again.status_code == 302 and len(started) == 1


def test_a_run_its_cap_stopped_goes_on_from_its_page_with_a_higher_cap(
    client, admin_user, django_capture_on_commit_callbacks
):
    from annotate.engine.models import RunStatus as EngineRunStatus
    from annotate.engine.services import engine_run_execute, engine_run_stopped_by_cap

    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,), systems=("a", "b"))
    client.force_login(admin_user)
    with StubOpenAI() as stub:
        judge = _paid_judge(stub)
        run = judge_run_create(
            config=judge, benchmark=benchmark, systems=systems, spending_cap_usd=Decimal("0.0001")
        )
        engine_run_execute(run_id=run.engine_run_id)
        run.engine_run.refresh_from_db()
        assert engine_run_stopped_by_cap(run.engine_run) and stub.requests == []

        # The page offers the cap beside its Run again button, filled with the run's own.
        detail = client.get(reverse("judge:run-detail", args=[run.pk])).text
        # The status, then why: "Stopped", not "Stopped: Stopped: the next call ...".
        assert '<dd id="status">Stopped</dd>' in detail and "Stopped: Stopped" not in detail
        assert '<dd id="run-message">Stopped: the next call would exceed' in detail
        form = detail[detail.index(reverse("judge:run-resume", args=[run.pk])) :]
        assert 'name="spending_cap_usd" value="0.000100"' in form.split("</form>")[0]

        refused = client.post(
            reverse("judge:run-resume", args=[run.pk]), {"spending_cap_usd": "lots"}
        )
        assert refused.status_code == 400 and "Spending cap (USD): Enter a number." in refused.text
        with django_capture_on_commit_callbacks(execute=False) as started:
            again = client.post(
                reverse("judge:run-resume", args=[run.pk]),
                {"spending_cap_usd": "5", "confirm_total": again_total(detail)},
            )
        assert again.status_code == 302 and len(started) == 1
        engine_run_execute(run_id=run.engine_run_id)
        assert len(stub.requests) == 4
    run.engine_run.refresh_from_db()
    assert run.engine_run.spending_cap_usd == Decimal("5")
    assert run.engine_run.status == EngineRunStatus.DONE
    assert Label.objects.filter(annotator=judge.annotator).count() == 4


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ({"instruction_ids": "task_1, task_9"}, "instruction_ids", "No instruction task_9"),
        ({"sample": "3"}, "sample", "Sample size must be between 1 and 1, not 3."),
    ],
)
def test_a_selection_that_cannot_be_made_is_shown_beside_its_field(
    client, researcher, extra, field, message
):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(researcher)
    page = client.post(reverse("judge:run-new"), _form(judge, benchmark, systems, **extra))
    assert page.status_code == 400
    assert message in " ".join(page.context["form"].errors[field])
    assert not JudgeRun.objects.exists()


def test_a_refusal_about_no_field_is_shown_once_above_the_form(client, researcher):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))  # easy only
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(researcher)
    page = client.post(reverse("judge:run-new"), _form(judge, benchmark, systems, subset="hard"))
    assert page.status_code == 400
    assert page.context["form"].non_field_errors()
    assert page.text.count("No responses of sys-a") == 1


@pytest.mark.parametrize("button", [{}, {"estimate": "1"}])
def test_a_system_with_no_response_in_the_benchmark_is_refused_beside_the_systems(
    client, researcher, button
):
    """With no benchmark chosen yet the form offers every system with responses, and one sent
    for a benchmark it has no response in is refused by the run, by name."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1, 1), systems=("beta-7b",))
    _, (alpha,), _ = make_benchmark(questions_per_instruction=(1,), systems=("alpha-7b",))
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(researcher)
    offered = client.get(reverse("judge:run-new")).text
    assert f'name="systems" value="{alpha.pk}"' in offered

    form = _form(judge, benchmark, [alpha, *systems], **button)
    page = client.post(reverse("judge:run-new"), form)

    assert page.status_code == 400
    assert page.context["form"].errors["systems"] == [
        "Every chosen system needs a response to every selected instruction: alpha-7b has no "
        "response to task_1, task_2. Leave those systems or instructions out, or import the "
        "responses first."
    ]
    assert not JudgeRun.objects.exists() and not EngineRun.objects.exists()


def test_the_judge_run_page_says_which_judges_cost_money(client, researcher):
    make_judge(name="free-judge", backend="fake")
    make_judge("http://127.0.0.1:9/v1", name="paid-judge")
    client.force_login(researcher)
    page = client.get(reverse("judge:run-new")).text
    assert "free-judge (offline fake: no bill, researchers may use it)" in page
    assert "paid-judge (paid API: admins only)" in page


def test_the_engine_run_page_names_a_failed_conversation_by_instruction_and_system(
    client, researcher
):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1, 1), systems=("sys-a",))
    run = judge_run_create(config=make_judge(backend="fake"), benchmark=benchmark, systems=systems)
    response = run.conversations.order_by("pk").last().response
    run.engine_run.units.create(key=f"judge:r{response.pk}", status="failed", error="HTTP 500")
    client.force_login(researcher)
    data = client.get(reverse("engine:run-progress", args=[run.engine_run_id])).json()
    assert data["errors"] == [
        {"unit": f"judge:r{response.pk}", "label": "task_2 · sys-a", "error": "HTTP 500"}
    ]


def test_a_failed_conversation_is_named_by_instruction_and_system_on_the_judge_run_page(
    client, researcher
):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1, 1), systems=("sys-<a>",))
    run = judge_run_create(config=make_judge(backend="fake"), benchmark=benchmark, systems=systems)
    conversation = run.conversations.order_by("pk").last()
    conversation.status, conversation.error = "failed", "HTTP 500"
    conversation.save()
    client.force_login(researcher)
    page = client.get(reverse("judge:run-detail", args=[run.pk])).text
    assert "task_2 · sys-&lt;a&gt; (conversation" in page and "HTTP 500" in page
    api = client.get(reverse("api-judge-run-progress", args=[run.pk])).json()
    assert api["errors"][0]["instruction"] == "task_2" and api["errors"][0]["system"] == "sys-<a>"


def test_a_start_over_the_users_run_start_limit_is_refused_on_the_form_and_makes_nothing(
    client, researcher, worker_rates
):
    """RUN_START_RATE holds on the judge page too: the refused start keeps no judge run and no
    engine run, and the form comes back as it was sent, saying when to try again."""
    worker_rates(run_starts="1/hour")
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1, 1))
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(researcher)
    # The first run judges task_1 only: a start over its responses is refused while it is queued.
    first = _form(judge, benchmark, systems, instruction_ids="task_1")
    assert client.post(reverse("judge:run-new"), first).status_code == 302

    form = _form(judge, benchmark, systems, instruction_ids="task_2", seed=41)
    refused = client.post(reverse("judge:run-new"), form)

    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert "Too many run starts from your account (at most 1/hour)" in refused.text
    assert 'value="task_2"' in refused.text and 'value="41"' in refused.text
    assert JudgeRun.objects.count() == 1 and EngineRun.objects.count() == 1


def test_a_system_whose_generation_failed_is_no_choice_for_a_judge_run(client, researcher):
    from tests.annotate.engine.conftest import system_of_a_failed_generation

    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,), systems=("a", "b"))
    system_of_a_failed_generation(benchmark)
    client.force_login(researcher)
    page = client.get(reverse("judge:run-new")).text
    offered = set(re.findall(r'name="systems" value="(\d+)"', page))
    assert offered == {str(system.pk) for system in systems} and "downsys" not in page


def test_the_judge_run_page_and_api_show_what_failed_attempts_may_have_cost(client, admin_user):
    """Two 500s (the model may have run: possibly billed) then answers: the judge run shows the
    engine run's possibly billed amount beside its cost, on its page and in its progress API."""
    from annotate.engine.services import engine_run_execute

    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,), systems=("a",))
    client.force_login(admin_user)
    with StubOpenAI() as stub:
        judge = _paid_judge(stub)
        stub.fail_next(500, times=2)
        run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
        engine_run_execute(run_id=run.engine_run_id, sleep=lambda seconds: None)
    run.engine_run.refresh_from_db()
    billed = run.engine_run.possibly_billed_usd
    assert billed > 0 and run.engine_run.cost_usd > 0
    detail = client.get(reverse("judge:run-detail", args=[run.pk])).text
    assert f"{usd(run.engine_run.cost_usd)} billed, and {usd(billed)} possibly billed" in detail
    api = client.get(reverse("api-judge-run-progress", args=[run.pk])).json()
    assert api["possibly_billed_usd"] == str(billed) and api["cost_usd"] == str(run.cost_usd)


@pytest.mark.django_db
def test_the_judge_run_pages_show_money_in_dollars_and_cents(client, researcher):
    """The judge runs' list and page show the engine run's amounts through the money filter,
    as the engine's run pages do, never the six stored decimals."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,), systems=("a",))
    run = judge_run_create(
        config=make_judge(name="fake-judge", backend="fake"), benchmark=benchmark, systems=systems
    )
    EngineRun.objects.filter(pk=run.engine_run_id).update(
        cost_usd=Decimal("0.004999"), possibly_billed_usd=Decimal("12.345")
    )
    client.force_login(researcher)
    listed = client.get(reverse("judge:run-list")).text
    assert "<td>$0.005</td>" in listed and "0.004999" not in listed
    assert '<th scope="col">Cost</th>' in listed
    detail = client.get(reverse("judge:run-detail", args=[run.pk])).text
    # A fake judge bills nobody: the page says what its calls would have cost.
    assert "$0.005 at its prices, billed to nobody" in detail
    assert "and $12.35 for failed attempts" in detail and "possibly billed" not in detail
    assert "0.004999" not in detail and "12.345000" not in detail


def _system_boxes(page) -> dict[str, bool]:
    """The Systems checkboxes of the judge run form: label text -> ticked."""
    boxes = re.findall(r'<label for="id_systems_\d+"><input ([^>]*)>\s*([^<]+)</label>', page.text)
    return {name.strip(): " checked" in attrs for attrs, name in boxes}


def test_the_run_form_lists_and_ticks_the_systems_of_the_chosen_benchmark(client, researcher):
    """An address naming the benchmark and the judge (`?benchmark=&config=`) opens the form on
    that benchmark's systems only, all ticked, and that judge."""
    chosen, _, _ = make_benchmark(systems=("alpha", "beta"))
    make_benchmark(systems=("gamma",))
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(researcher)
    page = client.get(reverse("judge:run-new"), {"benchmark": chosen.pk, "config": judge.pk})
    assert _system_boxes(page) == {"alpha": True, "beta": True}
    assert f'<option value="{chosen.pk}" selected>' in page.text
    assert f'<option value="{judge.pk}" selected>' in page.text
    assert "data-reload-on-change" in page.text and "data-one-required" in page.text


def test_the_run_form_takes_the_only_benchmark_without_asking(client, researcher):
    make_benchmark(systems=("alpha",))
    client.force_login(researcher)
    assert _system_boxes(client.get(reverse("judge:run-new"))) == {"alpha": True}


def test_choosing_another_benchmark_keeps_what_was_typed_and_starts_nothing(client, researcher):
    """The benchmark's select sends the form with `choose_benchmark` (site.js, or the button
    beside it without JavaScript): the page comes back with that benchmark's systems, all
    ticked, and every other field as it was typed; no run is made and nothing is estimated."""
    first, (alpha,), _ = make_benchmark(systems=("alpha",))
    second, _, _ = make_benchmark(systems=("beta", "gamma"))
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(researcher)
    typed = _form(
        judge,
        second,
        [alpha],
        subset="hard",
        instruction_ids="task_1, task_2",
        sample="2",
        seed="17",
        spending_cap_usd="1.25",
        replace="on",
        choose_benchmark="1",
    )
    page = client.post(reverse("judge:run-new"), typed)

    assert page.status_code == 200
    assert _system_boxes(page) == {"beta": True, "gamma": True}
    assert f'<option value="{second.pk}" selected>' in page.text
    assert f'<option value="{judge.pk}" selected>' in page.text
    assert '<option value="hard" selected>' in page.text
    for field, value in [
        ("instruction_ids", "task_1, task_2"),
        ("sample", "2"),
        ("seed", "17"),
        ("spending_cap_usd", "1.25"),
    ]:
        assert re.search(rf'<input [^>]*name="{field}" [^>]*value="{re.escape(value)}"', page.text)
    assert not re.search(r'<input [^>]*name="replace" [^>]*checked', page.text)
    assert not page.context["form"].is_bound and page.context["estimate"] is None
    assert not JudgeRun.objects.exists() and not EngineRun.objects.exists()


def test_without_javascript_a_button_beside_the_benchmark_lists_its_systems(client, researcher):
    make_benchmark(systems=("alpha",))
    make_benchmark(systems=("beta",))
    client.force_login(researcher)
    page = client.get(reverse("judge:run-new"))
    noscript = re.search(r"<noscript>(.*?)</noscript>", page.text, re.S)
    assert noscript and 'name="choose_benchmark"' in noscript.group(1)
    assert "formnovalidate" in noscript.group(1) and "List its systems" in noscript.group(1)
    assert 'data-reload-on-change="choose_benchmark"' in page.text
