import sys

from django.core.management.base import CommandError

from annotate.management.commands._base import ReadOnlyCommand, output_file
from annotate.models import Benchmark
from annotate.selectors.names import names_there_are
from annotate.services.exports import labels_export, scores_export


class Command(ReadOnlyCommand):
    help = "Write a benchmark's labels (or, with --scores, its direct scores) in the long formats."

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True)
        parser.add_argument("--format", choices=["csv", "jsonl"], default="csv")
        parser.add_argument("--scores", action="store_true", help="Direct scores (CSV) instead.")
        parser.add_argument("--output", help="File to write (default: standard output).")

    def handle(self, *args, **options):
        name = options["benchmark"]
        if not Benchmark.objects.filter(name=name).exists():
            known = names_there_are(Benchmark.objects.all(), what="benchmarks")
            raise CommandError(f"No benchmark named {name!r} ({known}).")
        if not options["output"]:
            self._export(name, sys.stdout, options)
            return
        with output_file(options["output"], newline="") as output:
            count = self._export(name, output, options)
        self.stderr.write(f"Wrote {count:,} rows to {options['output']}.")

    def _export(self, name, output, options) -> int:
        if options["scores"]:
            return scores_export(benchmark_name=name, output=output)
        return labels_export(benchmark_name=name, output=output, file_format=options["format"])
