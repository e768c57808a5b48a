from annotate.management.commands._base import ImportCommand
from annotate.services.imports import responses_import


class Command(ImportCommand):
    help = "Import one system's responses: JSON Lines with `id` and `output`."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--benchmark", required=True)
        parser.add_argument("--system", required=True, help="System name (created if new).")

    def handle(self, *args, **options):
        self.run_import(
            responses_import,
            path=options["path"],
            benchmark_name=options["benchmark"],
            system_name=options["system"],
        )
