"""Stored results of the KIWI classifiers and judges (paper §4.2, §4.3, §5).

A RevisionJudgeRun is one pass of one task over a study's turns: the instruction classifier
(Table 10), the comment classifier (Table 11), or the rating judge (appendix A.5, zero-, one- or
k-shot) with its seeded train/dev/test split stored alongside, so every reported figure can be
traced to the exact turns it was computed on.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotate.revision.models import Study, Turn

# The largest seed a judge run's integer column holds (PostgreSQL's integer).
SEED_MAX = 2**31 - 1


class JudgeTask(models.TextChoices):
    INSTRUCTION_CATEGORY = "instruction-category", "Instruction types (Table 3)"
    ERROR_CATEGORY = "error-category", "Error categories (Table 4)"
    RATING = "rating-judge", "Rating judge (Table 5)"


class ShotMode(models.TextChoices):
    ZERO = "zero-shot", "Zero-shot"
    ONE = "one-shot", "One-shot"
    K = "k-shot", "k-shot (BM25-nearest training turns)"


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class RevisionJudgeRun(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judge_runs")
    task = models.CharField(max_length=30, choices=JudgeTask.choices)
    mode = models.CharField(max_length=10, choices=ShotMode.choices, blank=True)
    shots = models.PositiveSmallIntegerField(default=0)
    # Engine endpoint name; blank = the offline fake model.
    endpoint_name = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=60)
    seed = models.IntegerField(default=0)  # at most SEED_MAX: the column is a 32-bit integer
    # {"train": [turn ids], "dev": [...], "test": [...]} for the rating judge; empty otherwise.
    split = models.JSONField(default=dict, blank=True)
    # A few-shot rating judge's examples: {test turn id: [training turn ids, most BM25-similar
    # first]}, picked once when the run starts (in the background) and used by every call.
    examples = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.PENDING)
    # The engine run that made the calls (none for the offline fake model).
    engine_run = models.ForeignKey(
        "engine.EngineRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["study", "task", "status"], name="revision_judge_run_task")]

    def __str__(self) -> str:
        return f"{self.task} {self.mode} run {self.pk}"


class RevisionPrediction(models.Model):
    run = models.ForeignKey(RevisionJudgeRun, on_delete=models.CASCADE, related_name="predictions")
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="+")
    # The parsed label ("good"/"bad", a category value); blank when the reply could not be read.
    label = models.CharField(max_length=80, blank=True)
    reply = models.TextField(blank=True)
    error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "turn"], name="revision_prediction_unique")
        ]

    def __str__(self) -> str:
        return f"{self.label or '?'} for turn {self.turn_id}"
