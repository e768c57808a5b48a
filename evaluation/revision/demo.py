"""The demo's KIWI classifier and judge runs, with the offline fake model (load_demo step)."""

from __future__ import annotations

from django.utils import timezone

from annotate.revision.models import Study
from annotate.services.demo import DEMO_REVISION_STUDY
from evaluation.revision.judges import judge_run_create, judge_run_execute
from evaluation.revision.models import RevisionJudgeRun

DEMO_RUNS = [
    {"task": "instruction-category"},
    {"task": "error-category"},
    {"task": "rating-judge", "mode": "zero-shot"},
    {"task": "rating-judge", "mode": "k-shot", "shots": 3},
]


def demo_revision_judges() -> str:
    """Run the demo's classifiers and judges once (none when the study has runs already)."""
    study = Study.objects.filter(name=DEMO_REVISION_STUDY).first()
    if study is None or RevisionJudgeRun.objects.filter(study=study).exists():
        return "Revision demo: classifier and judge runs already there."
    for spec in DEMO_RUNS:
        run = judge_run_create(study=study, seed=0, now=timezone.now(), **spec)
        judge_run_execute(run_id=run.pk)
    return f"Revision demo: {len(DEMO_RUNS)} classifier and judge runs with the fake model."
