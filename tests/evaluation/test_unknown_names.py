"""A report command asked for a name that is not there names the ones that are.

A new user runs the README's examples (`--benchmark InFoBench`, `--study KIWI`, `--set paper`)
against `make run`'s demo, whose benchmark, study and set have other names."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from annotate.models import System
from annotate.revision.models import Study
from annotate.selectors.labels import benchmark_systems
from annotate.selectors.names import NAMES_SHOWN
from annotate.verbalizer.models import EvaluationSet, HumanStudy
from evaluation.services.judge_configs import judge_config_create
from tests.factories import BenchmarkFactory, benchmark_with_responses

pytestmark = pytest.mark.django_db


def test_report_names_the_benchmarks_there_are():
    BenchmarkFactory(name="InFoBench demo")
    with pytest.raises(CommandError) as raised:
        call_command("report", "--benchmark", "InFoBench")
    assert str(raised.value) == (
        "No benchmark named 'InFoBench' (the benchmarks here: 'InFoBench demo')."
    )


def test_report_says_when_there_is_no_benchmark_at_all():
    with pytest.raises(CommandError, match=r"No benchmark named 'x' \(there is none yet\)\."):
        call_command("report", "--benchmark", "x")


def test_a_long_list_of_names_is_cut_with_how_many_more():
    for index in range(NAMES_SHOWN + 3):
        BenchmarkFactory(name=f"bench-{index:02d}")
    with pytest.raises(CommandError) as raised:
        call_command("report", "--benchmark", "x")
    assert "'bench-09' and 3 more)" in str(raised.value)
    assert "'bench-10'" not in str(raised.value)


@pytest.mark.parametrize(
    "command",
    [
        ["revision_report", "--format", "md"],
        ["export_sessions", "--output", "/nonexistent/out.jsonl"],
    ],
)
def test_revision_commands_name_the_studies_there_are(command):
    Study.objects.create(name="Demo revision study (KIWI)", created_at=timezone.now())
    with pytest.raises(CommandError) as raised:
        call_command(command[0], "--study", "KIWI", *command[1:])
    assert "no study is named 'KIWI' (the studies here: 'Demo revision study (KIWI)')" in str(
        raised.value
    )


@pytest.mark.parametrize("command", ["verbalizer_report", "verbalizer_run"])
def test_verbalizer_commands_name_the_sets_there_are(command):
    EvaluationSet.objects.create(
        name="Demo verbalizer set", items_per_dataset=8, seed=1, template_version="v1"
    )
    extra = ["--system", "s", "--endpoint", "e"] if command == "verbalizer_run" else []
    with pytest.raises(CommandError) as raised:
        call_command(command, "--set", "paper", *extra)
    assert (
        "--set: no evaluation set named 'paper' (the evaluation sets here: 'Demo verbalizer set')"
        in str(raised.value)
    )


def test_export_labels_names_the_benchmarks_there_are():
    BenchmarkFactory(name="InFoBench demo")
    with pytest.raises(CommandError) as raised:
        call_command("export_labels", "--benchmark", "InFoBench")
    assert str(raised.value) == (
        "No benchmark named 'InFoBench' (the benchmarks here: 'InFoBench demo')."
    )


def test_generate_names_the_benchmarks_and_endpoints_there_are():
    BenchmarkFactory(name="InFoBench demo")
    call_command(
        "endpoint_create", "demo-fake", "--base-url", "", "--model", "m", stdout=io.StringIO()
    )
    generate = ["generate", "--system", "mine", "--benchmark", "InFoBench demo", "--endpoint"]
    with pytest.raises(CommandError) as raised:
        call_command(*generate[:4], "InFoBench", *generate[5:], "demo-fake")
    assert str(raised.value) == (
        "No benchmark named 'InFoBench' (the benchmarks here: 'InFoBench demo')."
    )
    with pytest.raises(CommandError) as raised:
        call_command(*generate, "gpt-4")
    assert str(raised.value) == "No endpoint named 'gpt-4' (the endpoints here: 'demo-fake')."
    assert not System.objects.filter(name="mine").exists()


def _endpoint(name: str) -> None:
    call_command("endpoint_create", name, "--base-url", "", "--model", "m", stdout=io.StringIO())


def test_verbalizer_run_names_the_endpoints_there_are():
    """The unknown endpoint was refused without the names (generate's refusal gives them)."""
    EvaluationSet.objects.create(
        name="Demo verbalizer set", items_per_dataset=8, seed=1, template_version="v1"
    )
    run = ["verbalizer_run", "--set", "Demo verbalizer set", "--system", "m", "--endpoint"]
    with pytest.raises(CommandError) as raised:
        call_command(*run, "gpt-4")
    assert str(raised.value) == "--endpoint: no engine endpoint named 'gpt-4' (there is none yet)"
    _endpoint("demo-fake")
    _endpoint("local")
    for dry_run in ([], ["--dry-run"]):
        with pytest.raises(CommandError) as raised:
            call_command(*run, "gpt-4", *dry_run)
        assert str(raised.value) == (
            "--endpoint: no engine endpoint named 'gpt-4' (the endpoints here: 'demo-fake', "
            "'local')"
        )
    assert not System.objects.filter(name="m").exists()


def test_judge_config_names_the_endpoints_there_are():
    from evaluation.models import JudgeConfig

    with pytest.raises(CommandError) as raised:
        call_command("judge_config", "gpt-4 judge", "--endpoint", "gpt-4")
    assert str(raised.value) == "No endpoint named 'gpt-4' (there is none yet)."
    _endpoint("demo-fake")
    with pytest.raises(CommandError) as raised:
        call_command("judge_config", "gpt-4 judge", "--endpoint", "gpt-4")
    assert str(raised.value) == "No endpoint named 'gpt-4' (the endpoints here: 'demo-fake')."
    assert not JudgeConfig.objects.exists()


def test_judge_names_the_configurations_benchmarks_and_systems_there_are():
    benchmark, _ = benchmark_with_responses(instructions=1, systems=2)
    other, _ = benchmark_with_responses(instructions=1, systems=1)
    judge_config_create(name="demo-judge", backend="fake", base_url="", api_key_env="")
    systems = sorted(benchmark_systems(benchmark=benchmark).values_list("name", flat=True))
    with pytest.raises(CommandError) as raised:
        call_command("judge", "--config", "gpt-4", "--benchmark", benchmark.name)
    assert str(raised.value) == (
        "--config: no judge configuration named 'gpt-4' "
        "(the judge configurations here: 'demo-judge')."
    )
    with pytest.raises(CommandError) as raised:
        call_command("judge", "--config", "demo-judge", "--benchmark", "InFoBench")
    assert str(raised.value) == (
        f"--benchmark: no benchmark named 'InFoBench' "
        f"(the benchmarks here: {', '.join(map(repr, sorted([benchmark.name, other.name])))})."
    )
    with pytest.raises(CommandError) as raised:
        call_command(
            "judge", "--config", "demo-judge", "--benchmark", benchmark.name, "--systems", "ghost"
        )
    assert str(raised.value) == (
        f"No system named ghost (the benchmark's systems here: {', '.join(map(repr, systems))})."
    )


def test_verbalizer_publish_names_the_human_studies_there_are():
    evaluation_set = EvaluationSet.objects.create(
        name="Demo verbalizer set", items_per_dataset=8, seed=1, template_version="v1"
    )
    HumanStudy.objects.create(name="Demo human study", evaluation_set=evaluation_set)
    with pytest.raises(CommandError) as raised:
        call_command("verbalizer_publish", "paper", "--platform", "fake")
    assert str(raised.value) == (
        "no human study named 'paper' (the human studies here: 'Demo human study')"
    )


def test_the_readme_commands_on_the_demo_run_as_written(tmp_path, settings, monkeypatch, capsys):
    """The README's block "On the demo, name its own benchmark, study and set" runs against
    `load_demo` as a new user pastes it, each command printing or writing its report."""
    import shlex
    from pathlib import Path

    readme = (Path(settings.BASE_DIR) / "README.md").read_text()
    block = readme.split("On the demo, name its own benchmark", 1)[1]
    block = block.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [shlex.split(line) for line in block.splitlines() if line.strip()]
    assert len(lines) == 4
    settings.DEBUG = True
    call_command("load_demo", stdout=io.StringIO())
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    for words in lines:
        assert words[:2] == [".venv/bin/python", "manage.py"]
        printed = io.StringIO()
        call_command(*words[2:], stdout=printed)
        assert printed.getvalue().strip(), words
    assert (tmp_path / "kiwi-out.jsonl").read_text().count("\n") == 6
