"""Commands with --output, as a researcher types them: a path that cannot be written is a
command error naming the option and the path (no traceback), and an unknown name is named."""

from unittest import mock

import pytest
from django.core import checks
from django.core.management import ManagementUtility, call_command
from django.core.management.base import CommandError
from django.utils import timezone

from annotate.revision.models import Study
from tests.factories import benchmark_with_responses

pytestmark = pytest.mark.django_db


@pytest.fixture
def named():
    benchmark, systems = benchmark_with_responses(instructions=2, systems=1)
    Study.objects.create(name="study", created_at=timezone.now())
    return {"benchmark": benchmark.name, "system": systems[0].name, "study": "study"}


COMMANDS = {
    "export_labels": ["--benchmark", "{benchmark}", "--format", "csv"],
    "report": ["--benchmark", "{benchmark}"],
    "export_responses": ["--benchmark", "{benchmark}", "--system", "{system}"],
    "export_sessions": ["--study", "{study}"],
    "revision_report": ["--study", "{study}"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_output_in_a_missing_folder_is_a_command_error_naming_it(command, named, tmp_path):
    output = tmp_path / "no-such-folder" / "out.txt"
    arguments = [value.format(**named) for value in COMMANDS[command]]
    with pytest.raises(CommandError) as raised:
        call_command(command, *arguments, "--output", str(output))
    assert str(raised.value) == (
        f"--output {output}: cannot write this file (No such file or directory)."
    )
    assert not output.parent.exists()


@pytest.mark.parametrize("skip_checks", [[], ["--skip-checks"]])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_reports_and_exports_run_without_the_system_checks(command, skip_checks, named, tmp_path):
    """The checks import every page's module: more CPU than a report of the demo data. Run as
    `manage.py` runs it (call_command skips every command's checks); `--skip-checks` is still
    accepted, as when the checks ran."""
    failing = [checks.Error("a page's module is broken", id="test.E001")]
    output = tmp_path / "out.txt"
    arguments = [value.format(**named) for value in COMMANDS[command]]
    argv = ["manage.py", command, *arguments, "--output", str(output), *skip_checks]
    with mock.patch("django.core.management.base.checks.run_checks", return_value=failing) as run:
        ManagementUtility(argv).execute()
    assert not run.called
    assert output.exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_output_that_can_be_written_still_is(command, named, tmp_path):
    output = tmp_path / "out.txt"
    arguments = [value.format(**named) for value in COMMANDS[command]]
    call_command(command, *arguments, "--output", str(output))
    assert output.exists()


def test_export_responses_names_an_unknown_benchmark_or_system(named, tmp_path):
    output = tmp_path / "out.jsonl"
    with pytest.raises(
        CommandError,
        match=rf"^--system: no system named 'nope' "
        rf"\(the benchmark's systems here: '{named['system']}'\)\.$",
    ):
        call_command(
            "export_responses", "--benchmark", named["benchmark"], "--system", "nope",
            "--output", str(output),
        )  # fmt: skip
    with pytest.raises(
        CommandError,
        match=rf"^--benchmark: no benchmark named 'nope' "
        rf"\(the benchmarks here: '{named['benchmark']}'\)\.$",
    ):
        call_command(
            "export_responses", "--benchmark", "nope", "--system", named["system"],
            "--output", str(output),
        )  # fmt: skip
    assert not output.exists()
