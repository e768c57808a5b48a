from django.core.management.base import BaseCommand, CommandError

from annotate.errors import AnnotateError
from annotate.verbalizer.services.runs import (
    evaluation_set_get,
    verbalizer_run_create,
    verbalizer_run_execute,
)


class Command(BaseCommand):
    help = "Run a system over an evaluation set through the model engine (resumable)."

    def add_arguments(self, parser):
        parser.add_argument("--set", required=True, dest="set_name")
        parser.add_argument("--system", required=True)
        parser.add_argument("--endpoint", required=True, help="an engine endpoint's name")
        parser.add_argument("--modes", help="direct,cot (default: the set's modes)")
        parser.add_argument("--size", type=float, help="model size in billions (orders figures)")
        parser.add_argument(
            "--spending-cap", dest="cap", help="stop before the run costs more (USD)"
        )

    def handle(self, *args, **options):
        modes = options["modes"].split(",") if options["modes"] else None
        try:
            system_run = verbalizer_run_create(
                evaluation_set=evaluation_set_get(name=options["set_name"]),
                system=options["system"], endpoint=options["endpoint"], modes=modes,
                model_size_b=options["size"], spending_cap_usd=options["cap"],
            )  # fmt: skip
        except AnnotateError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"Engine run #{system_run.engine_run_id}: {system_run}")
        run = verbalizer_run_execute(system_run=system_run)
        self.stdout.write(
            f"{run.status}: {run.units_done} of {run.units_total} prompts answered, "
            f"{run.units_failed} failed, {run.units_skipped} answered before; "
            f"cost ${run.cost_usd}" + (f"; {run.error}" if run.error else "")
        )
        if run.status != "done":
            raise CommandError(f"The run ended {run.status}: {run.error}")
