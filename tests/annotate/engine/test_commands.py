"""endpoint_create, generate and export_responses, as a researcher types them."""

import json
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotate.engine.models import Endpoint, EngineRun
from annotate.models import Response, System
from tests.annotate.engine.conftest import make_instructions

pytestmark = pytest.mark.django_db


def _endpoint(stub, name="stub-ep"):
    call_command(
        "endpoint_create", name, "--base-url", stub.base_url, "--model", "m1",
        "--concurrency", "4", "--rpm", "100000", "--tpm", "10000000", "--max-tokens", "64",
        "--price-prompt-per-1k", "0.5", "--price-completion-per-1k", "1.5",
    )  # fmt: skip
    return Endpoint.objects.get(name=name)


def test_endpoint_create_stores_every_option_and_refuses_a_disallowed_key_variable(capsys):
    call_command("endpoint_create", "offline", "--base-url", "", "--model", "fake-1")
    assert "offline fake back-end" in capsys.readouterr().out
    assert Endpoint.objects.get(name="offline").is_fake
    with pytest.raises(CommandError, match="^--api-key-env: "):
        call_command(
            "endpoint_create", "x", "--base-url", "http://h/v1", "--model", "m",
            "--api-key-env", "DJANGO_SECRET_KEY",
        )  # fmt: skip
    assert not Endpoint.objects.filter(name="x").exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--rpm", "-5"], "--rpm: Must be at least 1."),
        (["--tpm", "0"], "--tpm: Must be at least 1."),
        (["--timeout", "0"], "--timeout: Must be more than 0."),
        (["--api-key-env", "DJANGO_SECRET_KEY"], "--api-key-env: "),
        (["--max-tokens", "0"], "--max-tokens: must be at least 1"),
        (["--price-prompt-per-1k", "-1"], "--price-prompt-per-1k: a price cannot be negative."),
        (["--base-url", "ftp://h"], "--base-url: 'ftp://h' is not an http(s) address."),
    ],
)
def test_endpoint_create_names_the_option_typed_not_the_field_it_sets(arguments, message):
    with pytest.raises(CommandError) as refused:
        call_command(
            "endpoint_create", "x", "--base-url", "http://h/v1", "--model", "m", *arguments
        )
    assert str(refused.value).startswith(message)
    assert "Field '" not in str(refused.value) and str(refused.value).endswith(
        "Nothing was written."
    )
    assert not Endpoint.objects.exists()


def test_endpoint_create_names_the_endpoint_name_when_it_is_taken():
    call_command("endpoint_create", "x", "--base-url", "", "--model", "m")
    with pytest.raises(CommandError, match="^name: an endpoint named 'x' exists already"):
        call_command("endpoint_create", "x", "--base-url", "", "--model", "m")


def test_generate_creates_the_system_prints_a_summary_and_a_rerun_makes_no_call(stub, capsys):
    benchmark, instructions = make_instructions(3)
    endpoint = _endpoint(stub)
    arguments = ["--benchmark", "bench", "--system", "gen-sys", "--endpoint", "stub-ep"]

    call_command("generate", *arguments)
    out = capsys.readouterr().out
    assert "calls made 3, failed 0, skipped 0" in out and "3/3 responses" in out
    system = System.objects.get(name="gen-sys")
    assert system.generation_endpoint == endpoint and system.responses.count() == 3
    assert stub.requests[0]["max_tokens"] == 64 and stub.requests[0]["model"] == "m1"

    runs = list(EngineRun.objects.values_list("pk", flat=True))
    call_command("generate", *arguments)  # nothing left: says so, exits 0, records no run
    assert capsys.readouterr().out == (
        "Nothing to do: the 3 responses of gen-sys to bench (all) are there already; "
        "no run was made.\n"
    )
    assert len(stub.requests) == 3
    assert list(EngineRun.objects.values_list("pk", flat=True)) == runs


