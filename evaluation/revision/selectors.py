"""Reads for the researchers' KIWI run pages: what a run needs first, the study's runs."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from annotate.engine.models import RunStatus as EngineRunStatus
from annotate.engine.selectors import endpoint_prerequisite_missing
from annotate.engine.services import engine_runs_reap
from annotate.revision.models import SessionStatus, Study, Turn
from annotate.selectors.prerequisites import Prerequisite
from evaluation.revision.models import JudgeTask, RevisionJudgeRun, RunStatus

# Fewest rated turns a task can use: the rating judge splits them three ways.
MIN_TURNS = {JudgeTask.INSTRUCTION_CATEGORY: 1, JudgeTask.ERROR_CATEGORY: 1, JudgeTask.RATING: 3}


def _rated_turns(study: Study, task: str) -> int:
    turns = Turn.objects.filter(
        session__study=study, session__status=SessionStatus.FINISHED
    ).exclude(rating="")
    if task == JudgeTask.ERROR_CATEGORY:
        turns = turns.exclude(rating="good")
    return turns.count()


def judge_prerequisites_missing(
    *, study: Study, task: str, user: AbstractBaseUser
) -> list[Prerequisite]:
    """What a run of `task` on the study needs first: rated turns, an endpoint it may use."""
    missing = []
    needed = MIN_TURNS[task]
    if _rated_turns(study, task) < needed:
        what = "neutral or bad turns" if task == JudgeTask.ERROR_CATEGORY else "rated turns"
        amount = "no" if needed == 1 else f"fewer than {needed}"
        missing.append(
            Prerequisite(
                f"The study has {amount} {what} of finished sessions.",
                "Import finished KIWI sessions, or wait until annotators finish theirs.",
                reverse("revision:upload"),
            )
        )
    endpoint = endpoint_prerequisite_missing(
        user=user,
        paid_action="Ask an admin to start the run, or to create a free offline fake endpoint.",
    )
    if endpoint is not None:
        missing.append(endpoint)
    return missing


def study_judge_runs(
    *, study: Study, task: str | None = None, now: datetime | None = None
) -> QuerySet[RevisionJudgeRun]:
    """The study's judge and classifier runs, newest first (of one task if given).

    A running run whose worker stopped beating is marked failed first (the engine's reaper,
    which tells the run through on_finish), as the engine's own page does: with no periodic
    reaper (the embedded default) the table would otherwise say "Running" for ever. Only runs
    past the heartbeat timeout go to the reaper, so the page's queries do not grow with the
    runs that are beating.
    """
    now = now or timezone.now()
    runs = RevisionJudgeRun.objects.filter(study=study).select_related("engine_run")
    # engine_runs_reap's condition, so only runs it would fail reach it (a run's start sets the
    # heartbeat; the reaper leaves a running run without one alone, and so does this).
    limit = now - timedelta(seconds=settings.ENGINE_HEARTBEAT_TIMEOUT_SECONDS)
    stuck = runs.filter(
        status=RunStatus.RUNNING,
        engine_run__status=EngineRunStatus.RUNNING,
        engine_run__heartbeat__lt=limit,
    )
    for engine_run_id in stuck.values_list("engine_run_id", flat=True):
        engine_runs_reap(now=now, run_id=engine_run_id)
    if task:
        runs = runs.filter(task=task)
    return runs.order_by("-created_at", "-id")
