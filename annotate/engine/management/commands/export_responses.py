"""Write a system's responses as JSON Lines (id, output, status, usage): import_responses reads it."""

from __future__ import annotations

from django.core.management.base import CommandError

from annotate.engine.services.generation import responses_export
from annotate.management.commands._base import ReadOnlyCommand, output_error
from annotate.models import Benchmark, System
from annotate.selectors.labels import benchmark_systems
from annotate.selectors.names import names_there_are


class Command(ReadOnlyCommand):
    help = "Export one system's responses to a benchmark as JSON Lines (id, output, status, usage)."

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True)
        parser.add_argument("--system", required=True)
        parser.add_argument("--output", required=True, help="The .jsonl file to write.")

    def handle(self, *args, **o):
        benchmark = Benchmark.objects.filter(name=o["benchmark"]).first()
        if benchmark is None:
            known = names_there_are(Benchmark.objects.all(), what="benchmarks")
            raise CommandError(f"--benchmark: no benchmark named {o['benchmark']!r} ({known}).")
        system = System.objects.filter(name=o["system"]).first()
        if system is None:
            known = names_there_are(
                benchmark_systems(benchmark=benchmark), what="benchmark's systems"
            )
            raise CommandError(f"--system: no system named {o['system']!r} ({known}).")
        try:
            count = responses_export(benchmark=benchmark, system=system, path=o["output"])
        except OSError as error:
            raise output_error(o["output"], error) from None
        self.stdout.write(f"Wrote {count} responses of {system.name} to {o['output']}.")
