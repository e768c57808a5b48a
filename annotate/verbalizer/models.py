"""Verbalizer manipulation (Li et al. 2023, arXiv 2307.10558): binary classification data, the
label-word mappings of the paper's Table 1, evaluation sets of rendered prompts, and the answers
of models and people to them.

Models hold data and database constraints only; writes go through annotate.verbalizer.services.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotate.engine.models import EngineCall, EngineRun
from annotate.models import Annotator, AssignmentStatus, System


class TaskFamily(models.TextChoices):
    SENTIMENT = "sentiment", "Sentiment"
    ENTAILMENT = "entailment", "Entailment"
    PARAPHRASE = "paraphrase", "Paraphrase / duplicate"
    SUBJECTIVITY = "subjectivity", "Subjectivity"


class Group(models.TextChoices):
    NATURAL = "natural", "Natural"
    NEUTRAL = "neutral", "Neutral"
    UNNATURAL = "unnatural", "Unnatural"


GROUP_ORDER = (Group.NATURAL, Group.NEUTRAL, Group.UNNATURAL)


class MappingKind(models.TextChoices):
    GOLDEN = "golden", "The dataset's golden label names"
    FLIPPED_GOLDEN = "flipped-golden", "The golden label names, swapped"
    LITERAL = "literal", "Two fixed words"


class Mode(models.TextChoices):
    DIRECT = "direct", "Direct"
    COT = "cot", "Zero-shot chain of thought"


class ClassificationDataset(models.Model):
    """A binary classification dataset; `positive_name`/`negative_name` are its golden labels."""

    name = models.CharField(max_length=200, unique=True)
    family = models.CharField(max_length=12, choices=TaskFamily.choices)
    positive_name = models.CharField(max_length=50)
    negative_name = models.CharField(max_length=50)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(positive_name=models.F("negative_name")),
                name="verbalizer_dataset_label_names_differ",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ClassificationItem(models.Model):
    """One example: `text` (and `text_b` for pairs) with its golden label (True = positive)."""

    dataset = models.ForeignKey(
        ClassificationDataset, on_delete=models.CASCADE, related_name="items"
    )
    position = models.PositiveIntegerField(help_text="1-based order in the imported file.")
    external_id = models.CharField(max_length=200, blank=True)
    text = models.TextField()
    text_b = models.TextField(blank=True)
    is_positive = models.BooleanField()

    class Meta:
        ordering = ["dataset", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "position"], name="verbalizer_item_unique_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset.name} #{self.position}"


class Mapping(models.Model):
    """A verbalizer: the words that stand for the positive and the negative golden label."""

    name = models.CharField(max_length=200, unique=True)
    group = models.CharField(max_length=9, choices=Group.choices)
    kind = models.CharField(max_length=14, choices=MappingKind.choices)
    positive_word = models.CharField(max_length=50, blank=True)
    negative_word = models.CharField(max_length=50, blank=True)
    position = models.PositiveSmallIntegerField(default=100, help_text="Order in tables.")

    class Meta:
        ordering = ["position", "name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=MappingKind.values), name="verbalizer_mapping_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(group__in=Group.values), name="verbalizer_mapping_group_valid"
            ),
            models.CheckConstraint(
                condition=~Q(kind=MappingKind.LITERAL)
                | (
                    ~Q(positive_word="")
                    & ~Q(negative_word="")
                    & ~Q(positive_word=models.F("negative_word"))
                ),
                name="verbalizer_mapping_literal_words",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def words_for(self, dataset: ClassificationDataset) -> tuple[str, str]:
        """Return (word for the positive label, word for the negative label) on `dataset`."""
        if self.kind == MappingKind.GOLDEN:
            return dataset.positive_name, dataset.negative_name
        if self.kind == MappingKind.FLIPPED_GOLDEN:
            return dataset.negative_name, dataset.positive_name
        return self.positive_word, self.negative_word


class EvaluationSet(models.Model):
    """Datasets × mappings × modes over one seeded sample of items per dataset."""

    name = models.CharField(max_length=200, unique=True)
    datasets = models.ManyToManyField(ClassificationDataset, related_name="evaluation_sets")
    mappings = models.ManyToManyField(Mapping, related_name="evaluation_sets")
    modes = models.JSONField(default=list)
    items_per_dataset = models.PositiveIntegerField()
    seed = models.BigIntegerField()
    template_version = models.CharField(max_length=40)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "name"]

    def __str__(self) -> str:
        return self.name


class Prompt(models.Model):
    """One rendered instruction: an item under one mapping in one mode, with its template version.

    `positive_word`/`negative_word` are the mapping's words on the item's dataset and
    `expected_word` the one the golden label asks for, so scoring never needs the mapping again.
    """

    evaluation_set = models.ForeignKey(
        EvaluationSet, on_delete=models.CASCADE, related_name="prompts"
    )
    item = models.ForeignKey(ClassificationItem, on_delete=models.PROTECT, related_name="prompts")
    mapping = models.ForeignKey(Mapping, on_delete=models.PROTECT, related_name="prompts")
    mode = models.CharField(max_length=6, choices=Mode.choices)
    template_version = models.CharField(max_length=40)
    text = models.TextField()
    positive_word = models.CharField(max_length=50)
    negative_word = models.CharField(max_length=50)
    expected_word = models.CharField(max_length=50)

    class Meta:
        ordering = ["evaluation_set", "item", "mapping", "mode"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation_set", "item", "mapping", "mode"],
                name="verbalizer_prompt_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.item} / {self.mapping.name} / {self.mode}"


class SystemRun(models.Model):
    """One system answering a set's prompts through one engine run."""

    evaluation_set = models.ForeignKey(
        EvaluationSet, on_delete=models.CASCADE, related_name="system_runs"
    )
    system = models.ForeignKey(System, on_delete=models.PROTECT, related_name="verbalizer_runs")
    endpoint_name = models.CharField(max_length=200)
    engine_run = models.ForeignKey(
        EngineRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    modes = models.JSONField(default=list)
    model_size_b = models.FloatField(
        null=True, blank=True, help_text="Parameters in billions; orders the figures."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.system.name} on {self.evaluation_set.name}"


class ModelAnswer(models.Model):
    """A system's raw reply to one prompt (parsed only when measured, so rules can change)."""

    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="model_answers")
    system = models.ForeignKey(System, on_delete=models.PROTECT, related_name="verbalizer_answers")
    run = models.ForeignKey(SystemRun, on_delete=models.CASCADE, related_name="answers")
    reply = models.TextField()
    engine_call = models.ForeignKey(
        EngineCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["prompt", "system"]
        constraints = [
            models.UniqueConstraint(
                fields=["prompt", "system"], name="verbalizer_model_answer_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.system.name}: {self.prompt}"


class HumanStudy(models.Model):
    """A slice of a set's prompts offered to people, each prompt to `answers_per_prompt` people."""

    name = models.CharField(max_length=200, unique=True)
    evaluation_set = models.ForeignKey(
        EvaluationSet, on_delete=models.CASCADE, related_name="human_studies"
    )
    prompts = models.ManyToManyField(Prompt, related_name="human_studies")
    answers_per_prompt = models.PositiveSmallIntegerField(default=3)
    active = models.BooleanField(default=True)
    # A self-hosted link's participants are shown the code (or sent to the URL) once they have
    # answered every prompt left for them, as a batch's are with its project's.
    completion_url = models.URLField(blank=True, help_text="Self-hosted: where workers go after.")
    completion_code = models.CharField(max_length=100, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "human studies"

    def __str__(self) -> str:
        return self.name


HUMAN_ANSWER_STATUSES = (
    AssignmentStatus.SUBMITTED,
    AssignmentStatus.APPROVED,
    AssignmentStatus.REJECTED,
)


class HumanAnswer(models.Model):
    """A person's answer to one prompt: the label word chosen (key 1 or 2) and the time taken.

    A crowd worker's answer also keeps the platform's assignment and HIT ids and a review status;
    whether it counts is decided by annotate.selectors.results (one rule for all crowd work).
    The assignment id is what the worker's page was opened with, not a key: as on a batch's
    Assignment, two workers' answers may carry the same one (a forger who typed an honest
    worker's id), and the platform's record confirms the one of its worker and HIT
    (annotate.crowd.services.review._hit_store).
    An answer the platform has not confirmed by a sync after its hand-back was due holds no
    place of its prompt (`place_released`), as a batch's released work holds no slot (is_late);
    nor does a blocked worker's answer (annotate.crowd.services.review.worker_block).
    An in-house annotator may change their last answer once, soon after (a slip of the key,
    annotate.verbalizer.services.humans.human_answer_change): `changed_from` keeps the word first
    chosen and `changed_at` the time of the change; `seconds` stays the time to the first answer.
    """

    study = models.ForeignKey(HumanStudy, on_delete=models.CASCADE, related_name="answers")
    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="human_answers")
    annotator = models.ForeignKey(
        Annotator, on_delete=models.PROTECT, related_name="verbalizer_answers"
    )
    word = models.CharField(max_length=50)
    seconds = models.FloatField(null=True, blank=True)
    status = models.CharField(
        max_length=9,
        choices=[(s.value, s.label) for s in HUMAN_ANSWER_STATUSES],
        default=AssignmentStatus.SUBMITTED,
    )
    platform_assignment_id = models.CharField(max_length=200, blank=True)
    platform_hit_id = models.CharField(max_length=200, blank=True)
    # Set by a sync whose whole listing of the answer's HIT did not have it once its hand-back
    # was due (annotate.crowd.services.review._unconfirmed_slots_released), cleared when the
    # platform confirms it; set too by its worker's block, cleared by the unblock if the prompt
    # still has a place free: it then holds no place among its prompt's answers (same_channel_q).
    place_released = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    changed_from = models.CharField(max_length=50, blank=True)
    changed_at = models.DateTimeField(null=True, blank=True)
    reject_reason = models.TextField(
        blank=True,
        help_text="Why an admin rejected it, as typed: sent to the platform as its feedback, and "
        "shown to a worker with an account here on their 'Label-word tasks' page.",
    )

    class Meta:
        ordering = ["study", "prompt", "annotator"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "prompt", "annotator"], name="verbalizer_human_answer_unique"
            ),
            models.CheckConstraint(
                condition=Q(status__in=[s.value for s in HUMAN_ANSWER_STATUSES]),
                name="verbalizer_human_answer_status_valid",
            ),
            # A change keeps the first word, and only an in-house answer changes.
            models.CheckConstraint(
                condition=Q(changed_at__isnull=True, changed_from="")
                | (
                    Q(changed_at__isnull=False, platform_assignment_id="")
                    & ~Q(changed_from="")
                    & ~Q(changed_from=models.F("word"))
                ),
                name="verbalizer_human_answer_change_recorded",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.annotator.name}: {self.prompt}"

    @property
    def submitted_at(self):
        """When the answer was given (the crowd review reads it like an assignment's)."""
        return self.created_at
