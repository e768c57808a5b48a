from annotate.management.commands._base import ImportCommand
from annotate.models import AnnotatorKind
from annotate.services.label_imports import scores_import


class Command(ImportCommand):
    help = "Import 1–5 direct scores from a long CSV: instruction_id,system,annotator,score."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--benchmark", required=True)
        parser.add_argument("--kind", default="", choices=["", *AnnotatorKind.values])

    def handle(self, *args, **options):
        self.run_import(
            scores_import,
            path=options["path"],
            benchmark_name=options["benchmark"],
            kind=options["kind"],
        )
