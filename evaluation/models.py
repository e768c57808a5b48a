"""Models of the measuring side: LLM judge configurations, runs, conversations and calls."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotate.models import Annotator, Benchmark, Instruction, Label, Question, Response, System
from evaluation.conventions import ACC_MODES, DEFAULT_ACC, DEFAULT_UNKNOWN, UNKNOWN_MODES


class JudgeProtocol(models.TextChoices):
    MULTI_TURN = "multi_turn", "Multi-turn, one question per turn (paper layout, app's parsing)"
    ALL_IN_ONE = "all_in_one", "All questions in one message"
    INDEPENDENT = "independent", "Each question on its own"
    OFFICIAL = "official", "The official evaluation.py, byte for byte"


class JudgeConfig(models.Model):
    """How to ask one LLM judge: its endpoint (model, decoding, limits, prices) and protocol;
    its labels land under `annotator` (kind llm)."""

    name = models.CharField(max_length=200, unique=True)
    annotator = models.OneToOneField(Annotator, on_delete=models.PROTECT, related_name="judge")
    endpoint = models.ForeignKey(
        "engine.Endpoint", on_delete=models.PROTECT, related_name="judge_configs"
    )
    protocol = models.CharField(
        max_length=12, choices=JudgeProtocol.choices, default=JudgeProtocol.MULTI_TURN
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(protocol__in=JudgeProtocol.values), name="judgeconfig_protocol_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    # The engine's words (annotate.engine.models.RunStatus): a judge run's status is its engine
    # run's, shown on both pages.
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Stopped"


class JudgeRun(models.Model):
    """A judge configuration applied to systems × instructions of a benchmark."""

    config = models.ForeignKey(JudgeConfig, on_delete=models.PROTECT, related_name="runs")
    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="judge_runs")
    systems = models.ManyToManyField(System, related_name="judge_runs")
    instructions = models.ManyToManyField(Instruction, related_name="judge_runs", blank=True)
    status = models.CharField(max_length=9, choices=RunStatus.choices, default=RunStatus.PENDING)
    prompt_version = models.CharField(max_length=40, blank=True)
    protocol = models.CharField(
        max_length=12, choices=JudgeProtocol.choices, default=JudgeProtocol.MULTI_TURN
    )
    selection = models.CharField(
        max_length=200, blank=True, help_text="Which instructions: all, a subset, a sample."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    engine_run = models.OneToOneField(
        "engine.EngineRun",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="judge_run",
        help_text="The engine run that makes and accounts this run's calls.",
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=RunStatus.values), name="judgerun_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.config.name} on {self.benchmark.name} #{self.pk}"

    # The status is the engine run's (it does the work; the stored one is its copy, kept by the
    # protocol's hooks), so a run whose worker died is never shown as running.
    @property
    def live_status(self) -> str:
        return self.engine_run.status if self.engine_run else self.status

    @property
    def live_status_display(self) -> str:
        return RunStatus(self.live_status).label

    @property
    def is_active(self) -> bool:
        return self.live_status in (RunStatus.PENDING, RunStatus.RUNNING)

    # Tokens and cost are the engine run's: one accounting for every model call.
    @property
    def prompt_tokens(self) -> int:
        return self.engine_run.prompt_tokens if self.engine_run else 0

    @property
    def completion_tokens(self) -> int:
        return self.engine_run.completion_tokens if self.engine_run else 0

    @property
    def cost_usd(self) -> Decimal:
        return self.engine_run.cost_usd if self.engine_run else Decimal(0)

    @property
    def possibly_billed_usd(self) -> Decimal:
        """Failed attempts the provider may have billed (EngineRun.possibly_billed_usd)."""
        return self.engine_run.possibly_billed_usd if self.engine_run else Decimal(0)


class ConversationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class JudgeConversation(models.Model):
    """One (instruction, response) conversation of a run: the unit of work."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="conversations")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(
        max_length=7, choices=ConversationStatus.choices, default=ConversationStatus.PENDING
    )
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    kept_going_after_unparseable = models.BooleanField(
        default=False,
        help_text="An answer was unparseable and later questions were still asked "
        "(the official script stops there).",
    )
    questions_not_asked = models.PositiveSmallIntegerField(
        default=0,
        help_text="Questions left unasked after an unparseable answer (official protocol).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "response"], name="conversation_unique_response"
            ),
            models.CheckConstraint(
                condition=Q(status__in=ConversationStatus.values), name="conversation_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} / response {self.response_id} ({self.status})"


class JudgeCall(models.Model):
    """One question asked and answered, with the raw reply and its token usage."""

    conversation = models.ForeignKey(
        JudgeConversation, on_delete=models.CASCADE, related_name="calls"
    )
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="+")
    raw_reply = models.TextField(blank=True)
    parsed = models.PositiveSmallIntegerField(help_text="LabelValue: 0 NO, 1 YES, 2 UNKNOWN.")
    prompt_version = models.CharField(max_length=40)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    usage_estimated = models.BooleanField(default=False)
    latency_ms = models.PositiveIntegerField(
        default=0, help_text="Time the call took; on the first question's row of a call only."
    )
    retries = models.PositiveSmallIntegerField(default=0)
    engine_call = models.ForeignKey(
        "engine.EngineCall",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="judge_answers",
        help_text="The stored model call (request, reply, status, cost) this answer came from.",
    )
    label = models.ForeignKey(
        Label,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="judge_calls",
        help_text="The label this answer set; a later run of the same judge may overwrite it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "question"], name="call_unique_question"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation} Q{self.question_id}"


class ExportStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class ReportExport(models.Model):
    """A report written to storage (S3 or the export folder) in the background."""

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="exports")
    unknown = models.CharField(
        max_length=8, default=DEFAULT_UNKNOWN, help_text="DRFR convention for UNKNOWN."
    )
    acc_unknown = models.CharField(
        max_length=7, default=DEFAULT_ACC, help_text="ACC convention for a source's UNKNOWN."
    )
    status = models.CharField(
        max_length=7, choices=ExportStatus.choices, default=ExportStatus.QUEUED
    )
    files = models.JSONField(default=list, blank=True, help_text="Names written to storage.")
    location = models.CharField(max_length=500, blank=True, help_text="Bucket or folder.")
    archive = models.CharField(
        max_length=500, blank=True, help_text="Storage name of the zip of every file."
    )
    steps_done = models.PositiveIntegerField(default=0)
    steps_total = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life of the worker writing the export."
    )
    lease = models.CharField(
        max_length=32, blank=True, help_text="The token of the delivery writing the export."
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ExportStatus.values), name="reportexport_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(unknown__in=list(UNKNOWN_MODES)), name="reportexport_unknown_valid"
            ),
            models.CheckConstraint(
                condition=Q(acc_unknown__in=list(ACC_MODES)), name="reportexport_acc_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.benchmark.name} export #{self.pk} ({self.status})"

    @property
    def is_pending(self) -> bool:
        return self.status in (ExportStatus.QUEUED, ExportStatus.RUNNING)

    def progress_display(self) -> str:
        """Say how far the export has got, as the steps it records: the report built, then
        each figure drawn and each file stored. Before the first step there is no total yet."""
        if self.steps_total:
            return f"{self.steps_done} of {self.steps_total} steps"
        if self.status == ExportStatus.QUEUED:
            return "Waiting to start"
        if self.status == ExportStatus.RUNNING:
            return "Building the report (step 1)"
        return ""
