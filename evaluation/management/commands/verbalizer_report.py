import argparse

from django.core.management.base import BaseCommand, CommandError

from annotate.verbalizer.models import EvaluationSet
from evaluation.verbalizer.formats import FORMATS, TABLES, report_as
from evaluation.verbalizer.report import verbalizer_report


class Command(BaseCommand):
    help = (
        "Print a verbalizer set's accuracy rows (strict and lenient rule), or the people's "
        "agreement (--table agreement), as JSON/CSV/LaTeX/MD."
    )
    # The system checks import every page's module (URL checks: the LLM clients, matplotlib):
    # about 3 s of CPU against 0.2 s for the demo set's report. `manage.py check` runs them.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--set", required=True, dest="set_name")
        parser.add_argument("--format", default="json", choices=FORMATS)
        parser.add_argument("--table", default="rows", choices=TABLES)
        # Accepted as before, when the command ran the checks: they are never run now.
        parser.add_argument("--skip-checks", action="store_true", help=argparse.SUPPRESS)

    def handle(self, *args, **options):
        evaluation_set = EvaluationSet.objects.filter(name=options["set_name"]).first()
        if evaluation_set is None:
            raise CommandError(f"--set: no evaluation set named {options['set_name']!r}")
        report = verbalizer_report(evaluation_set=evaluation_set)
        self.stdout.write(report_as(report, options["format"], options["table"]), ending="")
