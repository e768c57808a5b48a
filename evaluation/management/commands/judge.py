"""Run an LLM judge in the foreground with a progress bar; Ctrl-C stops it resumably."""

from __future__ import annotations

import threading

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotate.engine.management.commands._progress import RunProgressBar
from annotate.engine.management.commands._run_options import (
    add_run_cost_arguments,
    dry_run_line,
    resume_here,
    resume_hint,
)
from annotate.engine.services import engine_run_estimate, engine_run_reopen
from annotate.errors import AnnotateError, SystemNotFoundError
from annotate.models import Benchmark
from annotate.selectors.labels import benchmark_systems, systems_by_name
from annotate.selectors.names import names_there_are
from evaluation.errors import EvaluationError, JudgeRunChoiceNotFoundError
from evaluation.models import JudgeConfig, RunStatus
from evaluation.selectors.judge_configs import judge_config_and_benchmark_by_name
from evaluation.selectors.judge_runs import judge_run_progress
from evaluation.services.judge_runs import (
    judge_run_again_warning,
    judge_run_check_start,
    judge_run_create,
    judge_run_estimate_new,
    judge_run_execute,
    judge_run_get,
)

UNITS = "conversations to judge"
# A choice the selector did not find: the option that named it, how the console says so, and
# the names there are instead.
NOT_FOUND = {
    "judge": ("config", "--config: no judge configuration", JudgeConfig, "judge configurations"),
    "benchmark": ("benchmark", "--benchmark: no benchmark", Benchmark, "benchmarks"),
}


def _names(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


class Command(BaseCommand):
    help = (
        "Judge responses with an LLM judge configuration (new run), or resume a run with --run. "
        "Only questions not yet answered are asked."
    )

    def add_arguments(self, parser):
        parser.add_argument("--run", type=int, help="Resume this run instead of creating one.")
        parser.add_argument("--config", help="Judge configuration name.")
        parser.add_argument("--benchmark", help="Benchmark name.")
        parser.add_argument("--systems", help="Comma-separated system names (default: all).")
        parser.add_argument("--subset", choices=["easy", "hard"])
        parser.add_argument("--instructions", help="Comma-separated instruction ids.")
        parser.add_argument("--sample", type=int, help="Judge a random sample of N instructions.")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--prompt-version",
            help="Prompt file version (default infobench_v1; the official protocol always uses "
            "infobench_official).",
        )
        add_run_cost_arguments(parser)

    def handle(self, *args, **options):
        try:
            if options["run"]:
                self._resume(options)
            elif options["dry_run"]:
                estimate = judge_run_estimate_new(create=lambda: self._create(options))
                self.stdout.write(dry_run_line(estimate, units=UNITS))
                if estimate.replace_warning:
                    self.stdout.write(estimate.replace_warning)
            else:
                with transaction.atomic():  # refused: no run is kept, as on the page
                    run = self._create(options)
                    self._check_no_other_writer(run)
                    # Queued before the judge's lock goes, as a page's start is: a command
                    # checking at the same instant waits for this one and then sees its run.
                    engine_run_reopen(run=run.engine_run)
                self.stdout.write(f"Created judge run {run.pk} ({run.selection}).")
                # The console replaces them as before (its options and exit codes are
                # scripts'), but says so as the page and the API do.
                warning = judge_run_again_warning(run=run).text
                if warning:
                    self.stdout.write(warning)
                self._execute(run)
        except (AnnotateError, EvaluationError) as error:
            raise CommandError(str(error)) from None

    def _resume(self, options) -> None:
        run = judge_run_get(run_id=options["run"])
        # What is left may overwrite a later run's labels: said as for a new run, and done.
        warning = judge_run_again_warning(run=run).text
        if options["dry_run"]:
            estimate = engine_run_estimate(run=run.engine_run)
            self.stdout.write(dry_run_line(estimate, units=UNITS, run_id=run.pk))
            if warning:
                self.stdout.write(warning)
            return
        told = resume_here(
            options["spending_cap"],
            run=run.engine_run,
            run_id=run.pk,
            check=lambda: self._check_no_other_writer(run),
        )
        if told:
            self.stdout.write(told)
        if warning:
            self.stdout.write(warning)
        self._execute(run)

    def _check_no_other_writer(self, run) -> None:
        """Refuse to run `run` while another run of its judge, queued or running, still writes
        labels on its responses (JudgeRunBusyError, as the page and the API refuse it, 409).
        Labels of the judge's ended runs are replaced as the command always did (`replace`):
        it says so and goes on. In the caller's transaction, which must also make `run` pending
        (`engine_run_reopen`) before it commits: the check locks the judge's row till then, so
        of two commands checking at the same instant the second sees the first's run."""
        judge_run_check_start(run=run, replace=True)

    def _create(self, options):
        try:
            config, benchmark = judge_config_and_benchmark_by_name(
                judge=options["config"] or "", benchmark=options["benchmark"] or ""
            )
        except JudgeRunChoiceNotFoundError as error:
            option, missing, model, what = NOT_FOUND[error.field]
            known = names_there_are(model.objects.all(), what=what)
            raise CommandError(f"{missing} named {options[option]!r} ({known}).") from None
        try:
            systems = systems_by_name(names=_names(options["systems"]), benchmark=benchmark)
        except SystemNotFoundError as error:
            known = names_there_are(
                benchmark_systems(benchmark=benchmark), what="benchmark's systems"
            )
            raise CommandError(f"No system named {', '.join(error.missing)} ({known}).") from None
        return judge_run_create(
            config=config,
            benchmark=benchmark,
            systems=systems,
            subset=options["subset"],
            instruction_ids=_names(options["instructions"]) or None,
            sample=options["sample"],
            seed=options["seed"],
            prompt_version=options["prompt_version"],
            spending_cap_usd=options["spending_cap"],
        )

    def _execute(self, run):
        stop = threading.Event()
        bar = RunProgressBar(run.engine_run, unit="conversation")
        try:
            run = judge_run_execute(run_id=run.pk, stop=stop, on_progress=bar)
        except KeyboardInterrupt:
            self.stderr.write(
                f"\nStopped. Answers so far are stored; resume with: judge --run {run.pk}"
            )
            raise SystemExit(130) from None
        finally:
            bar.close()
        progress = judge_run_progress(run=run)
        not_asked = (
            f" ({progress.questions_not_asked} not asked after an unparseable answer)"
            if progress.questions_not_asked
            else ""
        )
        self.stdout.write(
            f"Run {run.pk}: {run.get_status_display()}. "
            f"{progress.questions_answered}/{progress.questions_total} questions{not_asked}, "
            f"{progress.conversations_failed} failed conversations, "
            f"{progress.prompt_tokens}+{progress.completion_tokens} tokens, "
            f"${progress.cost_usd}"
            + (
                f" (and ${progress.possibly_billed_usd} possibly billed by failed attempts)."
                if progress.possibly_billed_usd
                else "."
            )
        )
        for error in progress.errors:
            self.stdout.write(f"  conversation {error['conversation']}: {error['error']}")
        if progress.conversations_failed:
            raise CommandError(f"{progress.conversations_failed} conversations failed; rerun it.")
        if run.status != RunStatus.DONE:  # stopped: the spending cap, or from the run's page
            raise CommandError(
                f"Run {run.pk} did not finish: {run.engine_run.error or run.get_status_display()} "
                + resume_hint("judge", run.pk, run.engine_run)
            )
