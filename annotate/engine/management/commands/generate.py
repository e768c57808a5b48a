"""Generate a system's responses to a benchmark through an endpoint, with a progress bar."""

from __future__ import annotations

import threading

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotate.engine.errors import EngineError, EngineNotFoundError, EngineNothingToDoError
from annotate.engine.management.commands._progress import RunProgressBar
from annotate.engine.management.commands._run_options import (
    add_run_cost_arguments,
    dry_run_line,
    resume_here,
    resume_hint,
)
from annotate.engine.models import Endpoint, EngineRun
from annotate.engine.services import (
    endpoint_get,
    engine_run_estimate,
    engine_run_estimate_new,
    engine_run_execute,
    engine_run_get,
)
from annotate.engine.services.generation import (
    generating_system_get_or_create,
    generation_run_create,
)
from annotate.errors import AnnotateError
from annotate.models import Benchmark
from annotate.selectors.names import names_there_are

UNITS = "responses to generate"


class Command(BaseCommand):
    help = (
        "Generate responses of --system to --benchmark through --endpoint (the system is created "
        "on first use, bound to the endpoint). Only missing responses are generated."
    )

    def add_arguments(self, parser):
        parser.add_argument("--benchmark")
        parser.add_argument("--system")
        parser.add_argument("--endpoint")
        parser.add_argument("--run", type=int, help="Resume this run instead of creating one.")
        choice = parser.add_mutually_exclusive_group()
        choice.add_argument("--instructions", help="Comma-separated instruction ids.")
        choice.add_argument("--subset", choices=["easy", "hard"])
        parser.add_argument("--sample", type=int, help="A random sample of N instructions.")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--template", default="generation_infobench_v1")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="Regenerate responses made "
            "with other settings (old ones are kept apart with their labels).",
        )
        add_run_cost_arguments(parser)

    def handle(self, *args, **o):
        try:
            if o["run"]:
                self._resume(o)
            elif o["dry_run"]:
                # Nothing is kept, not even the system the run would bind to the endpoint.
                estimate = engine_run_estimate_new(create=lambda: self._create(o))
                self.stdout.write(dry_run_line(estimate, units=UNITS))
            else:
                with transaction.atomic():  # a refusal keeps nothing, not even the system
                    run = self._create(o)
                self._execute(run)
        except EngineNothingToDoError as error:  # a rerun with nothing left: no failure
            self.stdout.write(str(error))
        except AnnotateError as error:
            raise CommandError(str(error)) from None

    def _resume(self, o) -> None:
        run = engine_run_get(run_id=o["run"])
        if o["dry_run"]:
            estimate = engine_run_estimate(run=run)
            self.stdout.write(dry_run_line(estimate, units=UNITS, run_id=run.pk))
            return
        told = resume_here(o["spending_cap"], run=run)
        if told:
            self.stdout.write(told)
        self._execute(run)

    def _create(self, o) -> EngineRun:
        if not (o["benchmark"] and o["system"] and o["endpoint"]):
            raise CommandError("Give --benchmark, --system and --endpoint (or --run).")
        try:
            benchmark = Benchmark.objects.get(name=o["benchmark"])
        except Benchmark.DoesNotExist:
            known = names_there_are(Benchmark.objects.all(), what="benchmarks")
            raise CommandError(f"No benchmark named {o['benchmark']!r} ({known}).") from None
        try:
            endpoint = endpoint_get(name=o["endpoint"])
        except EngineNotFoundError:
            known = names_there_are(Endpoint.objects.all(), what="endpoints")
            raise CommandError(f"No endpoint named {o['endpoint']!r} ({known}).") from None
        system = generating_system_get_or_create(name=o["system"], endpoint=endpoint)
        ids = [item.strip() for item in (o["instructions"] or "").split(",") if item.strip()]
        return generation_run_create(
            benchmark=benchmark,
            systems=[system],
            endpoint=endpoint,
            subset=o["subset"],
            instruction_ids=ids or None,
            sample=o["sample"],
            seed=o["seed"],
            template=o["template"],
            replace=o["replace"],
            spending_cap_usd=o["spending_cap"],
        )

    def _execute(self, run: EngineRun) -> None:
        calls_before = run.calls
        bar = RunProgressBar(run, unit="response")
        try:
            run = engine_run_execute(run_id=run.pk, stop=threading.Event(), on_progress=bar)
        except KeyboardInterrupt:
            self.stderr.write(
                f"\nStopped. Answers so far are stored; resume: generate --run {run.pk}"
            )
            raise SystemExit(130) from None
        except EngineError as error:
            raise CommandError(str(error)) from None
        finally:
            bar.close()
        self.stdout.write(
            f"Run {run.pk}: {run.get_status_display()}. {run.units_done}/{run.units_total} "
            f"responses; calls made {run.calls - calls_before}, failed {run.units_failed}, "
            f"skipped {run.units_skipped} (already done); "
            f"tokens {run.prompt_tokens}+{run.completion_tokens}, ${run.cost_usd}"
            + (
                f" (and ${run.possibly_billed_usd} possibly billed by failed attempts)."
                if run.possibly_billed_usd
                else "."
            )
        )
        for key, error in run.units.filter(status="failed").values_list("key", "error")[:20]:
            self.stdout.write(f"  {key}: {error}")
        if run.error:
            self.stdout.write(f"  {run.error}")
        if run.units_failed or run.status != "done":
            raise CommandError(
                f"Run {run.pk} did not finish: {run.error or 'units failed'} "
                + resume_hint("generate", run.pk, run)
            )
