"""Reads for the researchers' KIWI run pages: what a run needs first, the study's runs."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.urls import reverse

from annotate.engine.selectors import endpoint_prerequisite_missing
from annotate.engine.services import engine_runs_reap
from annotate.revision.models import SessionStatus, Study, Turn
from annotate.selectors.prerequisites import Prerequisite
from evaluation.revision.models import JudgeTask, RevisionJudgeRun, RunStatus
from evaluation.revision.report_data import counted_turns
from evaluation.stats.revision import split_min_items

# Fewest rated turns a task can use: the rating judge splits them three ways and needs a test
# turn (4 at the paper's fractions).
MIN_TURNS = {
    JudgeTask.INSTRUCTION_CATEGORY: 1,
    JudgeTask.ERROR_CATEGORY: 1,
    JudgeTask.RATING: split_min_items(),
}


def rated_turns_count(*, study: Study, task: str) -> int:
    """Return how many turns of the study's finished sessions a run of `task` can use: for the
    rating judge those the report counts (its split, judges.rating_split, is drawn from them);
    a classifier labels every rated turn, so one counted later has its label already."""
    if task == JudgeTask.RATING:
        return counted_turns(study=study).count()
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
    if rated_turns_count(study=study, task=task) < needed:
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
        paid_action="Ask an admin to start the run, or to create an offline fake endpoint "
        "(no address: it bills nobody, so researchers may use it).",
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
    reaper (the embedded default) the table would otherwise say "Running" for ever. The
    study's running runs go to the reaper in one query, however many are beating.
    """
    runs = RevisionJudgeRun.objects.filter(study=study).select_related("engine_run")
    running = runs.filter(status=RunStatus.RUNNING).values("engine_run_id")
    engine_runs_reap(now=now, run_ids=running)
    if task:
        runs = runs.filter(task=task)
    return runs.order_by("-created_at", "-id")
