"""The annotation data model: benchmarks, questions, responses, annotators, labels and the work
that produces them (projects, batches, tasks, assignments).

Models hold data and database constraints only; every write goes through annotate.services.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Subset(models.TextChoices):
    EASY = "easy", "Easy"
    HARD = "hard", "Hard"


class ConstraintType(models.IntegerChoices):
    """Constraint types of a decomposed question (paper §2.2), stored as bits of a mask."""

    CONTENT = 1, "Content"
    LINGUISTIC = 2, "Linguistic"
    STYLE = 4, "Style"
    FORMAT = 8, "Format"
    NUMBER = 16, "Number"


def _masks_with_one_to_three_bits() -> list[int]:
    return [mask for mask in range(1, 32) if 1 <= bin(mask).count("1") <= 3]


VALID_CONSTRAINT_MASKS = _masks_with_one_to_three_bits()


def constraint_mask(names: list[str]) -> int:
    """Return the bit mask for constraint type names such as ["Content", "Format"]."""
    by_label = {choice.label.lower(): choice.value for choice in ConstraintType}
    mask = 0
    for name in names:
        mask |= by_label[name.strip().lower()]
    return mask


def constraint_names(mask: int) -> list[str]:
    """Return the constraint type names set in a mask, in a fixed order."""
    return [choice.label for choice in ConstraintType if mask & choice.value]


class Benchmark(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Instruction(models.Model):
    # db_index=False: the unique constraint below leads with it, and is its index.
    benchmark = models.ForeignKey(
        Benchmark, on_delete=models.CASCADE, related_name="instructions", db_index=False
    )
    external_id = models.CharField("instruction id", max_length=200)
    subset = models.CharField(max_length=4, choices=Subset.choices)
    category = models.CharField("domain", max_length=300, blank=True)
    text = models.TextField("instruction")
    input_text = models.TextField("input", blank=True)
    position = models.PositiveIntegerField(default=0, help_text="Order in the imported file.")

    class Meta:
        ordering = ["benchmark", "position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["benchmark", "external_id"], name="instruction_unique_external_id"
            ),
            models.CheckConstraint(
                condition=Q(subset__in=Subset.values), name="instruction_subset_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.external_id


class Question(models.Model):
    # db_index=False: the unique constraint below leads with it, and is its index.
    instruction = models.ForeignKey(
        Instruction, on_delete=models.CASCADE, related_name="questions", db_index=False
    )
    position = models.PositiveSmallIntegerField(help_text="1-based order within the instruction.")
    text = models.TextField()
    constraint_mask = models.PositiveSmallIntegerField(
        help_text="Constraint types as bits: Content 1, Linguistic 2, Style 4, Format 8, Number 16."
    )

    class Meta:
        ordering = ["instruction", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["instruction", "position"], name="question_unique_position"
            ),
            models.CheckConstraint(condition=Q(position__gte=1), name="question_position_from_1"),
            models.CheckConstraint(
                condition=Q(constraint_mask__in=VALID_CONSTRAINT_MASKS),
                name="question_one_to_three_constraint_types",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.instruction.external_id} Q{self.position}"

    @property
    def constraint_types(self) -> list[str]:
        return constraint_names(self.constraint_mask)


class System(models.Model):
    """A model under evaluation. With a generation endpoint its responses are generated in the
    app (and none may be imported); without one they are imported."""

    name = models.CharField(max_length=200, unique=True)
    generation_endpoint = models.ForeignKey(
        "engine.Endpoint",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="systems",
        help_text="Blank: responses are imported.",
    )
    retired_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="retired_versions",
        help_text="Holds responses replaced by a regeneration of that system, with their labels.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Response(models.Model):
    # db_index=False: the unique constraint below leads with it, and is its index.
    instruction = models.ForeignKey(
        Instruction, on_delete=models.CASCADE, related_name="responses", db_index=False
    )
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="responses")
    text = models.TextField()
    generation_key = models.CharField(
        max_length=200, blank=True, help_text="Unit key of the generation; blank: imported."
    )
    generated_by = models.ForeignKey(
        "engine.EngineCall",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The model call whose reply this is (its run is the call's run).",
    )

    class Meta:
        ordering = ["instruction", "system"]
        constraints = [
            models.UniqueConstraint(
                fields=["instruction", "system"], name="response_unique_instruction_system"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.instruction.external_id} / {self.system.name}"


class AnnotatorKind(models.TextChoices):
    EXPERT = "expert", "Expert"
    CROWD = "crowd", "Crowd worker"
    LLM = "llm", "LLM judge"
    UNDECIDED = "undecided", "Not decided yet"


# Labels count in results only under one of these kinds: a new web account is undecided until a
# researcher says whether it is an expert or a crowd worker.
DECIDED_KINDS = [AnnotatorKind.EXPERT, AnnotatorKind.CROWD, AnnotatorKind.LLM]
DECIDED_KIND_VALUES = [kind.value for kind in DECIDED_KINDS]
PERSON_KINDS = [AnnotatorKind.EXPERT, AnnotatorKind.CROWD]


class Annotator(models.Model):
    """Whoever produced a label: a person with an account, a crowd worker, or an LLM judge."""

    # Unique by a constraint in Meta, not unique=True: on PostgreSQL the field option adds a
    # second (varchar_pattern_ops) index for LIKE 'x%' that nothing here asks for, and a new
    # connection opens every index of the table for each statement that reads it (every task
    # page and submit does; docs/benchmarks.md, issue 17).
    name = models.CharField(max_length=200)
    kind = models.CharField(
        max_length=9,
        choices=AnnotatorKind.choices,
        help_text="Only labels of experts, crowd workers and LLM judges count in results.",
    )
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="annotator",
    )
    platform = models.CharField(max_length=40, blank=True, help_text="Crowd platform, e.g. mturk.")
    worker_id = models.CharField(max_length=200, blank=True, help_text="Worker id on the platform.")
    judge_config = models.CharField(
        max_length=200, blank=True, help_text="Judge configuration that produced the labels."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    kind_changed_at = models.DateTimeField(
        null=True, blank=True, help_text="When a researcher last set the kind (reports follow it)."
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=AnnotatorKind.values), name="annotator_kind_valid"
            ),
            models.UniqueConstraint(
                fields=["platform", "worker_id"],
                condition=~Q(worker_id=""),
                name="annotator_unique_platform_worker",
            ),
            models.UniqueConstraint(fields=["name"], name="annotator_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"


class LabelValue(models.IntegerChoices):
    NO = 0, "NO"
    YES = 1, "YES"
    UNKNOWN = 2, "UNKNOWN"


# Label's partial index over the labels without an assignment (bulk imports rebuild it).
LABEL_UNASSIGNED_INDEX = "label_unassigned"


class Label(models.Model):
    """One annotator's answer to one decomposed question about one response."""

    # Four indexes and no more, because each one slows the bulk import of millions of labels:
    # the unique (question, response, annotator), (response, annotator) for reads by response,
    # a partial one on assignment (imported labels have none), and a partial (annotator,
    # response) over the labels without an assignment, from which every claim and "task N of
    # M" reads an annotator's imported work instead of probing each open task's responses in
    # the whole table (docs/benchmarks.md, issue 17).
    question = models.ForeignKey(
        Question, on_delete=models.CASCADE, related_name="labels", db_index=False
    )
    response = models.ForeignKey(
        Response, on_delete=models.CASCADE, related_name="labels", db_index=False
    )
    annotator = models.ForeignKey(
        Annotator, on_delete=models.CASCADE, related_name="labels", db_index=False
    )
    value = models.PositiveSmallIntegerField(choices=LabelValue.choices)
    # PROTECT, not SET_NULL: a label that lost its assignment would read as work that needs
    # none and count whatever its assignment's status was (annotate.selectors.results).
    assignment = models.ForeignKey(
        "Assignment",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="labels",
        db_index=False,
    )
    imported = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Written by a label import: counts without an assignment (results.py).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # A correction in the admin moves a report's cache key (evaluation.services.reports), as
    # no sum of the rows' values can: corrections that cancel out keep any checksum.
    changed_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When it was last corrected in the admin (blank: never).",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["question", "response", "annotator"], name="label_unique_per_annotator"
            ),
            models.CheckConstraint(
                condition=Q(value__in=LabelValue.values), name="label_value_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["response", "annotator"], name="label_response_annotator"),
            models.Index(
                fields=["assignment"],
                condition=Q(assignment__isnull=False),
                name="label_assignment",
            ),
            models.Index(
                fields=["annotator", "response"],
                condition=Q(assignment__isnull=True),
                name=LABEL_UNASSIGNED_INDEX,
            ),
        ]

    def __str__(self) -> str:
        return f"{self.question} / {self.response.system.name} / {self.annotator.name}: {self.get_value_display()}"


