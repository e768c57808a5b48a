"""Print every table of a benchmark's report (leaderboard, agreement, sources, breakdowns)."""

from __future__ import annotations

from django.core.management.base import CommandError

from annotate.management.commands._base import ReadOnlyCommand, output_file
from annotate.selectors.identities import OPERATOR
from evaluation import report_formats
from evaluation.conventions import (
    ACC_CONVENTIONS,
    DEFAULT_ACC,
    DEFAULT_UNKNOWN,
    UNKNOWN_CONVENTIONS,
)
from evaluation.errors import EvaluationError
from evaluation.services.reports import benchmark_for_report, report_build

FORMATS = {
    "json": report_formats.report_json,
    "csv": report_formats.report_csv,
    "latex": report_formats.report_latex,
    "md": report_formats.report_markdown,
}


class Command(ReadOnlyCommand):
    help = (
        "Print a benchmark's report: DRFR leaderboard, kappa, sources vs experts, breakdowns. "
        "Run by an operator, it names every annotator, crowd workers by their platform id."
    )

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", required=True, help="Benchmark name.")
        parser.add_argument("--format", choices=sorted(FORMATS), default="md")
        parser.add_argument(
            "--unknown",
            choices=list(UNKNOWN_CONVENTIONS),
            default=DEFAULT_UNKNOWN,
            help="How DRFRs count UNKNOWN and unasked questions (default exclude). "
            + "; ".join(f"{name}: {text}" for name, text in UNKNOWN_CONVENTIONS.items()),
        )
        parser.add_argument(
            "--acc-unknown",
            choices=list(ACC_CONVENTIONS),
            default=DEFAULT_ACC,
            help="How ACC (Table 4) treats a source's UNKNOWN (default exclude). "
            + "; ".join(f"{name}: {text}" for name, text in ACC_CONVENTIONS.items()),
        )
        parser.add_argument("--output", help="Write to this file instead of standard output.")

    def handle(self, *args, **options):
        try:
            benchmark = benchmark_for_report(benchmark_name=options["benchmark"])
            report = report_build(
                benchmark=benchmark,
                unknown=options["unknown"],
                acc_unknown=options["acc_unknown"],
                # Whoever runs manage.py runs the site: every name, crowd worker ids too, as
                # `manage.py export_labels` (annotate.selectors.identities).
                scope=OPERATOR,
            )
        except EvaluationError as error:
            raise CommandError(str(error)) from None
        text = FORMATS[options["format"]](report)
        if options["output"]:
            with output_file(options["output"]) as output:
                output.write(text)
            self.stderr.write(f"Wrote the report of {benchmark.name} to {options['output']}.")
        else:
            self.stdout.write(text)
