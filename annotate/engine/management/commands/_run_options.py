"""What the commands that start engine runs share (generate, judge, revision_judge): the
--spending-cap and --dry-run options and the line that prints an estimate."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db import transaction

from annotate.engine.errors import EngineRunDoneError
from annotate.engine.forms import SpendingCapField
from annotate.engine.models import EngineRun
from annotate.engine.services import (
    RunEstimate,
    cap_text,
    engine_run_cap_set,
    engine_run_reopen,
    engine_run_stopped_by_cap,
)
from annotate.errors import AnnotateError
from annotate.templatetags.money import usd_at_most


def spending_cap(value: str) -> Decimal | None:
    """The argparse type of --spending-cap: the pages' rule (0 or more dollars, digits the run
    can store), its message after the option's name."""
    try:
        return SpendingCapField().clean(value)
    except ValidationError as error:
        raise argparse.ArgumentTypeError(" ".join(error.messages)) from None


def add_run_cost_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spending-cap",
        type=spending_cap,
        metavar="USD",
        help="Stop the run before a call would spend more than this, in dollars (default: no "
        "cap); with --run, the cap the run goes on with (raise it after a cap stop).",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="Print the estimate only: nothing is sent, and a new run is not kept.",
    )


def estimate_line(estimate: RunEstimate, *, units: str) -> str:
    """E.g. "3 responses to generate (0 done already), 3 calls, about 37 prompt + at most 150
    completion tokens, at most $0.68 ($0.674120)." (`units` says what a unit is). The money as
    the pages show a worst case, rounded up (`usd_at_most`), then exact in brackets for the
    scripts that parse the line."""
    return (
        f"{estimate.units} {units} ({estimate.units_done_before} done already), "
        f"{estimate.calls} calls, about {estimate.prompt_tokens} prompt + at most "
        f"{estimate.completion_tokens} completion tokens, "
        f"at most {usd_at_most(estimate.cost_usd)} (${estimate.cost_usd})."
    )


def resume_here(
    cap: Decimal | None,
    *,
    run: EngineRun,
    run_id: int | None = None,
    check: Callable[[], None] | None = None,
) -> str:
    """--run: make the run ready to go on in this process as Run again does (its stop request
    cleared; refused while a worker runs it), under --spending-cap when given (raised after a
    cap stop). Return what to tell ("" without the option), naming the run as the command's
    --run does (`run_id`; default the engine run's). Refusals name the field, as on the pages.

    `check()`, when given, runs first in the same transaction, as Run again's
    `engine_run_check_again` does: a lock it takes is held till the run shows pending, and is
    taken before the run's own (the cap's, the reopen's), in the order every Run again takes
    them; what it raises keeps everything as it was."""
    before = run.spending_cap_usd
    try:
        with transaction.atomic():  # a refused reopen keeps the cap as it was
            if check is not None:  # before the cap's lock of the run, as Run again's check
                check()
            if cap is not None:
                engine_run_cap_set(run=run, cap=cap)
            engine_run_reopen(run=run)
    except EngineRunDoneError:  # named by the --run the user typed (a judge run's own id)
        raise CommandError(str(EngineRunDoneError(run_id or run.pk))) from None
    except AnnotateError as error:
        raise CommandError(str(error)) from None
    if cap is None:
        return ""
    return f"Run {run_id or run.pk}: spending cap {cap_text(before)} -> {cap_text(cap)}."


def dry_run_line(estimate: RunEstimate, *, units: str, run_id: int | None = None) -> str:
    """What --dry-run prints: the estimate of a new run (not kept) or of run `run_id`'s rest."""
    head = (
        f"Run {run_id} (dry run, nothing sent): "
        if run_id is not None
        else "Dry run (nothing sent, no run kept): "
    )
    return head + estimate_line(estimate, units=units)


def resume_hint(command: str, run_id: int, engine_run: EngineRun) -> str:
    """How to go on with a run that did not finish: the same command with --run, and a higher
    cap when the cap stopped it."""
    if engine_run_stopped_by_cap(engine_run):
        return f"Raise the cap to go on: {command} --run {run_id} --spending-cap USD"
    return f"Resume: {command} --run {run_id}"
