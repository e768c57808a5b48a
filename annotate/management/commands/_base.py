"""The one place where our errors become command-line errors (a message and a non-zero exit)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError

from annotate.errors import AnnotateError


class ReadOnlyCommand(BaseCommand):
    """A command that reads the database and prints or writes a file (a report, an export)
    without changing anything, and so runs without Django's system checks, as `shell` does.

    The checks import every page's module (the URL checks), which cost more CPU than the demo
    data's reports. None decides what such a command reads or prints: Django's look at models,
    URLs, the admin and templates (a broken model fails the command's own queries anyway), ours
    at how new crowd publications are priced (crowd.W001) and, with `--deploy`, at a
    deployment's settings; annotate.W002 (labels that count in no result) runs only with
    `--database`, which a command's checks never pass. They still run at `manage.py check`,
    `migrate`, `makemigrations` (`make test`) and `runserver`. `--skip-checks` is accepted, as
    when the checks ran.
    """

    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.add_argument("--skip-checks", action="store_true", help=argparse.SUPPRESS)
        return parser


class ImportCommand(BaseCommand):
    """A command that runs one import service and prints its summary."""

    def run_import(self, service: Callable[..., Any], **arguments: Any) -> None:
        try:
            summary = service(**arguments)
        except AnnotateError as error:
            raise CommandError(f"{error}\nNothing was written.") from None
        self.stdout.write(summary.message)


def name_argument(what: str) -> Callable[[str], str]:
    """Return the argparse type of an option naming a `what` the import makes if new: a blank
    name is refused as an argument error (exit code 2), before the file is read."""

    def name(value: str) -> str:
        if not value.strip():
            raise argparse.ArgumentTypeError(f"the {what} needs a name")
        return value

    return name


def output_error(path: str, error: OSError) -> CommandError:
    """The error for an --output file that cannot be written (a missing folder, say)."""
    return CommandError(f"--output {path}: cannot write this file ({error.strerror}).")


@contextlib.contextmanager
def output_file(path: str, *, newline: str | None = None) -> Iterator[TextIO]:
    """Open an --output file for writing (UTF-8); one that cannot be opened is a command error."""
    try:
        # Only the open is guarded: an error while writing is not about the path.
        handle = open(path, "w", encoding="utf-8", newline=newline)  # noqa: SIM115
    except OSError as error:
        raise output_error(path, error) from None
    with handle:
        yield handle
