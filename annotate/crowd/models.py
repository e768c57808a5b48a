"""What we keep about work on crowd platforms: publications of batches, their HITs, the
platform's view of assignments, bonuses, blocks, gold answers, and a log of every platform call.

Models hold data and database constraints only; writes go through annotate.crowd.services.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotate.models import (
    Annotator,
    AnnotatorKind,
    Assignment,
    Batch,
    LabelValue,
    Project,
    Question,
    Response,
    Task,
)


class PublicationStatus(models.TextChoices):
    PENDING = "pending", "Waiting to publish"
    PUBLISHING = "publishing", "Publishing"
    PUBLISHED = "published", "Published"
    PARTIAL = "partial", "Partly published (some HITs missing)"
    STALLED = "stalled", "Stalled (the publish stopped before its end)"
    FAILED = "failed", "Failed"


class Publication(models.Model):
    """One batch, or one verbalizer human study, offered on one platform, with the HIT settings
    it was published with. A batch's HITs are its tasks; a study's HITs are its prompts."""

    batch = models.ForeignKey(
        Batch, null=True, blank=True, on_delete=models.CASCADE, related_name="publications"
    )
    human_study = models.ForeignKey(
        "verbalizer.HumanStudy",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="publications",
    )
    platform = models.CharField(max_length=40)
    sandbox = models.BooleanField(
        default=False,
        help_text="Made on MTurk's requester sandbox (MTURK_SANDBOX when it was made): its "
        "workers are test accounts nobody pays, so its work counts in no result and costs "
        "nothing. Publications made before this was recorded count as before (false).",
    )
    status = models.CharField(
        max_length=10, choices=PublicationStatus.choices, default=PublicationStatus.PENDING
    )
    title = models.CharField(max_length=200)
    description = models.TextField()
    keywords = models.CharField(max_length=500, blank=True)
    reward_usd = models.DecimalField(max_digits=8, decimal_places=2)
    fee_rate = models.DecimalField(
        max_digits=4,
        decimal_places=3,
        null=True,
        blank=True,
        help_text="The flat fee it was published at (CROWD_FEE_RATE); empty: MTurk's schedule "
        "(annotate.crowd.pricing).",
    )
    assignments_per_task = models.PositiveSmallIntegerField()
    assignment_duration_seconds = models.PositiveIntegerField()
    auto_approval_delay_seconds = models.PositiveIntegerField()
    lifetime_seconds = models.PositiveIntegerField()
    qualification_requirements = models.JSONField(default=list, blank=True)
    hit_type_id = models.CharField(max_length=200, blank=True)
    task_base_url = models.URLField(help_text="The site address workers' browsers use.")
    link_token = models.CharField(
        max_length=64, unique=True, help_text="Self-hosted: the secret part of the public link."
    )
    link_closed_at = models.DateTimeField(
        null=True, blank=True, help_text="Self-hosted: the link takes no new workers since then."
    )
    anonymous_starts_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Self-hosted: most starts without a participant id on the link "
        "(empty: CROWD_ANONYMOUS_STARTS_PER_LINK).",
    )
    completion_code = models.CharField(
        max_length=100,
        blank=True,
        help_text="Self-hosted: the code shown after the submit, which the recruiting site "
        "(Prolific...) asks of participants before it pays them.",
    )
    completion_url = models.URLField(
        blank=True, help_text="Self-hosted: where participants go after the submit."
    )
    error = models.TextField(blank=True)
    replacing_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Set while an admin's request for workers in place of rejected work runs "
        "(annotate.crowd.services.replacements): a second one waits, so nothing is asked twice.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Last sign of life of the publish making its HITs (also: when a resume was "
        "asked for).",
    )
    lease = models.CharField(
        max_length=32,
        blank=True,
        help_text="The token of the delivery making its HITs (publication_publish's claim).",
    )
    finished_at = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When an admin expired the publication: no publish makes another of its HITs "
        "until an admin's Resume asks for them again.",
    )
    expiry_outcome = models.TextField(
        blank=True,
        help_text="What the last Expire came to, once its platform calls ran in the background "
        "(annotate.crowd.services.review.publication_expire_run); empty until its run ends.",
    )
    # The last Expire's run (annotate.crowd.services.expiry.expiry_run_of): asked, running, or
    # finished; one silent for CROWD_EXPIRY_STALE_SECONDS (its worker killed) stopped.
    expiry_asked_at = models.DateTimeField(
        null=True, blank=True, help_text="When an admin last pressed Expire."
    )
    expiry_started_at = models.DateTimeField(
        null=True, blank=True, help_text="When that Expire's run took it and began asking."
    )
    expiry_heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="That run's last sign of life."
    )
    expiry_finished_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When that run ended (expiry_outcome says how), on an error too.",
    )
    expiry_lease = models.CharField(
        max_length=32, blank=True, help_text="The token of the delivery running that Expire."
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["batch", "platform"], name="crowd_publication_one_per_platform"
            ),
            models.UniqueConstraint(
                fields=["human_study", "platform"],
                name="crowd_publication_study_one_per_platform",
            ),
            models.CheckConstraint(
                condition=Q(batch__isnull=False, human_study__isnull=True)
                | Q(batch__isnull=True, human_study__isnull=False),
                name="crowd_publication_batch_or_study",
            ),
            models.CheckConstraint(
                condition=Q(status__in=PublicationStatus.values),
                name="crowd_publication_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(reward_usd__gte=0), name="crowd_publication_reward_nonnegative"
            ),
            models.CheckConstraint(
                condition=Q(assignments_per_task__gte=1),
                name="crowd_publication_assignments_at_least_1",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.target} on {self.platform}"

    @property
    def target(self):
        """What is published: the batch, or the human study."""
        return self.batch if self.batch_id else self.human_study


class HitStatus(models.TextChoices):
    PENDING = "pending", "Not created yet"
    CREATED = "created", "Created"
    FAILED = "failed", "Failed"
    DELETED = "deleted", "Deleted"


class Hit(models.Model):
    """One task (or, for a human study, one prompt) of a publication as a HIT. The token is stored
    before the HIT is created."""

    # PROTECT: a HIT and what the platform reported of its assignments are the confirmations
    # crowd work counts by (annotate.selectors.results); a cascade would drop them silently.
    publication = models.ForeignKey(Publication, on_delete=models.PROTECT, related_name="hits")
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.PROTECT, related_name="hits"
    )
    prompt = models.ForeignKey(
        "verbalizer.Prompt", null=True, blank=True, on_delete=models.CASCADE, related_name="hits"
    )
    unique_request_token = models.CharField(max_length=64, unique=True)
    max_assignments = models.PositiveSmallIntegerField(
        help_text="The HIT's MaxAssignments: what its task still needed when it was published "
        "(the assignments per task less those submitted or claimed here before)."
    )
    hit_id = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=7, choices=HitStatus.choices, default=HitStatus.PENDING)
    expires_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    expiry_pending_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When an admin's expiry of the HIT was asked for (stored before the platform "
        "is asked), while the platform has not confirmed it (not asked yet, an error, a "
        "timeout): the HIT may still take workers, and be paid for. The next Expire and the "
        "sync beat ask again; cleared once the platform confirms.",
    )
    expiry_error = models.TextField(
        blank=True, help_text="Why the platform did not confirm the expiry last asked for."
    )
    synced_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["publication", "task__position", "task_id", "prompt_id"]
        constraints = [
            models.UniqueConstraint(fields=["publication", "task"], name="crowd_hit_one_per_task"),
            models.UniqueConstraint(
                fields=["publication", "prompt"], name="crowd_hit_one_per_prompt"
            ),
            models.CheckConstraint(
                condition=Q(task__isnull=False, prompt__isnull=True)
                | Q(task__isnull=True, prompt__isnull=False),
                name="crowd_hit_task_or_prompt",
            ),
            models.UniqueConstraint(
                fields=["hit_id"], condition=~Q(hit_id=""), name="crowd_hit_unique_hit_id"
            ),
            models.CheckConstraint(
                condition=Q(status__in=HitStatus.values), name="crowd_hit_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(max_assignments__gte=1), name="crowd_hit_max_assignments_at_least_1"
            ),
        ]

    def __str__(self) -> str:
        return self.hit_id or f"(pending) {self.task or self.prompt}"


class HitExtensionStatus(models.TextChoices):
    PENDING = "pending", "Asked for, not confirmed yet"
    DONE = "done", "Added"
    FAILED = "failed", "Refused by the platform"
    # Settled by an admin, after its token was forgotten and the HIT could not tell: never asked
    # for again, and nothing counted.
    NOT_MADE = "not_made", "Not made by the platform (settled by hand)"


class HitExtension(models.Model):
    """Assignments added to a created HIT, to replace work that no longer counts (rejected,
    returned, lapsed). The token is stored before the platform is asked, so a retried request
    finds the one made before instead of paying twice."""

    hit = models.ForeignKey(Hit, on_delete=models.CASCADE, related_name="extensions")
    count = models.PositiveSmallIntegerField()
    reward_usd = models.DecimalField(
        max_digits=8, decimal_places=2, help_text="The reward per assignment it was asked at."
    )
    fee_rate = models.DecimalField(
        max_digits=4,
        decimal_places=3,
        null=True,
        blank=True,
        help_text="Its publication's flat fee; empty: MTurk's schedule (annotate.crowd.pricing).",
    )
    unique_request_token = models.CharField(max_length=64, unique=True)
    status = models.CharField(
        max_length=8, choices=HitExtensionStatus.choices, default=HitExtensionStatus.PENDING
    )
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    done_at = models.DateTimeField(null=True, blank=True)
    settled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The admin who said, after comparing with the requester site, whether the "
        "platform made it (empty: the platform's own answer settled it).",
    )
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["hit", "created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(count__gte=1), name="crowd_hitextension_count_at_least_1"
            ),
            models.CheckConstraint(
                condition=Q(status__in=HitExtensionStatus.values),
                name="crowd_hitextension_status_valid",
            ),
            models.CheckConstraint(
                condition=~Q(status=HitExtensionStatus.NOT_MADE) | Q(settled_at__isnull=False),
                name="crowd_hitextension_not_made_settled",
            ),
        ]

    def __str__(self) -> str:
        return f"+{self.count} on {self.hit} ({self.status})"


class PlatformAssignment(models.Model):
    """An assignment as the platform last reported it, matched to ours when we have it (an
    Assignment for a batch's HIT, a HumanAnswer for a human study's)."""

    hit = models.ForeignKey(Hit, on_delete=models.PROTECT, related_name="platform_assignments")
    platform_assignment_id = models.CharField(max_length=200, unique=True)
    worker_id = models.CharField(max_length=200)
    status = models.CharField(max_length=20, help_text="Submitted, Approved or Rejected.")
    submitted_at = models.DateTimeField(null=True, blank=True)
    answer = models.TextField(blank=True)
    assignment = models.OneToOneField(
        Assignment,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="platform_record",
    )
    human_answer = models.OneToOneField(
        "verbalizer.HumanAnswer",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="platform_record",
        help_text="A human study's HIT: the answer this assignment gave.",
    )
    synced_at = models.DateTimeField()

    class Meta:
        ordering = ["hit", "submitted_at"]

    def __str__(self) -> str:
        return f"{self.platform_assignment_id} ({self.status})"


# A platform assignment matched to our work (of a batch's HIT or of a human study's): the
# confirmation that lets that work count.
LINKED_TO_OURS = Q(assignment__isnull=False) | Q(human_answer__isnull=False)


def crowd_worker_q(prefix: str = "") -> Q:
    """Annotators the crowd pages and services treat as crowd workers: everyone who came
    through a crowd platform, whatever kind a researcher gives them in results (a worker made
    an expert or "not decided yet" still holds the platform's assignments, which it pays
    unless they are rejected), and in-house accounts counted as crowd workers."""
    return ~Q(**{f"{prefix}platform": ""}) | Q(**{f"{prefix}kind": AnnotatorKind.CROWD})


class BonusStatus(models.TextChoices):
    PENDING = "pending", "Not paid yet"
    PAID = "paid", "Paid"
    FAILED = "failed", "Failed"


class Bonus(models.Model):
    """A bonus for one assignment, or for one answer to a human study's HIT. The token makes a
    retried payment a no-op on the platform."""

    assignment = models.ForeignKey(
        Assignment, null=True, blank=True, on_delete=models.PROTECT, related_name="bonuses"
    )
    human_answer = models.ForeignKey(
        "verbalizer.HumanAnswer",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="bonuses",
    )
    amount_usd = models.DecimalField(max_digits=8, decimal_places=2)
    reason = models.TextField()
    unique_request_token = models.CharField(max_length=64, unique=True)
    status = models.CharField(
        max_length=7, choices=BonusStatus.choices, default=BonusStatus.PENDING
    )
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    paid_at = models.DateTimeField(null=True, blank=True)
    # When it was last handed to the platform (set under the work's row lock just before the
    # send, cleared when the platform refuses its first send): a bonus sent once may have been
    # paid even if the reply was lost, so its retry is never refused by the limit, and a retry
    # the platform refuses still counts toward the limit (bonus_pay).
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "bonuses"
        constraints = [
            models.CheckConstraint(condition=Q(amount_usd__gt=0), name="crowd_bonus_positive"),
            models.CheckConstraint(
                condition=Q(assignment__isnull=False, human_answer__isnull=True)
                | Q(assignment__isnull=True, human_answer__isnull=False),
                name="crowd_bonus_assignment_or_answer",
            ),
            models.CheckConstraint(
                condition=Q(status__in=BonusStatus.values), name="crowd_bonus_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"${self.amount_usd} for {self.paid_for} ({self.status})"

    @property
    def paid_for(self):
        """The Assignment or HumanAnswer paid for: both have the annotator and platform ids."""
        return self.assignment or self.human_answer


class WorkerBlock(models.Model):
    """A crowd worker we will not take work from (also blocked on the platform)."""

    annotator = models.OneToOneField(Annotator, on_delete=models.CASCADE, related_name="block")
    reason = models.TextField()
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.annotator.name} ({'blocked' if self.active else 'unblocked'})"


class GoldAnswer(models.Model):
    """A known answer to one question about one response, hidden among a project's real ones."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="gold_answers")
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="+")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="+")
    value = models.PositiveSmallIntegerField(choices=LabelValue.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "question", "response"], name="crowd_gold_unique"
            ),
            models.CheckConstraint(
                condition=Q(value__in=LabelValue.values), name="crowd_gold_value_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.question} / {self.response.system.name}: {self.get_value_display()}"


class AccountBalance(models.Model):
    """The requester account's balance on a platform's endpoint as last asked (an admin's check,
    a preview, a Resume or replacements' confirmation), which pages show without asking."""

    platform = models.CharField(max_length=40)
    sandbox = models.BooleanField(default=False)
    balance_usd = models.DecimalField(max_digits=12, decimal_places=2)
    checked_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["platform", "sandbox"], name="crowd_accountbalance_one_per_endpoint"
            )
        ]

    def __str__(self) -> str:
        return f"{self.platform}{' sandbox' if self.sandbox else ''}: ${self.balance_usd}"


class PlatformCall(models.Model):
    """One call to a crowd platform: who, what, when, a summary of the request, and the result."""

    created_at = models.DateTimeField(db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    platform = models.CharField(max_length=40)
    operation = models.CharField(max_length=60)
    request = models.JSONField(default=dict, help_text="The arguments, long values shortened.")
    ok = models.BooleanField()
    error_code = models.CharField(max_length=100, blank=True)
    result = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.platform}.{self.operation} ({'ok' if self.ok else self.error_code})"
