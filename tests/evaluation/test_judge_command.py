"""manage.py judge and judge_config."""

from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from annotate.engine.models import EngineRun
from annotate.engine.services import engine_run_estimate
from annotate.models import Annotator, AnnotatorKind, Label, System
from annotate.templatetags.money import usd_at_most
from evaluation.models import JudgeConfig, JudgeRun, RunStatus
from evaluation.services.judge_configs import judge_config_create
from evaluation.services.judge_runs import judge_run_create
from tests.annotate.engine.conftest import dollar_a_thousand
from tests.evaluation.judge_helpers import make_benchmark, make_judge
from tests.evaluation.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db


def test_judge_command_runs_then_resumes_a_run_with_only_failed_work(capsys):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2, 1), systems=("a", "b"))
    with StubOpenAI() as stub:
        judge = make_judge(stub.base_url, max_retries=0, concurrency=1)
        stub.fail_next(503)
        with pytest.raises(CommandError, match="1 conversations failed"):
            call_command("judge", config=judge.name, benchmark=benchmark.name, systems="a")
        run = JudgeRun.objects.get()
        assert run.status == RunStatus.FAILED and run.selection == "all"
        out = capsys.readouterr().out
        assert f"Created judge run {run.pk}" in out and "HTTP 503" in out

        call_command("judge", run=run.pk)
        out, err = capsys.readouterr()
        assert "2/2" in err  # the progress bar (conversations), on standard error, ends full
        assert f"Run {run.pk}: Done. 3/3 questions, 0 failed conversations" in out
        assert len(stub.answered) == 3
    assert Label.objects.filter(annotator=judge.annotator, response__system__name="a").count() == 3
    assert not Label.objects.filter(response__system__name="b").exists()


def test_judge_command_reports_bad_names_and_selection():
    benchmark, _, _ = make_benchmark(questions_per_instruction=(1,))
    judge = make_judge(backend="fake")
    with pytest.raises(
        CommandError,
        match=r"^--config: no judge configuration named 'nope' "
        r"\(the judge configurations here: 'stub-judge'\)\.$",
    ):
        call_command("judge", config="nope", benchmark=benchmark.name)
    with pytest.raises(
        CommandError,
        match=rf"^--benchmark: no benchmark named 'nope' \(the benchmarks here: '{benchmark.name}'\)\.$",
    ):
        call_command("judge", config=judge.name, benchmark="nope")
    with pytest.raises(CommandError, match="No system named zz"):
        call_command("judge", config=judge.name, benchmark=benchmark.name, systems="zz")
    with pytest.raises(CommandError, match="Sample size must be between 1 and 1"):
        call_command("judge", config=judge.name, benchmark=benchmark.name, sample=3)
    assert not JudgeRun.objects.exists()


def test_judge_command_spending_cap_stops_the_run_and_says_so(capsys):
    # As in test_judge_runs: under $0.70 the $1-per-1k endpoint's judge makes 2 of its 4 calls.
    benchmark, _, _ = make_benchmark(questions_per_instruction=(2, 2))
    with StubOpenAI() as stub:
        judge_config_create(name="capped", endpoint=dollar_a_thousand(stub, concurrency=1))
        with pytest.raises(CommandError) as stopped:
            call_command(
                "judge", "--config", "capped", "--benchmark", benchmark.name,
                "--spending-cap", "0.70",
            )  # fmt: skip
        assert len(stub.requests) == 2
        run = JudgeRun.objects.get()
        assert str(stopped.value) == (
            f"Run {run.pk} did not finish: Stopped: the next call would exceed the spending cap "
            f"of $0.7 (raise the cap to do the rest). Raise the cap to go on: judge --run "
            f"{run.pk} --spending-cap USD"
        )
        assert run.engine_run.spending_cap_usd == Decimal("0.70")
        assert f"Run {run.pk}: Stopped. 2/4 questions" in capsys.readouterr().out
        # Resumed as it is, it stops again at once; under a higher cap it does the rest.
        with pytest.raises(CommandError, match="exceed the spending cap of \\$0.7 "):
            call_command("judge", "--run", str(run.pk))
        assert len(stub.requests) == 2
        with pytest.raises(CommandError, match="has spent \\$0.495 already; a cap of \\$0.4 "):
            call_command("judge", "--run", str(run.pk), "--spending-cap", "0.4")
        call_command("judge", "--run", str(run.pk), "--spending-cap", "5")
        assert len(stub.requests) == 4
    out = capsys.readouterr().out
    assert f"Run {run.pk}: spending cap $0.7 -> $5." in out and "Done. 4/4 questions" in out