def test_generate_chooses_instructions_and_fails_with_a_non_zero_exit(stub, capsys):
    make_instructions(4)
    _endpoint(stub)
    stub.fail_next(400, message="prompt refused")
    with pytest.raises(CommandError, match="did not finish"):
        call_command(
            "generate", "--benchmark", "bench", "--system", "s", "--endpoint", "stub-ep",
            "--instructions", "task_1,task_3",
        )  # fmt: skip
    out = capsys.readouterr().out
    assert "calls made 2, failed 1" in out and "HTTP 400" in out
    assert Response.objects.filter(system__name="s").count() == 1
    with pytest.raises(CommandError, match="No instruction task_9"):
        call_command(
            "generate", "--benchmark", "bench", "--system", "s", "--endpoint", "stub-ep",
            "--instructions", "task_9",
        )  # fmt: skip


def test_generate_sample_is_seeded_and_dry_run_sends_nothing(stub, capsys):
    make_instructions(6)
    _endpoint(stub)
    arguments = ["--benchmark", "bench", "--system", "s", "--endpoint", "stub-ep"]
    call_command("generate", *arguments, "--sample", "2", "--seed", "3", "--dry-run")
    out = capsys.readouterr().out
    assert "Dry run (nothing sent, no run kept): 2 responses to generate" in out
    assert "2 calls" in out and stub.requests == [] and not EngineRun.objects.exists()
    call_command("generate", *arguments, "--sample", "2", "--seed", "3")
    first = sorted(b["messages"][0]["content"] for b in stub.requests)
    call_command("generate", *arguments, "--sample", "2", "--seed", "3")
    assert len(stub.requests) == 2 and len(first) == 2


def test_generate_stores_the_spending_cap_and_refuses_a_negative_one_naming_the_option(
    stub, capsys
):
    make_instructions(2)
    _endpoint(stub)
    arguments = ["--benchmark", "bench", "--system", "s", "--endpoint", "stub-ep"]
    with pytest.raises(CommandError, match="argument --spending-cap: The spending cap cannot be"):
        call_command("generate", *arguments, "--spending-cap", "-1")
    assert not EngineRun.objects.exists()
    call_command("generate", *arguments, "--spending-cap", "2.5", "--dry-run")
    # A dry run keeps nothing: no run, and no system bound to this endpoint.
    assert not EngineRun.objects.exists() and not System.objects.filter(name="s").exists()
    assert stub.requests == []
    call_command("generate", *arguments, "--spending-cap", "2.5")
    run = EngineRun.objects.get()
    assert run.spending_cap_usd == Decimal("2.5") and len(stub.requests) == 2
    # A done run has nothing left: --run is refused, and its cap and status stay as they were.
    with pytest.raises(CommandError, match=rf"^Run {run.pk} is done: nothing left to resume\.$"):
        call_command("generate", "--run", str(run.pk), "--spending-cap", "9")
    run.refresh_from_db()
    assert run.spending_cap_usd == Decimal("2.5") and run.status == "done"
    assert len(stub.requests) == 2


def test_generate_run_refuses_a_run_a_worker_is_doing_and_sends_nothing(stub):
    """Two executors of one run would each budget the whole rest of its cap (and ask its units
    twice): --run on a run still beating is refused; one whose worker died goes on."""
    from datetime import timedelta

    from django.utils import timezone

    from annotate.engine.models import RunStatus
    from annotate.engine.services.generation import (
        generating_system_get_or_create,
        generation_run_create,
    )

    benchmark, _ = make_instructions(2)
    endpoint = _endpoint(stub)
    system = generating_system_get_or_create(name="s", endpoint=endpoint)
    run = generation_run_create(
        benchmark=benchmark, systems=[system], endpoint=endpoint, spending_cap_usd=Decimal("1")
    )
    EngineRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, heartbeat=timezone.now())
    with pytest.raises(CommandError, match=f"Run {run.pk} is running already"):
        call_command("generate", "--run", str(run.pk))
    assert stub.requests == []
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.error == ""

    EngineRun.objects.filter(pk=run.pk).update(
        heartbeat=timezone.now() - timedelta(hours=1)
    )  # its worker died
    call_command("generate", "--run", str(run.pk))
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and len(stub.requests) == 2


