"""Reads of judge runs: progress counts for the page, the API and the console."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Count, Q, QuerySet, Sum
from django.urls import reverse

from annotate.engine.models import EngineCall
from annotate.engine.models import RunStatus as EngineRunStatus
from annotate.engine.services import engine_runs_reap
from annotate.models import Benchmark, Question, Response
from annotate.selectors.prerequisites import Prerequisite
from evaluation.judges.protocol import PURPOSE_RETRY
from evaluation.models import (
    ConversationStatus,
    JudgeCall,
    JudgeConfig,
    JudgeConversation,
    JudgeRun,
)


@dataclass(frozen=True)
class RunProgress:
    run_id: int
    status: str
    status_display: str
    active: bool  # pending or running: the page refreshes itself
    error: str  # why the run failed or stopped (its engine run's message)
    conversations_total: int
    conversations_done: int
    conversations_failed: int
    questions_total: int
    questions_answered: int
    questions_not_asked: int  # left unasked on purpose after an unparseable answer (official)
    unknown_answers: int
    kept_going: int
    retries: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Decimal
    possibly_billed_usd: Decimal  # failed attempts the provider may have billed; not in cost_usd
    errors: list[dict]
    started_at: str | None
    finished_at: str | None

    @property
    def percent(self) -> int:
        if not self.questions_total:
            return 100
        return int(
            100 * (self.questions_answered + self.questions_not_asked) / self.questions_total
        )

    @property
    def questions_missing(self) -> int:
        """Questions neither answered nor left unasked on purpose: a rerun would ask them."""
        return self.questions_total - self.questions_answered - self.questions_not_asked

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "cost_usd": str(self.cost_usd),
            "possibly_billed_usd": str(self.possibly_billed_usd),
            "percent": self.percent,
            "questions_missing": self.questions_missing,
        }


def judge_run_list(
    *, config: JudgeConfig | None = None, now: datetime | None = None
) -> QuerySet[JudgeRun]:
    """Every judge run, newest first; only `config`'s when given. A running run whose worker
    stopped beating is marked failed first (the engine's reaper, which tells the judge run
    through on_finish), as the run's page does, so the list never says "Running" for it."""
    runs = JudgeRun.objects.select_related("config", "benchmark", "engine_run")
    if config is not None:
        runs = runs.filter(config=config)
    running = runs.filter(engine_run__status=EngineRunStatus.RUNNING).values("engine_run_id")
    engine_runs_reap(now=now, run_ids=running)
    return runs.order_by("-created_at")


def judge_run_progress(
    *, run: JudgeRun, max_errors: int = 20, now: datetime | None = None
) -> RunProgress:
    """Return the status, done / total, failures with their errors, tokens and cost so far.

    The status is the engine run's; a run whose worker stopped beating is marked failed here
    (as the engine's page does), so neither page waits for ever on a run nobody works on.
    """
    run.refresh_from_db()
    if run.engine_run is not None:
        run.engine_run.refresh_from_db()
        if run.engine_run.status == EngineRunStatus.RUNNING and engine_runs_reap(
            now=now, run_id=run.engine_run_id
        ):  # its worker died: the engine run failed, and this run with it (on_finish)
            run.refresh_from_db()
            run.engine_run.refresh_from_db()
    conversations = JudgeConversation.objects.filter(run=run)
    counts = conversations.aggregate(
        total=Count("id"),
        done=Count("id", filter=Q(status=ConversationStatus.DONE)),
        failed=Count("id", filter=Q(status=ConversationStatus.FAILED)),
        kept_going=Count("id", filter=Q(kept_going_after_unparseable=True)),
        not_asked=Sum("questions_not_asked"),
    )
    calls = JudgeCall.objects.filter(conversation__run=run).aggregate(
        answered=Count("id"), unknown=Count("id", filter=Q(parsed=2))
    )
    questions = Question.objects.filter(
        instruction__responses__in=conversations.values("response")
    ).count()
    errors = [
        {
            "conversation": item["id"],
            "response": str(item["response_id"]),
            "instruction": item["response__instruction__external_id"],
            "system": item["response__system__name"],
            "error": item["error"],
        }
        for item in conversations.filter(status=ConversationStatus.FAILED).values(
            "id",
            "response_id",
            "response__instruction__external_id",
            "response__system__name",
            "error",
        )[:max_errors]
    ]
    return RunProgress(
        run_id=run.pk,
        status=run.live_status,
        status_display=run.live_status_display,
        active=run.is_active,
        error=run.engine_run.error if run.engine_run else "",
        conversations_total=counts["total"],
        conversations_done=counts["done"],
        conversations_failed=counts["failed"],
        questions_total=questions,
        questions_answered=calls["answered"],
        questions_not_asked=counts["not_asked"] or 0,
        unknown_answers=calls["unknown"],
        kept_going=counts["kept_going"],
        retries=_retries(run),
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
        cost_usd=run.cost_usd,
        possibly_billed_usd=run.possibly_billed_usd,
        errors=errors,
        started_at=run.started_at.isoformat() if run.started_at else None,
        finished_at=run.finished_at.isoformat() if run.finished_at else None,
    )


def _retries(run: JudgeRun) -> int:
    """Every retry of the run's calls, answered or not: the engine's inside each call (429,
    5xx, timeouts) and the calls the judge sent again after a failed one (official protocol).
    """
    if run.engine_run_id is None:
        return JudgeCall.objects.filter(conversation__run=run).aggregate(n=Sum("retries"))["n"] or 0
    counts = EngineCall.objects.filter(run_id=run.engine_run_id).aggregate(
        inside=Sum("retries"), again=Count("id", filter=Q(purpose=PURPOSE_RETRY))
    )
    return (counts["inside"] or 0) + counts["again"]


def judge_prerequisites_missing() -> list[Prerequisite]:
    """Return what the judge page needs first (a judge, a benchmark, responses), in order."""
    missing = []
    if not JudgeConfig.objects.exists():
        missing.append(
            Prerequisite(
                "There is no judge configuration yet.",
                "Create one on the Judges page (a name, a protocol and a model endpoint).",
                reverse("judge:config-list"),
            )
        )
    if not Benchmark.objects.exists():
        missing.append(
            Prerequisite(
                "There is no benchmark yet.",
                "Import one (InFoBench JSON Lines) on the Imports page.",
                reverse("annotate:import-list"),
            )
        )
    elif not Response.objects.exists():
        missing.append(
            Prerequisite(
                "No system has responses to judge yet.",
                "Import a system's responses on the Imports page.",
                reverse("annotate:import-list"),
            )
        )
    return missing