def test_judge_command_goes_on_with_a_run_stopped_from_its_page(capsys):
    """The judge run's page says "Run it again (here, or manage.py judge --run N)"."""
    from annotate.engine.services import engine_run_stop

    benchmark, _, _ = make_benchmark(questions_per_instruction=(2, 1))
    with StubOpenAI() as stub:
        judge = make_judge(stub.base_url)
        run = judge_run_create(config=judge, benchmark=benchmark, systems=System.objects.all())
        engine_run_stop(run=run.engine_run)
        call_command("judge", "--run", str(run.pk))
        assert len(stub.answered) == 3
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and "Done. 3/3 questions" in capsys.readouterr().out


def test_judge_command_refuses_to_go_on_with_a_done_run_naming_the_judge_run():
    benchmark, _, _ = make_benchmark(questions_per_instruction=(2, 1))
    with StubOpenAI() as stub:
        judge = make_judge(stub.base_url)
        EngineRun.objects.create(kind="generation", endpoint=judge.endpoint)  # ids differ
        run = judge_run_create(config=judge, benchmark=benchmark, systems=System.objects.all())
        call_command("judge", "--run", str(run.pk))
        assert run.pk != run.engine_run_id and len(stub.answered) == 3
        with pytest.raises(CommandError) as refused:
            call_command("judge", "--run", str(run.pk), "--spending-cap", "20")
        assert str(refused.value) == f"Run {run.pk} is done: nothing left to resume."
        assert len(stub.answered) == 3
    run.engine_run.refresh_from_db()
    assert run.engine_run.status == "done" and run.engine_run.spending_cap_usd is None


def test_judge_command_dry_run_prints_the_estimate_and_keeps_nothing(capsys):
    benchmark, _, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a", "b"))
    with StubOpenAI() as stub:
        judge = make_judge(stub.base_url, max_tokens=5, price_prompt_per_1k=Decimal("0.03"))
        arguments = ["--config", judge.name, "--benchmark", benchmark.name, "--dry-run"]
        call_command("judge", *arguments, "--spending-cap", "1")
        assert stub.requests == []
    out = capsys.readouterr().out
    assert not JudgeRun.objects.exists() and not EngineRun.objects.exists()
    run = judge_run_create(config=judge, benchmark=benchmark, systems=System.objects.all())
    estimate = engine_run_estimate(run=run.engine_run)
    assert out == (
        "Dry run (nothing sent, no run kept): 4 conversations to judge (0 done already), "
        f"10 calls, about {estimate.prompt_tokens} prompt + at most 50 completion tokens, "
        f"at most {usd_at_most(estimate.cost_usd)} (${estimate.cost_usd}).\n"
    )
    call_command("judge", "--run", str(run.pk), "--dry-run")  # what a resume would still do
    assert f"Run {run.pk} (dry run, nothing sent): 4 conversations" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("cap", "message"),
    [
        ("-1", "The spending cap cannot be negative"),
        ("lots", "Enter a number"),
        ("1000000", "Ensure that there are no more than 6 digits before the decimal point"),
    ],
)
def test_judge_command_refuses_a_bad_cap_naming_the_option(cap, message):
    benchmark, _, _ = make_benchmark(questions_per_instruction=(1,))
    judge = make_judge(backend="fake")
    with pytest.raises(CommandError, match=f"argument --spending-cap: {message}"):
        call_command(
            "judge", "--config", judge.name, "--benchmark", benchmark.name, "--spending-cap", cap
        )
    assert not JudgeRun.objects.exists()


def test_judge_config_command_creates_the_llm_annotator():
    call_command("judge_config", "gpt4-official", "--backend", "openai", "--concurrency", "16")
    config = JudgeConfig.objects.get(name="gpt4-official")
    endpoint = config.endpoint  # the judge's engine endpoint, made from the options
    assert endpoint.name == "gpt4-official" and endpoint.base_url == "https://api.openai.com/v1"
    assert endpoint.concurrency == 16 and endpoint.requests_per_minute == 200
    assert endpoint.tokens_per_minute == 40_000 and str(endpoint.price_prompt_per_1k) == "0.030000"
    assert (endpoint.model, endpoint.max_tokens, endpoint.temperature) == ("gpt-4-0314", 16, 0)
    annotator = Annotator.objects.get(name="gpt4-official")
    assert annotator.kind == AnnotatorKind.LLM and annotator.judge_config == "gpt4-official"
    with pytest.raises(CommandError, match="taken"):
        call_command("judge_config", "gpt4-official")
    with pytest.raises(CommandError, match="Unknown judge back-end"):
        call_command("judge_config", "other", "--backend", "nonsense")
    with pytest.raises(CommandError, match="concurrency must be at least 1"):
        call_command("judge_config", "other", "--concurrency", "0")
    assert not Annotator.objects.filter(name="other").exists()


def test_judge_config_command_can_use_an_existing_endpoint():
    call_command("endpoint_create", "shared", "--base-url", "", "--model", "fake-judge")
    call_command("judge_config", "on-shared", "--endpoint", "shared", "--protocol", "all_in_one")
    config = JudgeConfig.objects.get(name="on-shared")
    assert config.endpoint.name == "shared" and config.protocol == "all_in_one"
    with pytest.raises(CommandError, match="No endpoint"):
        call_command("judge_config", "x", "--endpoint", "missing")


