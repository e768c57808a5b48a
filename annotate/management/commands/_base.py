"""The one place where our errors become command-line errors (a message and a non-zero exit)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
