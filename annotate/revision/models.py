"""Interactive revision sessions (KIWI, Xu et al. 2024): studies, documents, sessions and turns.

A Study holds questions, each with its document set (split into passages), and the systems
(model endpoints) annotators interact with. A RevisionSession is one annotator steering one
system on one question; each Turn is an instruction, the model's revision, the annotator's
rating and comment, and optionally their edit. Models hold data and constraints only.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Rating(models.TextChoices):
    GOOD = "good", "Good"
    NEUTRAL = "neutral", "Neutral"
    BAD = "bad", "Bad"


class InstructionType(models.TextChoices):
    """The two coarse instruction types the annotator ticks (paper §2.2)."""

    INFORMATION_SEEKING = "information-seeking", "Information-seeking"
    STYLISTIC = "stylistic", "Stylistic"


class InstructionCategory(models.TextChoices):
    """The fine-grained instruction types of Table 10 (paper §4.2, appendix A.3)."""

    MORE_INFORMATION = "asking for more information", "More information"
    EXPAND_COVERAGE = "expand answer coverage", "Expand coverage"
    CLARIFICATION = "asking for clarification", "Clarification"
    CATEGORIZATION = "categorization", "Categorization"
    CONDENSE = "condense", "Condense"
    REMOVE = "remove", "Remove"
    REORGANIZE = "reorganize", "Reorganize"
    SPECIFIC_EDIT = "direct verbatim edit", "Specific edit"
    OTHERS = "others", "Others"


class ErrorCategory(models.TextChoices):
    """The error categories of neutral/bad turns of Table 11 (paper §4.3, appendix A.4)."""

    POOR_INTEGRATION = "added information but made answer less coherent/correct", "Poor integration"
    IGNORED = "instruction is ignored", "Ignored"
    UNREQUESTED_CHANGE = "introduced unrequested changes", "Unrequested change"
    CONSTRAINT_FAILURE = "failed to follow hard constraint", "Constraint failure"
    OTHERS = "others", "Others"


class Retrieval(models.TextChoices):
    BM25 = "bm25", "BM25 (bm25s)"
    DENSE = "dense", "Dense (embeddings endpoint)"


class Study(models.Model):
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    retrieval = models.CharField(max_length=10, choices=Retrieval.choices, default=Retrieval.BM25)
    # Name of the embeddings endpoint used when retrieval is dense.
    embedding_endpoint = models.CharField(max_length=200, blank=True)
    passages_per_retrieval = models.PositiveSmallIntegerField(default=5)
    max_turns = models.PositiveSmallIntegerField(default=10)
    created_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "studies"

    def __str__(self) -> str:
        return self.name


class StudySystem(models.Model):
    """One model annotators interact with; `name` is the published `model_name`."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="systems")
    name = models.CharField(max_length=200)
    # Name of the engine endpoint that answers for this system; blank = the offline fake model.
    endpoint_name = models.CharField(max_length=200, blank=True)
    position = models.PositiveIntegerField(default=0)
    # Annotators get sessions with it. A system known only from imported sessions (a published
    # model_name) is not live: the app has no model behind it, and sessions with the fake model
    # under its name would be counted with the imported ones. A questions upload naming it
    # (import_study --system) makes it live.
    live = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="revision_system_unique_name")
        ]
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return self.name


class StudyQuestion(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="questions")
    position = models.PositiveIntegerField()
    text = models.TextField()
    # Fields of the uploaded line the app does not know, given back on export.
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "text"], name="revision_question_unique_text")
        ]
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return self.text[:80]


class Document(models.Model):
    question = models.ForeignKey(StudyQuestion, on_delete=models.CASCADE, related_name="documents")
    position = models.PositiveIntegerField()
    title = models.TextField()
    text = models.TextField()
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["position"]

    def __str__(self) -> str:
        return self.title[:80]