def test_a_paid_backend_needs_its_api_key_in_the_environment(monkeypatch):
    benchmark, _, _ = make_benchmark(questions_per_instruction=(1,))
    judge = make_judge("http://127.0.0.1:9/v1", api_key_env="JUDGE_TEST_KEY")
    monkeypatch.delenv("JUDGE_TEST_KEY", raising=False)
    with pytest.raises(CommandError, match="set the environment variable JUDGE_TEST_KEY"):
        call_command("judge", config=judge.name, benchmark=benchmark.name)


def test_the_api_key_is_read_from_the_named_variable_and_sent_as_a_bearer_token(monkeypatch):
    benchmark, _, _ = make_benchmark(questions_per_instruction=(1,))
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-test-123")
    with StubOpenAI() as stub:
        judge = make_judge(stub.base_url, api_key_env="JUDGE_TEST_KEY")
        call_command("judge", config=judge.name, benchmark=benchmark.name)
    assert stub.authorizations == ["Bearer sk-test-123"]


def test_a_judge_on_the_offline_fake_is_not_paced_unless_its_creator_asks():
    """`judge_config NAME` (JUDGE_BACKEND=fake) stored GPT-4's 200 requests a minute, which
    held a judge on the fake to about 3 calls a second."""
    call_command("judge_config", "fake-judge", "--backend", "fake")
    fake = JudgeConfig.objects.get(name="fake-judge").endpoint
    assert fake.base_url == "" and fake.requests_per_minute == 1_000_000
    assert fake.tokens_per_minute == 1_000_000_000
    call_command("judge_config", "slow-judge", "--backend", "fake", "--rpm", "30", "--tpm", "900")
    slow = JudgeConfig.objects.get(name="slow-judge").endpoint
    assert (slow.requests_per_minute, slow.tokens_per_minute) == (30, 900)


def test_resuming_a_done_judge_run_on_its_page_names_the_judge_run(client, admin_user):
    """A POST to the judge run's resume named the engine run behind it ("Run 2 is done"),
    not the judge run the researcher asked about."""
    from django.urls import reverse

    benchmark, _, _ = make_benchmark(questions_per_instruction=(2, 1))
    with StubOpenAI() as stub:
        judge = make_judge(stub.base_url)
        EngineRun.objects.create(kind="generation", endpoint=judge.endpoint)  # ids differ
        run = judge_run_create(config=judge, benchmark=benchmark, systems=System.objects.all())
        call_command("judge", "--run", str(run.pk))
        client.force_login(admin_user)
        page = client.post(reverse("judge:run-resume", args=[run.pk]))
    assert run.pk != run.engine_run_id
    assert f"Judge run {run.pk} is done: nothing left to resume." in page.content.decode()
    assert f"Run {run.engine_run_id} is done" not in page.content.decode()
    assert len(stub.answered) == 3


def test_judge_command_without_systems_judges_those_of_the_benchmark_only(capsys):
    """No --systems: every system with a response in the benchmark (systems_by_name), none of
    another benchmark's; names missing are all named, as the API names them."""
    benchmark, _, _ = make_benchmark(questions_per_instruction=(1, 1), systems=("a", "b"))
    make_benchmark(questions_per_instruction=(1,), systems=("elsewhere",))
    judge = make_judge(backend="fake")

    call_command("judge", config=judge.name, benchmark=benchmark.name, dry_run=True)
    assert (
        "Dry run (nothing sent, no run kept): 4 conversations to judge" in capsys.readouterr().out
    )
    with pytest.raises(
        CommandError,
        match=r"^No system named ghost, zed \(the benchmark's systems here: 'a', 'b'\)\.$",
    ):
        call_command("judge", config=judge.name, benchmark=benchmark.name, systems="zed,a,ghost")
    assert not JudgeRun.objects.exists()


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_judge_command_refuses_a_system_with_no_response_in_the_benchmark(dry_run):
    benchmark, _, _ = make_benchmark(questions_per_instruction=(1, 1), systems=("beta-7b",))
    make_benchmark(questions_per_instruction=(1,), systems=("alpha-7b",))
    judge = make_judge(backend="fake")
    arguments = ["--config", judge.name, "--benchmark", benchmark.name, *dry_run]

    with pytest.raises(CommandError) as refused:
        call_command("judge", *arguments, "--systems", "alpha-7b,beta-7b")

    assert refused.value.returncode == 1  # manage.py exits with it
    assert str(refused.value) == (
        "Every chosen system needs a response to every selected instruction: alpha-7b has no "
        "response to task_1, task_2. Leave those systems or instructions out, or import the "
        "responses first."
    )
    assert not JudgeRun.objects.exists() and not EngineRun.objects.exists()
