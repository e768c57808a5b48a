"""Models of the engine: endpoints, runs and their units, and every model call made."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

# Paths of the API that the client adds itself: a base URL ending in one would be called twice.
API_PATHS = ("/chat/completions", "/embeddings")


def validate_base_url(value: str) -> None:
    """Refuse an address that already names an API path (the client appends it again)."""
    address = (value or "").strip().rstrip("/")
    for path in API_PATHS:
        if address.endswith(path):
            raise ValidationError(
                f"The base URL should end before {path} (e.g. https://api.openai.com/v1): "
                f"the engine adds {path} itself.",
                code="api_path",
            )


def validate_positive(value: float) -> None:
    if value is not None and value <= 0:
        raise ValidationError("Must be more than 0.", code="positive")


_AT_LEAST_ONE = [MinValueValidator(1, message="Must be at least 1.")]
MAX_CONCURRENCY = 256  # calls in flight at once for one endpoint (threads of a run's worker)


class Endpoint(models.Model):
    """Where and how to call one model: address, key variable, decoding, limits, prices."""

    name = models.CharField(max_length=200, unique=True)
    base_url = models.CharField(
        max_length=500,
        blank=True,
        validators=[validate_base_url],
        help_text="Blank: the offline fake back-end (no network).",
    )
    model = models.CharField(max_length=200)
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="Environment variable holding the key (one of ENGINE_API_KEY_ENVS); "
        "blank for a server that needs none.",
    )
    temperature = models.FloatField(
        default=0,
        validators=[MinValueValidator(0), MaxValueValidator(2)],
        help_text="From 0 to 2 (OpenAI's range).",
    )
    max_tokens = models.PositiveIntegerField(null=True, blank=True, help_text="Blank: not sent.")
    top_p = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="From 0 to 1; blank: not sent.",
    )
    seed = models.IntegerField(null=True, blank=True, help_text="Blank: not sent.")
    stop = models.JSONField(default=list, blank=True, help_text="Stop sequences (a list).")
    stream = models.BooleanField(
        default=False,
        help_text="Ask for the reply as a stream (server-sent events), so pages can show it "
        "as it is written.",
    )
    timeout_seconds = models.FloatField(default=120, validators=[validate_positive])
    # Each call in flight is a thread of the run's worker: 32767 (the column's limit) would
    # start that many.
    concurrency = models.PositiveSmallIntegerField(
        default=8,
        validators=[
            *_AT_LEAST_ONE,
            MaxValueValidator(MAX_CONCURRENCY, message=f"At most {MAX_CONCURRENCY}."),
        ],
    )
    requests_per_minute = models.PositiveIntegerField(default=500, validators=_AT_LEAST_ONE)
    tokens_per_minute = models.PositiveIntegerField(default=200_000, validators=_AT_LEAST_ONE)
    max_retries = models.PositiveSmallIntegerField(default=5)
    price_prompt_per_1k = models.DecimalField(max_digits=10, decimal_places=6, default=Decimal("0"))
    price_completion_per_1k = models.DecimalField(
        max_digits=10, decimal_places=6, default=Decimal("0")
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(concurrency__gte=1), name="endpoint_concurrency_1"),
            models.CheckConstraint(
                condition=Q(concurrency__lte=MAX_CONCURRENCY), name="endpoint_concurrency_at_most"
            ),
            models.CheckConstraint(condition=Q(requests_per_minute__gte=1), name="endpoint_rpm_1"),
            models.CheckConstraint(condition=Q(tokens_per_minute__gte=1), name="endpoint_tpm_1"),
            models.CheckConstraint(
                condition=Q(timeout_seconds__gt=0), name="endpoint_timeout_positive"
            ),
            models.CheckConstraint(
                condition=Q(temperature__gte=0, temperature__lte=2),
                name="endpoint_temperature_0_2",
            ),
            models.CheckConstraint(
                condition=Q(top_p__isnull=True) | Q(top_p__gte=0, top_p__lte=1),
                name="endpoint_top_p_0_1",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_fake(self) -> bool:
        return not self.base_url

    @property
    def spends_money(self) -> bool:
        """Any endpoint with an address may bill someone; only the offline fake never does (its
        prices, if any, only price its calls for runs and reports)."""
        return not self.is_fake


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Stopped"


class EngineRun(models.Model):
    """A batch of units of one kind (generation, judge...) on one endpoint, resumable."""

    kind = models.CharField(max_length=40)
    endpoint = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=9, choices=RunStatus.choices, default=RunStatus.PENDING)
    params = models.JSONField(default=dict, blank=True)
    description = models.CharField(max_length=300, blank=True)
    units_total = models.PositiveIntegerField(default=0)
    units_done = models.PositiveIntegerField(default=0)
    units_failed = models.PositiveIntegerField(default=0)
    units_skipped = models.PositiveIntegerField(
        default=0, help_text="Units found done before this run started (no call made)."
    )
    units_done_earlier = models.PositiveIntegerField(
        default=0,
        help_text="Units this run had done in its earlier starts when its current (or last) "
        "start began: done by this run, before this start (0 on a first start).",
    )
    calls = models.PositiveIntegerField(default=0)
    calls_failed = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal("0"))
    call_seconds = models.FloatField(default=0, help_text="Sum of the calls' latencies.")
    spending_cap_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    cost_reserved_usd = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        default=Decimal("0"),
        help_text="Worst cost of the calls in flight or not yet stored (Celery chunks, with a cap).",
    )
    possibly_billed_usd = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        default=Decimal("0"),
        help_text="Estimated cost of failed attempts the provider may have billed (a timeout "
        "once sent, a broken stream, a 5xx): not in cost_usd, counted by the spending cap.",
    )
    stop_requested = models.BooleanField(default=False)
    heartbeat = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Last sign of life of the run's start: its worker's beat while running, "
        "when the start was asked while pending.",
    )
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="engine_runs",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    running_since = models.DateTimeField(
        null=True, blank=True, help_text="When the current start began running; blank otherwise."
    )
    running_seconds = models.FloatField(
        default=0,
        help_text="Seconds the run ran in its starts that ended (not the time between starts).",
    )

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=RunStatus.values), name="enginerun_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} run #{self.pk} on {self.endpoint.name}"

    @property
    def is_active(self) -> bool:
        return self.status in (RunStatus.PENDING, RunStatus.RUNNING)

    @property
    def is_preparing(self) -> bool:
        """Started, but its units are not made yet: pages say so rather than "0 / 0"."""
        return self.is_active and self.units_total == 0

    @property
    def done_before(self) -> bool:
        """Finished having asked nothing: every unit was done before this run (pages say so
        rather than "Done, 15/15" beside no new answer)."""
        return self.status == RunStatus.DONE and 0 < self.units_total == self.units_skipped


class UnitStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DONE = "done", "Done"
    SKIPPED = "skipped", "Done before this run"
    FAILED = "failed", "Failed"


class EngineUnit(models.Model):
    """One unit of a run, keyed by its content (item, endpoint, parameters, prompt version)."""

    run = models.ForeignKey(EngineRun, on_delete=models.CASCADE, related_name="units")
    key = models.CharField(max_length=200)
    status = models.CharField(max_length=7, choices=UnitStatus.choices, default=UnitStatus.PENDING)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "key"], name="engineunit_unique_key"),
            models.CheckConstraint(
                condition=Q(status__in=UnitStatus.values), name="engineunit_status_valid"
            ),
        ]
        indexes = [models.Index(fields=["run", "status"], name="engineunit_run_status")]

    def __str__(self) -> str:
        return f"run {self.run_id} / {self.key} ({self.status})"


class ChunkStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    DONE = "done", "Done"


class EngineChunk(models.Model):
    """A slice of a run's units handed to one Celery task (a run started with a broker).

    `outcome` is blank (its units ended), "failed" (the protocol's code raised: `error`) or
    "cancelled" (stopped, or the spending cap: `error`). The last chunk to end finishes the run.

    `lease` and `heartbeat` say which delivery of its task runs it: Redis hands a task again
    once it has run longer than the broker's visibility timeout, while its first delivery still
    runs. Only the delivery holding the lease calls; another takes it over only once its
    heartbeat is older than ENGINE_CHUNK_LEASE_SECONDS (its worker died).
    """

    run = models.ForeignKey(EngineRun, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    keys = models.JSONField(default=list)
    status = models.CharField(
        max_length=7, choices=ChunkStatus.choices, default=ChunkStatus.PENDING
    )
    outcome = models.CharField(max_length=9, blank=True)
    error = models.TextField(blank=True)
    task_id = models.CharField(max_length=255, blank=True)
    worker = models.CharField(max_length=255, blank=True)
    lease = models.CharField(
        max_length=32, blank=True, help_text="The token of the delivery that runs the chunk."
    )
    heartbeat = models.DateTimeField(
        null=True, blank=True, help_text="Last beat of the delivery holding the lease."
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="enginechunk_unique_index"),
            models.CheckConstraint(
                condition=Q(status__in=ChunkStatus.values), name="enginechunk_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} chunk {self.index} ({self.status})"


# How an error call that reached the server but carried no text begins its message: the
# message's content was an empty string, or null. A protocol that must read them as a reference
# script does (the official InFoBench evaluation.py) tells them apart with the properties below.
EMPTY_REPLY = "empty reply"
NULL_CONTENT = "null content"


class CallStatus(models.TextChoices):
    OK = "ok", "OK"
    ERROR = "error", "Error"
    TRUNCATED = "truncated", "Truncated (length)"
    REFUSED = "refused", "Refused (content filter)"


class EngineCall(models.Model):
    """One model call as sent and as answered. Only ok and truncated calls carry reply text."""

    run = models.ForeignKey(
        EngineRun, null=True, blank=True, on_delete=models.CASCADE, related_name="engine_calls"
    )
    endpoint = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="calls")
    unit_key = models.CharField(max_length=200, blank=True, db_index=True)
    purpose = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=9, choices=CallStatus.choices)
    request = models.JSONField(help_text="The exact request body sent.")
    reply = models.TextField(blank=True)
    error = models.TextField(blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    usage_estimated = models.BooleanField(
        default=False, help_text="The server sent no usage: tokens are estimated (4 chars each)."
    )
    latency_ms = models.PositiveIntegerField(default=0)
    retries = models.PositiveSmallIntegerField(default=0)
    system_fingerprint = models.CharField(max_length=200, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal("0"))
    possibly_billed_usd = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        default=Decimal("0"),
        help_text="Estimated cost of the call's failed attempts the provider may have billed (a "
        "timeout once sent, a broken stream, a 5xx): not in cost_usd, which is what the server "
        "billed when it answered; added to its run's possibly_billed_usd.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=CallStatus.values), name="enginecall_status_valid"
            ),
            # A failure is never stored as an answer.
            models.CheckConstraint(
                condition=Q(status__in=["ok", "truncated"]) | Q(reply=""),
                name="enginecall_no_reply_on_failure",
            ),
        ]

    def __str__(self) -> str:
        return f"call #{self.pk} {self.purpose or self.unit_key} ({self.status})"

    @property
    def answered(self) -> bool:
        """True when the call has reply text (ok, or cut at the token limit)."""
        return self.status in (CallStatus.OK, CallStatus.TRUNCATED)

    @property
    def empty_reply(self) -> bool:
        """True when the server answered with an empty string (stored as an error)."""
        return self.status == CallStatus.ERROR and self.error.startswith(EMPTY_REPLY)

    @property
    def content_null(self) -> bool:
        """True when the server answered with `"content": null` (stored as an error)."""
        return self.status == CallStatus.ERROR and self.error.startswith(NULL_CONTENT)
