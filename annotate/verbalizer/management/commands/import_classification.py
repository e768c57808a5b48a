from django.core.management.base import CommandError

from annotate.management.commands._base import ImportCommand
from annotate.verbalizer.services.imports import FORMATS, classification_import


class Command(ImportCommand):
    help = "Import a binary classification file (GLUE TSV, CSV or JSON Lines) into a dataset."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--dataset", required=True)
        parser.add_argument("--format", required=True, choices=FORMATS)
        parser.add_argument(
            "--labels", help="POSITIVE_NAME,NEGATIVE_NAME: the golden label names of a new dataset"
        )
        parser.add_argument("--family", help="sentiment|entailment|paraphrase|subjectivity")

    def handle(self, *args, **options):
        labels = None
        if options["labels"]:
            labels = tuple(name.strip() for name in options["labels"].split(","))
            if len(labels) != 2:
                raise CommandError("--labels: expected POSITIVE_NAME,NEGATIVE_NAME")
        self.run_import(
            classification_import,
            path=options["file"],
            dataset=options["dataset"],
            fmt=options["format"],
            labels=labels,
            family=options["family"],
        )
