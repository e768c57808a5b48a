"""Write a system's responses as JSON Lines (id, output, status, usage): import_responses reads it."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotate.engine.services.generation import responses_export
from annotate.models import Benchmark, System


class Command(BaseCommand):
    help = "Export one system's responses to a benchmark as JSON Lines (id, output, status, usage)."

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True)
        parser.add_argument("--system", required=True)
        parser.add_argument("--output", required=True, help="The .jsonl file to write.")

    def handle(self, *args, **o):
        try:
            benchmark = Benchmark.objects.get(name=o["benchmark"])
            system = System.objects.get(name=o["system"])
        except (Benchmark.DoesNotExist, System.DoesNotExist) as error:
            raise CommandError(f"{error} Give --benchmark and --system by name.") from None
        count = responses_export(benchmark=benchmark, system=system, path=o["output"])
        self.stdout.write(f"Wrote {count} responses of {system.name} to {o['output']}.")
