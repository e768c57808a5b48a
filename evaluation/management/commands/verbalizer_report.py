from django.core.management.base import CommandError

from annotate.management.commands._base import ReadOnlyCommand
from annotate.selectors.names import names_there_are
from annotate.verbalizer.models import EvaluationSet
from evaluation.verbalizer.formats import FORMATS, TABLES, report_as
from evaluation.verbalizer.report import verbalizer_report


class Command(ReadOnlyCommand):
    help = (
        "Print a verbalizer set's accuracy rows (strict and lenient rule), or the people's "
        "agreement (--table agreement), as JSON/CSV/LaTeX/MD."
    )

    def add_arguments(self, parser):
        parser.add_argument("--set", required=True, dest="set_name")
        parser.add_argument("--format", default="json", choices=FORMATS)
        parser.add_argument("--table", default="rows", choices=TABLES)

    def handle(self, *args, **options):
        evaluation_set = EvaluationSet.objects.filter(name=options["set_name"]).first()
        if evaluation_set is None:
            known = names_there_are(EvaluationSet.objects.all(), what="evaluation sets")
            raise CommandError(f"--set: no evaluation set named {options['set_name']!r} ({known})")
        report = verbalizer_report(evaluation_set=evaluation_set)
        self.stdout.write(report_as(report, options["format"], options["table"]), ending="")
