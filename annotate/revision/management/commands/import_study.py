from annotate.management.commands._base import ImportCommand, name_argument
from annotate.revision.services.imports import study_upload


class Command(ImportCommand):
    help = (
        "Add questions with their documents (JSON Lines, docs/revision.md) and systems to a study."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument(
            "--study",
            required=True,
            type=name_argument("study"),
            help="Study name (created if new).",
        )
        parser.add_argument(
            "--system",
            action="append",
            default=[],
            help="NAME or NAME=ENDPOINT (engine endpoint name; none = the offline fake model). "
            "Repeat for each system.",
        )

    def handle(self, *args, **options):
        self.run_import(
            study_upload,
            path=options["path"],
            study_name=options["study"],
            systems=options["system"],
        )
