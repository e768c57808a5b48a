from annotate.management.commands._base import ImportCommand
from annotate.models import DECIDED_KIND_VALUES
from annotate.services.label_imports import scores_import


class Command(ImportCommand):
    help = "Import 1–5 direct scores from a long CSV: instruction_id,system,annotator,score."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--benchmark", required=True)
        parser.add_argument(
            "--kind",
            choices=DECIDED_KIND_VALUES,
            help="Kind of annotators that are new (default: the CSV's annotator_kind column).",
        )

    def handle(self, *args, **options):
        self.run_import(
            scores_import,
            path=options["path"],
            benchmark_name=options["benchmark"],
            kind=options["kind"] or "",
        )
