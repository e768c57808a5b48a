from django.core.management.base import CommandError

from annotate.errors import AnnotateError
from annotate.management.commands._base import ReadOnlyCommand, output_file
from annotate.revision.services.exports import study_get
from evaluation.revision.formats import FORMATS
from evaluation.revision.reports import revision_report_build


class Command(ReadOnlyCommand):
    help = "Print a revision study's report: Tables 2-5 and Figure 2 of the KIWI paper."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--format", choices=sorted(FORMATS), default="md")
        parser.add_argument("--output", help="Write to this file instead of standard output.")

    def handle(self, *args, **options):
        try:
            study = study_get(name=options["study"])
        except AnnotateError as error:
            raise CommandError(str(error)) from None
        text = FORMATS[options["format"]](revision_report_build(study=study))
        if options["output"]:
            with output_file(options["output"]) as output:
                output.write(text)
            self.stderr.write(f"Wrote the report of {study.name} to {options['output']}.")
        else:
            self.stdout.write(text)
