"""What the commands that start engine runs share (generate, judge, revision_judge): the
--spending-cap and --dry-run options and the line that prints an estimate."""

from __future__ import annotations

import argparse
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from annotate.engine.forms import SpendingCapField
from annotate.engine.services import RunEstimate


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
        help="Stop the run before a call would spend more than this, in dollars (default: no cap).",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="Print the estimate only: nothing is sent."
    )


def estimate_line(estimate: RunEstimate, *, units: str) -> str:
    """E.g. "3 responses to generate (0 done already), 3 calls, about 37 prompt + at most 150
    completion tokens, at most $0.674." (`units` says what a unit is)."""
    return (
        f"{estimate.units} {units} ({estimate.units_done_before} done already), "
        f"{estimate.calls} calls, about {estimate.prompt_tokens} prompt + at most "
        f"{estimate.completion_tokens} completion tokens, at most ${estimate.cost_usd}."
    )


def refuse_cap_on_resume(cap: Decimal | None, *, run_id: int, kept: Decimal | None) -> None:
    """--spending-cap with --run: refused, not ignored (a run keeps the cap it was made with)."""
    if cap is not None:
        kept_text = "no cap" if kept is None else f"${kept.normalize():f}"
        raise CommandError(
            f"--spending-cap is set when a run is created; run {run_id} keeps its own ({kept_text})."
        )
