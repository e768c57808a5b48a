from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from annotate.errors import AnnotateError
from annotate.revision.services.exports import study_get
from evaluation.errors import EvaluationError
from evaluation.revision.judges import judge_run_create, judge_run_execute
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

    def handle(self, *args, **options):
        try:
            study = study_get(name=options["study"])
            run = judge_run_create(
                study=study,
                task=options["task"],
                mode=options["mode"],
                shots=options["shots"],
                endpoint_name=options["endpoint"],
                seed=options["seed"],
                now=timezone.now(),
            )
        except (AnnotateError, EvaluationError) as error:
            raise CommandError(str(error)) from None
        run = judge_run_execute(run_id=run.pk)
        labelled = run.predictions.exclude(label="").count()
        self.stdout.write(f"Run {run.pk} ({run.task} {run.mode}): {run.status}, {labelled} labels.")
        if run.error:
            raise CommandError(run.error)
