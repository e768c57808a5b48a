from annotate.management.commands._base import ImportCommand, name_argument
from annotate.revision.services.imports import sessions_import


class Command(ImportCommand):
    help = "Import revision sessions in the published KIWI format (JSON Lines) into a study."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument(
            "--study",
            required=True,
            type=name_argument("study"),
            help="Study name (created if new).",
        )

    def handle(self, *args, **options):
        self.run_import(sessions_import, path=options["path"], study_name=options["study"])