class Passage(models.Model):
    """A paragraph-sized piece of a document, the unit of retrieval."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="passages")
    # Denormalised so retrieval reads one question's passages with one indexed query.
    question = models.ForeignKey(StudyQuestion, on_delete=models.CASCADE, related_name="passages")
    position = models.PositiveIntegerField()
    text = models.TextField()

    class Meta:
        ordering = ["document_id", "position"]
        indexes = [models.Index(fields=["question", "id"], name="revision_passage_question")]

    def __str__(self) -> str:
        return self.text[:80]


class PassageEmbedding(models.Model):
    """A passage's embedding by one embedding model (an endpoint's model at its address),
    stored on the first dense retrieval so later ones embed only the query.

    `text_sha256` is the digest of the text that was embedded: a vector whose passage text has
    changed since is stale and is embedded again. `vector` holds the floats the endpoint sent as
    little-endian float64, so a stored vector ranks exactly as a freshly fetched one.
    """

    # The unique constraint's index leads with the passage, so no index of its own.
    passage = models.ForeignKey(
        Passage, on_delete=models.CASCADE, related_name="embeddings", db_index=False
    )
    base_url = models.CharField(max_length=500)
    model = models.CharField(max_length=200)
    text_sha256 = models.CharField(max_length=64)
    vector = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["passage", "base_url", "model"], name="revision_embedding_unique_model"
            )
        ]

    def __str__(self) -> str:
        return f"passage {self.passage_id} by {self.model}"


class CallStatus(models.TextChoices):
    """Where a model answer stands: the page shows the answer only when DONE."""

    PENDING = "pending", "Waiting for the model"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class SessionStatus(models.TextChoices):
    ACTIVE = "active", "In progress"
    FINISHED = "finished", "Finished"
    # The annotator gave it up when its model call kept failing before anything was rated: kept
    # as a trace, counted nowhere, and its (question, system) not handed out again.
    GIVEN_UP = "given-up", "Given up"


# A session holds its (question, system): no other session of an annotator may have the pair.
# Imported sessions hold nothing (records, not work); a given-up session holds it until a
# researcher reopens it (its system was failing: not handed out again until then).
HOLDS_PAIR = Q(annotator__isnull=False, reopened_at__isnull=True)
# An annotator's session with work on its pair (in progress or finished): a given-up session of
# that pair is not reopened.
WORKS_PAIR = Q(annotator__isnull=False, status__in=[SessionStatus.ACTIVE, SessionStatus.FINISHED])


class RevisionSession(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="sessions")
    question = models.ForeignKey(StudyQuestion, on_delete=models.PROTECT, related_name="sessions")
    system = models.ForeignKey(StudySystem, on_delete=models.PROTECT, related_name="sessions")
    # The app user who did the session; null for imported sessions.
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="revision_sessions",
    )
    status = models.CharField(
        max_length=10, choices=SessionStatus.choices, default=SessionStatus.ACTIVE
    )
    # True when the annotator ended the session as satisfied (rather than at the turn limit).
    satisfied = models.BooleanField(default=False)
    initial_answer = models.TextField(blank=True)
    initial_status = models.CharField(
        max_length=10, choices=CallStatus.choices, default=CallStatus.DONE
    )
    initial_error = models.TextField(blank=True)
    # The initial answer as streamed so far, while pending; never the answer (emptied at the end).
    initial_partial = models.TextField(blank=True)
    initial_passages = models.JSONField(default=list, blank=True)
    initial_started_at = models.DateTimeField(null=True, blank=True)
    # Imported sessions: a content key of the source line (re-import adds nothing) and the line's
    # fields the app does not know (given back on export), and the line's position in the file.
    source_key = models.CharField(max_length=64, blank=True)
    source_position = models.PositiveIntegerField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    given_up_at = models.DateTimeField(null=True, blank=True)
    given_up_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="revision_sessions_given_up",
    )
    # A researcher put a given-up session's (question, system) back for annotators: the
    # session stays given up (who and when kept), counted nowhere, and holds the pair no more.
    reopened_at = models.DateTimeField(null=True, blank=True)
    reopened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="revision_sessions_reopened",
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status=SessionStatus.GIVEN_UP, given_up_at__isnull=False)
                | (~Q(status=SessionStatus.GIVEN_UP) & Q(given_up_at__isnull=True)),
                name="revision_session_given_up_when",
            ),
            models.CheckConstraint(
                condition=Q(reopened_at__isnull=True) | Q(status=SessionStatus.GIVEN_UP),
                name="revision_session_reopened_given_up",
            ),
            models.UniqueConstraint(
                fields=["study", "source_key"],
                condition=~Q(source_key=""),
                name="revision_session_unique_source",
            ),
            # Paper §3.2: each question gets one session per system, each annotator sees a
            # question at most once (imported sessions have no annotator in the app). A session
            # given up keeps its place: its system was failing, so the pair is not handed out
            # again, to its annotator or another, until a researcher reopens it (HOLDS_PAIR);
            # its question stays seen by its annotator even then.
            models.UniqueConstraint(
                fields=["question", "system"],
                condition=HOLDS_PAIR,
                name="revision_session_one_per_question_system",
            ),
            models.UniqueConstraint(
                fields=["question", "annotator"],
                condition=Q(annotator__isnull=False),
                name="revision_session_one_per_question_annotator",
            ),
        ]
        indexes = [models.Index(fields=["study", "status"], name="revision_session_status")]

    def __str__(self) -> str:
        return f"session {self.pk} ({self.system.name})"


# What an annotator may type (server check and the textareas' maxlength): an instruction goes to
# the model in every later prompt of the session, so its length is money; KIWI's longest is a
# few hundred characters.
INSTRUCTION_MAX_CHARS = 1000
COMMENT_MAX_CHARS = 2000
TEXT_LIMITS = {"instruction": INSTRUCTION_MAX_CHARS, "comment": COMMENT_MAX_CHARS}
# An edit of a revision (`answer_2`) starts as the model's answer and is changed in place: a fixed
# limit could refuse a small edit of a long answer, so the limit grows with the answer. 20,000
# characters is far above an answer of a few paragraphs; 5,000 more than a long answer leaves
# room for what an annotator adds by hand.
EDITED_ANSWER_MAX_CHARS = 20_000
EDITED_ANSWER_MARGIN_CHARS = 5_000


def edited_answer_limit(answer: str) -> int:
    """The most characters an edit of `answer` may have: the larger of EDITED_ANSWER_MAX_CHARS
    and the answer's length plus EDITED_ANSWER_MARGIN_CHARS."""
    return max(EDITED_ANSWER_MAX_CHARS, len(answer) + EDITED_ANSWER_MARGIN_CHARS)


