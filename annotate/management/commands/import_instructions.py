from annotate.management.commands._base import ImportCommand
from annotate.services.imports import instructions_import


class Command(ImportCommand):
    help = "Import instructions and decomposed questions from an InFoBench JSON Lines file."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--benchmark", required=True, help="Benchmark name (created if new).")
        parser.add_argument("--description", default="")

    def handle(self, *args, **options):
        self.run_import(
            instructions_import,
            path=options["path"],
            benchmark_name=options["benchmark"],
            description=options["description"],
        )