class DirectScore(models.Model):
    """A 1–5 direct score (paper §3.1) of one response by one annotator."""

    # db_index=False: the unique constraint below leads with it, and is its index.
    response = models.ForeignKey(
        Response, on_delete=models.CASCADE, related_name="scores", db_index=False
    )
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="scores")
    score = models.PositiveSmallIntegerField()
    assignment = models.ForeignKey(
        "Assignment", null=True, blank=True, on_delete=models.PROTECT, related_name="scores"
    )
    imported = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Written by a score import: counts without an assignment (results.py).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # A correction in the admin moves a report's cache key (evaluation.services.reports), as
    # no sum of the rows' values can: corrections that cancel out keep any checksum.
    changed_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When it was last corrected in the admin (blank: never).",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["response", "annotator"], name="directscore_unique_per_annotator"
            ),
            models.CheckConstraint(
                condition=Q(score__gte=1) & Q(score__lte=5), name="directscore_score_1_to_5"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.response} / {self.annotator.name}: {self.score}"


# --- The work that produces labels: Project → Batch → Task → Assignment -----------------------


class ProjectMode(models.TextChoices):
    DRFR = "drfr", "Decomposed questions (DRFR)"
    DIRECT_SCORE = "direct_score", "Direct scoring (1–5)"
    BOTH = "both", "Direct score first, then decomposed questions"


