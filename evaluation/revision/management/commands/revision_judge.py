from django.core.management.base import BaseCommand, CommandError
from django.template.defaultfilters import pluralize
from django.utils import timezone

from annotate.engine.management.commands._progress import RunProgressBar
from annotate.engine.management.commands._run_options import (
    add_run_cost_arguments,
    dry_run_line,
)
from annotate.engine.services import endpoint_get, engine_run_estimate_new
from annotate.errors import AnnotateError
from annotate.revision.services.exports import study_get
from evaluation.errors import EvaluationError
from evaluation.revision.judges import judge_run_create, judge_run_execute, judge_run_prepare
from evaluation.revision.models import JudgeTask, ShotMode


class Command(BaseCommand):
    help = (
        "Run a KIWI classifier or judge over a study: instruction types (Table 10), error "
        "categories (Table 11) or the rating judge (appendix A.5) on a seeded test split."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--task", choices=JudgeTask.values, required=True)
        parser.add_argument("--mode", choices=ShotMode.values, default=ShotMode.ZERO)
        parser.add_argument("--shots", type=int, default=10, help="k of k-shot (default 10).")
        parser.add_argument("--endpoint", default="", help="Engine endpoint; none = fake model.")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the train/dev/test split.")
        add_run_cost_arguments(parser)

    def handle(self, *args, **options):
        if not options["endpoint"] and (options["dry_run"] or options["spending_cap"] is not None):
            raise CommandError(
                "--spending-cap and --dry-run need --endpoint: without one the run uses the "
                "offline fake model, which costs nothing."
            )
        try:
            if options["dry_run"]:
                estimate = engine_run_estimate_new(create=lambda: self._create(options).engine_run)
                self.stdout.write(dry_run_line(estimate, units="turns to label"))
                return
            run = self._create(options)
        except (AnnotateError, EvaluationError) as error:
            raise CommandError(str(error)) from None
        run = self._execute(run)
        labelled = run.predictions.exclude(label="").count()
        what = " ".join(part for part in (run.task, run.mode) if part)  # classifiers: no mode
        self.stdout.write(
            f"Run {run.pk} ({what}): {run.status}, {labelled} label{pluralize(labelled)}."
        )
        if run.error:
            raise CommandError(run.error)

    def _execute(self, run):
        """Do the run here, with a progress bar on standard error when it has an engine run."""
        if run.engine_run is None:  # the offline fake model: quick, and no engine run to count
            return judge_run_execute(run_id=run.pk)
        bar = RunProgressBar(run.engine_run, unit="turn")
        try:
            return judge_run_execute(run_id=run.pk, on_progress=bar)
        finally:
            bar.close()

    def _create(self, options):
        """On an endpoint, the run with its engine run (its cap); else one for the fake model."""
        arguments = {
            "study": study_get(name=options["study"]),
            "task": options["task"],
            "mode": options["mode"],
            "shots": options["shots"],
            "seed": options["seed"],
            "now": timezone.now(),
        }
        if not options["endpoint"]:
            return judge_run_create(**arguments)
        return judge_run_prepare(
            **arguments,
            endpoint=endpoint_get(name=options["endpoint"]),
            user=None,
            spending_cap_usd=options["spending_cap"],
        )