class Turn(models.Model):
    session = models.ForeignKey(RevisionSession, on_delete=models.CASCADE, related_name="turns")
    position = models.PositiveSmallIntegerField()  # from 1
    instruction = models.TextField()
    instruction_type = models.CharField(max_length=30, choices=InstructionType.choices, blank=True)
    # a_{t-1}: the answer the model revised (the answer history's last entry, paper §2.2).
    previous_answer = models.TextField(blank=True)
    answer = models.TextField(blank=True)  # a_t, the model's revision (`answer_1`)
    edited_answer = models.TextField(blank=True)  # a_t', the annotator's edit (`answer_2`)
    summary = models.TextField(blank=True)  # s_t of an information-seeking turn
    passages = models.JSONField(default=list, blank=True)  # ids of p_t, in retrieval order
    call_status = models.CharField(
        max_length=10, choices=CallStatus.choices, default=CallStatus.DONE
    )
    call_error = models.TextField(blank=True)
    # The revision as streamed so far, while pending; never the answer (emptied at the end).
    partial_answer = models.TextField(blank=True)
    call_started_at = models.DateTimeField(null=True, blank=True)
    rating = models.CharField(max_length=10, choices=Rating.choices, blank=True)
    comment = models.TextField(blank=True)
    # Human labels, where given: Table 10's instruction category and Table 11's error category.
    instruction_category = models.CharField(
        max_length=60, choices=InstructionCategory.choices, blank=True
    )
    error_category = models.CharField(max_length=80, choices=ErrorCategory.choices, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    rated_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)  # instruction shown -> rating stored

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "position"], name="revision_turn_unique_position"
            ),
        ]
        ordering = ["session_id", "position"]

    def __str__(self) -> str:
        return f"turn {self.position} of session {self.session_id}"

    @property
    def edited_answer_limit(self) -> int:
        """The most characters the annotator's edit of this revision may have."""
        return edited_answer_limit(self.answer)

    @property
    def final_answer(self) -> str:
        """The answer this turn leaves: the edit if any, else the model's revision."""
        return self.edited_answer or self.answer


class RerateStatus(models.TextChoices):
    PENDING = "pending", "Waiting"
    DONE = "done", "Rated"


class Rerating(models.Model):
    """A second rating of a finished turn by another annotator (paper §5, "Human")."""

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="reratings")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="revision_reratings"
    )
    status = models.CharField(
        max_length=10, choices=RerateStatus.choices, default=RerateStatus.PENDING
    )
    rating = models.CharField(max_length=10, choices=Rating.choices, blank=True)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField()
    rated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["turn", "annotator"], name="revision_rerating_once_per_annotator"
            )
        ]

    def __str__(self) -> str:
        return f"re-rating of {self.turn}"