@pytest.mark.parametrize("stopped_by", ["its page", "its cap across chunks"])
def test_generate_run_goes_on_with_a_run_stopped_by_its_page_or_its_cap(stub, capsys, stopped_by):
    """A stop (from the page, or a Celery chunk meeting the cap) leaves stop_requested on the
    run; going on from the console clears it, as Run again does, instead of stopping at once."""
    from annotate.engine.models import RunStatus
    from annotate.engine.services import engine_run_stop
    from annotate.engine.services.generation import (
        generating_system_get_or_create,
        generation_run_create,
    )

    benchmark, _ = make_instructions(2)
    endpoint = _endpoint(stub)
    system = generating_system_get_or_create(name="s", endpoint=endpoint)
    cap = Decimal("0") if stopped_by == "its cap across chunks" else None
    run = generation_run_create(
        benchmark=benchmark, systems=[system], endpoint=endpoint, spending_cap_usd=cap
    )
    arguments = ["--run", str(run.pk)]
    if stopped_by == "its page":
        engine_run_stop(run=run)
    else:
        with pytest.raises(CommandError, match="Raise the cap to go on"):
            call_command("generate", *arguments)
        EngineRun.objects.filter(pk=run.pk).update(stop_requested=True)  # as a chunk sets it
        arguments += ["--spending-cap", "1"]
    call_command("generate", *arguments)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and len(stub.requests) == 2
    out = capsys.readouterr().out
    assert "2/2 responses; calls made 2" in out
    if stopped_by == "its cap across chunks":  # --spending-cap sets the cap it goes on with
        assert f"Run {run.pk}: spending cap $0 -> $1." in out and run.spending_cap_usd == 1


def test_a_run_interrupted_with_ctrl_c_is_stopped_and_goes_on_at_once(stub):
    """Ctrl-C leaves no run 'running' without a process (refused to --run until reaped)."""
    from annotate.engine.models import RunStatus
    from annotate.engine.services import engine_run_execute
    from annotate.engine.services.generation import (
        generating_system_get_or_create,
        generation_run_create,
    )

    benchmark, _ = make_instructions(2)
    endpoint = _endpoint(stub)
    system = generating_system_get_or_create(name="s", endpoint=endpoint)
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)

    def ctrl_c(done: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine_run_execute(run_id=run.pk, on_progress=ctrl_c)
    run.refresh_from_db()
    assert (run.status, run.error) == (RunStatus.CANCELLED, "Stopped on request.")
    call_command("generate", "--run", str(run.pk))
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and len(stub.requests) == 2


def test_imported_and_generated_responses_are_never_mixed(stub, tmp_path):
    make_instructions(2)
    _endpoint(stub)
    path = tmp_path / "imported.jsonl"
    path.write_text('{"id": "task_1", "output": "by hand"}\n')
    call_command("import_responses", str(path), "--benchmark", "bench", "--system", "manual")
    with pytest.raises(CommandError, match="imported responses"):
        call_command(
            "generate", "--benchmark", "bench", "--system", "manual", "--endpoint", "stub-ep"
        )
    call_command("generate", "--benchmark", "bench", "--system", "gen", "--endpoint", "stub-ep")
    with pytest.raises(CommandError, match="generates its responses"):
        call_command("import_responses", str(path), "--benchmark", "bench", "--system", "gen")


def test_export_responses_writes_status_and_usage_and_imports_back(stub, tmp_path, capsys):
    make_instructions(2)
    _endpoint(stub)
    stub.responder = lambda messages: "Generated: " + messages[0]["content"][:13]
    call_command("generate", "--benchmark", "bench", "--system", "gen", "--endpoint", "stub-ep")
    out = tmp_path / "gen.jsonl"
    call_command(
        "export_responses", "--benchmark", "bench", "--system", "gen", "--output", str(out)
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["output"], r["status"]) for r in rows] == [
        ("task_1", "Generated: Write line 1.", "ok"),
        ("task_2", "Generated: Write line 2.", "ok"),
    ]
    sent = {(u["prompt_tokens"], u["completion_tokens"]) for u in stub.usages}
    assert {(r["usage"]["prompt_tokens"], r["usage"]["completion_tokens"]) for r in rows} == sent
    assert all(r["usage"]["estimated"] is False and r["run"] for r in rows)
    call_command("import_responses", str(out), "--benchmark", "bench", "--system", "copy")
    copied = Response.objects.filter(system__name="copy").order_by("instruction__position")
    assert [r.text for r in copied] == ["Generated: Write line 1.", "Generated: Write line 2."]


