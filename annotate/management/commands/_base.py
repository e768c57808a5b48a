"""The one place where our errors become command-line errors (a message and a non-zero exit)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from django.core.management.base import BaseCommand, CommandError

from annotate.errors import AnnotateError


class ImportCommand(BaseCommand):
    """A command that runs one import service and prints its summary."""

    def run_import(self, service: Callable[..., Any], **arguments: Any) -> None:
        try:
            summary = service(**arguments)
        except AnnotateError as error:
            raise CommandError(f"{error}\nNothing was written.") from None
        self.stdout.write(summary.message)


@contextmanager
def output_file(path: str, *, newline: str | None = None) -> Iterator[IO[str]]:
    """Open a file a command writes (UTF-8); one it cannot open is a CommandError naming it."""
    try:
        output = open(path, "w", encoding="utf-8", newline=newline)  # noqa: SIM115
    except OSError as error:
        raise CommandError(f"{path}: cannot write the file ({error.strerror})") from None
    with output:
        yield output
