from annotate.management.commands._base import ImportCommand
from annotate.models import DECIDED_KIND_VALUES
from annotate.services.label_imports import labels_import


class Command(ImportCommand):
    help = (
        "Import YES/NO/UNKNOWN labels: the evaluation script's JSON Lines (`id`, `eval`) for one "
        "system and annotator, or a long CSV instruction_id,system,annotator,question_index,label."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--benchmark", required=True)
        parser.add_argument("--system", default="", help="JSON Lines: the system labelled.")
        parser.add_argument("--annotator", default="", help="JSON Lines: who labelled.")
        parser.add_argument(
            "--kind",
            choices=DECIDED_KIND_VALUES,
            help="Kind of annotators that are new (default: the CSV's annotator_kind column, "
            "the JSON Lines' kind field).",
        )

    def handle(self, *args, **options):
        self.run_import(
            labels_import,
            path=options["path"],
            benchmark_name=options["benchmark"],
            system_name=options["system"],
            annotator_name=options["annotator"],
            kind=options["kind"] or "",
        )