def test_generate_run_leaves_no_chunk_of_an_earlier_start_asking_its_units_again(
    stub, monkeypatch, django_capture_on_commit_callbacks
):
    """A run started on Celery and stopped from its page before a worker took its chunks (or
    reaped while they waited in the queue) still has their tasks queued. Going on from the
    console must not let them go on too, as Run again does not (it drops the chunks): a chunk
    taken while the command runs asked its units a second time, outside the command's cap."""
    from datetime import timedelta

    from django.utils import timezone

    from annotate.engine.management.commands import generate
    from annotate.engine.services import engine_run_stop
    from annotate.engine.services.generation import (
        generating_system_get_or_create,
        generation_run_create,
    )
    from annotate.engine.services.runs import engine_run_chunk_execute, engine_run_dispatch

    benchmark, _ = make_instructions(4)
    endpoint = _endpoint(stub)
    system = generating_system_get_or_create(name="s", endpoint=endpoint)
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
    with django_capture_on_commit_callbacks():  # the chunk tasks wait in the queue
        first, _ = engine_run_dispatch(run_id=run.pk, chunk_units=2)
    engine_run_stop(run=run)
    EngineRun.objects.filter(pk=run.pk).update(heartbeat=timezone.now() - timedelta(hours=1))

    class BarWithAWorkerBeside(generate.RunProgressBar):
        def __call__(self, ended: int) -> None:
            if self.bar is None:  # the command's executor has started: a worker takes a chunk
                engine_run_chunk_execute(chunk_id=first.pk)
            super().__call__(ended)

    monkeypatch.setattr(generate, "RunProgressBar", BarWithAWorkerBeside)
    call_command("generate", "--run", str(run.pk))

    asked = [body["messages"][-1]["content"] for body in stub.requests]
    assert len(asked) == len(set(asked)) == 4
    run.refresh_from_db()
    assert run.status == "done" and run.calls == 4


def test_ctrl_c_keeps_the_calls_already_answered_on_the_run(stub):
    """Ctrl-C mid-run: the calls in flight end and are paid; their answers and cost are stored,
    so the cap counts them and a resume does not ask (and pay for) those units again."""
    from annotate.engine.models import EngineCall, RunStatus
    from annotate.engine.services import engine_run_execute
    from annotate.engine.services.generation import (
        generating_system_get_or_create,
        generation_run_create,
    )

    stub.delay = 0.05
    benchmark, _ = make_instructions(8)
    endpoint = _endpoint(stub)  # four calls at a time
    system = generating_system_get_or_create(name="s", endpoint=endpoint)
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)

    def ctrl_c(ended: int) -> None:
        if ended:  # the first answers are stored; other calls are in flight
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine_run_execute(run_id=run.pk, on_progress=ctrl_c)
    run.refresh_from_db()
    asked = len(stub.requests)
    # Stopped, unless the calls in flight were the last ones (then nothing is left: done).
    assert run.status == (RunStatus.DONE if asked == 8 else RunStatus.CANCELLED)
    assert run.calls == EngineCall.objects.filter(run=run).count() == asked
    assert run.units_done == Response.objects.filter(system=system).count() == asked
    if run.status == RunStatus.CANCELLED:  # a done run has nothing to go on with
        call_command("generate", "--run", str(run.pk))
    assert len(stub.requests) == 8


def test_the_dry_run_line_rounds_its_worst_case_up_and_gives_it_exactly():
    """Half up it read "at most $0.67" for $0.674120, and a cap set from it stopped the run;
    scripts that parse the line read the exact amount in brackets."""
    from annotate.engine.management.commands._run_options import dry_run_line
    from annotate.engine.services import RunEstimate

    estimate = RunEstimate(
        units=3, units_done_before=1, calls=3, prompt_tokens=37, completion_tokens=150,
        cost_usd=Decimal("0.674120"),
    )  # fmt: skip
    assert dry_run_line(estimate, units="responses to generate") == (
        "Dry run (nothing sent, no run kept): 3 responses to generate (1 done already), "
        "3 calls, about 37 prompt + at most 150 completion tokens, at most $0.68 ($0.674120)."
    )
