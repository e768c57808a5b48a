from django.core.management.base import BaseCommand, CommandError

from annotate.engine.errors import EngineNothingToDoError
from annotate.engine.management.commands._progress import RunProgressBar
from annotate.engine.management.commands._run_options import (
    add_run_cost_arguments,
    dry_run_line,
)
from annotate.errors import AnnotateError
from annotate.verbalizer.services.runs import (
    evaluation_set_get,
    verbalizer_run_create,
    verbalizer_run_estimate,
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
        add_run_cost_arguments(parser)

    def handle(self, *args, **options):
        modes = options["modes"].split(",") if options["modes"] else None
        try:
            arguments = {
                "evaluation_set": evaluation_set_get(name=options["set_name"]),
                "system": options["system"], "endpoint": options["endpoint"], "modes": modes,
                "model_size_b": options["size"], "spending_cap_usd": options["spending_cap"],
            }  # fmt: skip
            if options["dry_run"]:
                estimate = verbalizer_run_estimate(**arguments)
                self.stdout.write(dry_run_line(estimate, units="prompts to answer"))
                return
            system_run = verbalizer_run_create(**arguments)
        except EngineNothingToDoError as error:  # a rerun with nothing left: no failure
            self.stdout.write(str(error))
            return
        except AnnotateError as error:
            raise CommandError(str(error)) from None
        endpoint = system_run.engine_run.endpoint
        self.stdout.write(
            f"Engine run #{system_run.engine_run_id}: {system_run} (endpoint {endpoint.name}: "
            f"{endpoint.concurrency} calls at a time, at most {endpoint.requests_per_minute} "
            f"requests and {endpoint.tokens_per_minute} tokens a minute)"
        )
        run = self._execute(system_run)
        self.stdout.write(
            f"{run.status}: {run.units_done} of {run.units_total} prompts answered, "
            f"{run.units_failed} failed, {run.units_skipped} answered before; "
            f"cost ${run.cost_usd}" + (f"; {run.error}" if run.error else "")
        )
        if run.status != "done":
            raise CommandError(f"The run ended {run.status}: {run.error}")

    def _execute(self, system_run):
        bar = RunProgressBar(system_run.engine_run, unit="prompt")
        try:
            return verbalizer_run_execute(system_run=system_run, on_progress=bar)
        except KeyboardInterrupt:
            self.stderr.write(
                "\nStopped. Answers so far are stored; the same command again asks only the rest."
            )
            raise SystemExit(130) from None
        finally:
            bar.close()
