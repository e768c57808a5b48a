from django.core.management.base import CommandError

from annotate.errors import AnnotateError
from annotate.management.commands._base import ReadOnlyCommand, output_file
from annotate.revision.services.exports import (
    sessions_export_csv,
    sessions_export_jsonl,
    study_get,
)

WRITERS = {"jsonl": sessions_export_jsonl, "csv": sessions_export_csv}


class Command(ReadOnlyCommand):
    help = "Export a study's finished sessions as KIWI JSON Lines, or as CSV (one row per turn)."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--output", required=True, help="File to write.")
        parser.add_argument(
            "--format", choices=sorted(WRITERS), help="Default: from the file name (.csv or not)."
        )

    def handle(self, *args, **options):
        fmt = options["format"] or ("csv" if options["output"].endswith(".csv") else "jsonl")
        try:
            study = study_get(name=options["study"])
        except AnnotateError as error:
            raise CommandError(str(error)) from None
        with output_file(options["output"], newline="") as output:
            count = WRITERS[fmt](study=study, output=output)
        unit = ("turn" if fmt == "csv" else "session") + ("" if count == 1 else "s")
        self.stdout.write(f"Wrote {count:,} {unit} of {study.name} to {options['output']}.")