class Project(models.Model):
    # Unique by a constraint in Meta, for the reason given at Annotator.name.
    name = models.CharField(max_length=200)
    benchmark = models.ForeignKey(Benchmark, on_delete=models.PROTECT, related_name="projects")
    systems = models.ManyToManyField(System, related_name="projects")
    mode = models.CharField(max_length=12, choices=ProjectMode.choices, default=ProjectMode.DRFR)
    assignments_per_task = models.PositiveSmallIntegerField(default=3)
    allotted_minutes = models.PositiveIntegerField(default=60)
    guidelines = models.TextField(blank=True)
    reward_usd = models.DecimalField(
        max_digits=8, decimal_places=2, default=1, help_text="Paid per assignment on a platform."
    )
    completion_url = models.URLField(blank=True, help_text="Self-hosted: where workers go after.")
    completion_code = models.CharField(max_length=100, blank=True)
    practice = models.BooleanField(
        default=False,
        help_text="Practice project: answers are kept on the assignment but never become labels, "
        "so they stay out of every report, majority and export.",
    )
    continue_to_next = models.BooleanField(
        "continue to the next task after submit",
        default=True,
        help_text="Open the annotator's next task straight after a submit.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    researchers = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="research_projects",
        help_text="Researchers who may read this project's progress and labels.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(assignments_per_task__gte=1), name="project_assignments_at_least_1"
            ),
            models.CheckConstraint(
                condition=Q(allotted_minutes__gte=1), name="project_allotted_at_least_1"
            ),
            models.CheckConstraint(
                condition=Q(mode__in=ProjectMode.values), name="project_mode_valid"
            ),
            models.UniqueConstraint(fields=["name"], name="project_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name


class ProjectAnnotatorKind(models.Model):
    """An annotator's kind within one project's benchmark, where it differs from their own."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="annotator_kinds")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="project_kinds")
    kind = models.CharField(max_length=9, choices=AnnotatorKind.choices)
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["project", "annotator"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "annotator"], name="projectannotatorkind_unique"
            ),
            models.CheckConstraint(
                condition=Q(kind__in=[AnnotatorKind.EXPERT, AnnotatorKind.CROWD]),
                name="projectannotatorkind_person_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.annotator.name} in {self.project.name}: {self.get_kind_display()}"


class Batch(models.Model):
    # db_index=False: the unique constraint below leads with it, and is its index.
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="batches", db_index=False
    )
    name = models.CharField(max_length=200)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "batches"
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="batch_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.project.name} / {self.name}"


class Task(models.Model):
    """One instruction with the responses of every system of the project."""

    # db_index=False: the unique constraint below leads with it, and is its index.
    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="tasks", db_index=False)
    instruction = models.ForeignKey(Instruction, on_delete=models.PROTECT, related_name="tasks")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["batch", "position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["batch", "instruction"], name="task_unique_instruction"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.batch} / {self.instruction.external_id}"


class AssignmentStatus(models.TextChoices):
    CLAIMED = "claimed", "Claimed"
    SUBMITTED = "submitted", "Submitted"
    EXPIRED = "expired", "Expired"
    RETURNED = "returned", "Returned"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


LIVE_OR_DONE_STATUSES = [
    AssignmentStatus.CLAIMED,
    AssignmentStatus.SUBMITTED,
    AssignmentStatus.APPROVED,
]


class Assignment(models.Model):
    """One annotator doing one task.

    `is_late` marks submitted work that holds no slot of its task, kept and not counted: work
    submitted after its claim lapsed with no slot left (status expired, its answers on the
    assignment only), or platform work a sync did not find for its worker (status submitted,
    its labels written: annotate.crowd.services.review._unconfirmed_slots_released), and the
    work of a blocked crowd worker (status submitted or approved, labels written:
    review._blocked_work_released; an unblock clears the mark where the task has a free slot).
    """

    # db_index=False: the unique constraint below leads with it, and is its index.
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="assignments", db_index=False
    )
    annotator = models.ForeignKey(Annotator, on_delete=models.PROTECT, related_name="assignments")
    status = models.CharField(
        max_length=9, choices=AssignmentStatus.choices, default=AssignmentStatus.CLAIMED
    )
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    order_seed = models.BigIntegerField(help_text="Seed of the shuffled display order.")
    display_order = models.JSONField(
        default=list, help_text="System ids in the order shown: index 0 is System A."
    )
    active_seconds = models.FloatField(default=0)
    is_late = models.BooleanField(
        default=False, help_text="Submitted after expiry with no free slot: kept, not counted."
    )
    submission = models.JSONField(
        null=True, blank=True, help_text="The accepted submission, as validated."
    )
    direct_scores = models.JSONField(
        null=True,
        blank=True,
        help_text="In 'both' mode: the scores of the first phase, by display position.",
    )
    scored_at = models.DateTimeField(
        null=True, blank=True, help_text="When the direct scores were given ('both' mode)."
    )
    ended_by_block_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When blocking the crowd worker ended this claim before its time ran out.",
    )
    platform_assignment_id = models.CharField(max_length=200, blank=True)
    platform_hit_id = models.CharField(max_length=200, blank=True)
    reject_reason = models.TextField(
        blank=True,
        help_text="Why an admin rejected it, as typed. Sent to the worker as the platform's "
        "feedback when the platform is told of the reject (MTurk); a worker with an account "
        "here reads it beside the work under 'Your recent assignments' on 'My tasks' (their 20 "
        "latest claims); a self-hosted participant is not shown it.",
    )
    queue_project = models.ForeignKey(
        Project,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="Set when 'start next' handed out this claim: the database then holds at most "
        "one such live claim per annotator and project (a crowd HIT's claim leaves it empty).",
    )

    class Meta:
        ordering = ["-claimed_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "annotator"], name="assignment_unique_annotator"
            ),
            # Twenty "start next" at once from one session must give one claim, not twenty.
            models.UniqueConstraint(
                fields=["annotator", "queue_project"],
                condition=Q(status=AssignmentStatus.CLAIMED),
                name="assignment_one_live_claim_per_project",
            ),
            models.CheckConstraint(
                condition=Q(status__in=AssignmentStatus.values), name="assignment_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(active_seconds__gte=0), name="assignment_active_seconds_nonnegative"
            ),
        ]
        indexes = [models.Index(fields=["status", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.task} / {self.annotator.name} ({self.status})"


class TaskSlots(models.Model):
    """How many assignments of a task hold or may hold a slot: every claim (live, or past its
    time and not yet expired) and every accepted submission that was not late.

    Kept by database triggers on annotate_assignment (migrations 0011, 0012, 0014) on every
    insert, update and delete, whichever code path makes it, and on annotate_task (a row for
    every task, with its batch); the app never writes it. The
    slots taken are `held` less the task's claims past their time (an index range of the few
    the beat has not expired yet): the claim's candidates and "task N of M" read 500 tasks'
    counters instead of counting every assignment of the project. The claim itself still counts
    the task's assignments under the task's row lock, so a wrong counter could hide a free task
    but never hand out a slot twice.
    """

    task = models.OneToOneField(
        Task,
        primary_key=True,
        on_delete=models.DO_NOTHING,  # a trigger on annotate_task deletes the row
        db_constraint=False,
        related_name="+",
    )
    held = models.IntegerField(default=0)
    # The task's batch, copied by a trigger on annotate_task (migration 0014), which also gives
    # every task its row from the start: the tasks of a project with a free slot are then the
    # index range (batch, held < limit) rather than every task of the project.
    batch = models.ForeignKey(
        Batch, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )

    class Meta:
        verbose_name_plural = "task slots"
        indexes = [models.Index(fields=["batch", "held"], name="taskslots_batch_held")]

    def __str__(self) -> str:
        return f"task {self.task_id}: {self.held} held"


# --- Imports started from the web, run in the background ------------------------------------


class ImportKind(models.TextChoices):
    INSTRUCTIONS = "instructions", "Instructions (InFoBench JSON Lines)"
    RESPONSES = "responses", "Responses of one system (JSON Lines: id, output)"
    LABELS = "labels", "Labels (evaluation JSON Lines, or long CSV)"
    SCORES = "scores", "Direct scores (long CSV)"


class ImportStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class ImportJob(models.Model):
    """An uploaded file waiting to be imported, or the outcome of its import."""

    kind = models.CharField(max_length=12, choices=ImportKind.choices)
    benchmark_name = models.CharField(max_length=200)
    system_name = models.CharField(max_length=200, blank=True)
    annotator_name = models.CharField(max_length=200, blank=True)
    annotator_kind = models.CharField(
        max_length=6,
        blank=True,
        choices=[(kind.value, kind.label) for kind in DECIDED_KINDS],
    )
    upload = models.FileField(upload_to="imports/%Y/%m/")
    original_name = models.CharField(max_length=255)
    status = models.CharField(
        max_length=7, choices=ImportStatus.choices, default=ImportStatus.QUEUED
    )
    message = models.TextField(blank=True)
    rows = models.PositiveIntegerField(default=0)
    created = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life of the worker running the import."
    )
    lease = models.CharField(
        max_length=32,
        blank=True,
        help_text="The token of the delivery running the import (import_job_run's claim).",
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=ImportKind.values), name="importjob_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=ImportStatus.values), name="importjob_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.original_name} ({self.status})"


class DeferredTask(models.Model):
    """A Celery task whose sending failed (the broker was down); the beat sends it again."""

    name = models.CharField(max_length=200)
    args = models.JSONField(default=list)
    created_at = models.DateTimeField()
    attempts = models.PositiveIntegerField(default=1)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.name}{tuple(self.args)} (deferred {self.created_at:%Y-%m-%d %H:%M:%S})"


class PasswordTokenRevocation(models.Model):
    """The API tokens of a user deleted because their password changed, for the tokens page to
    tell them why their scripts stopped working."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    revoked_at = models.DateTimeField()
    token_count = models.PositiveIntegerField()

    class Meta:
        ordering = ["-revoked_at"]

    def __str__(self) -> str:
        when = f"{self.revoked_at:%Y-%m-%d %H:%M}"
        return f"{self.token_count} API token(s) of user {self.user_id} revoked {when}"
