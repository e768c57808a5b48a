"""The human baseline: a slice of a set's prompts offered to people, answered with key 1 or 2.

Key 1 is the word the instruction names first (the word for the positive golden label), key 2
the other; the person reads exactly the prompt a model reads. Each person answers a prompt once;
a prompt is offered until `answers_per_prompt` people answered it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, connection, transaction
from django.db.models import Q

from annotate.compiled import CompiledQuery, prepared_cursor
from annotate.errors import ConflictError, FieldInputError, NotFoundError
from annotate.models import Annotator, AnnotatorKind, AssignmentStatus
from annotate.services.assignments import annotator_locked_unblocked
from annotate.verbalizer.models import EvaluationSet, HumanAnswer, HumanStudy, Prompt

MAX_SECONDS = 24 * 3600
# How long after answering an in-house annotator may still change that answer (a slip of the
# key, seen on the next prompt's page); answering their next prompt in the study ends it sooner.
CHANGE_WINDOW = timedelta(minutes=5)


class HumanStudyError(FieldInputError):
    """A study cannot be created, or an answer taken, as asked."""


@transaction.atomic
def human_study_create(
    *,
    evaluation_set: EvaluationSet,
    name: str,
    datasets: list[str] | None = None,
    mappings: list[str] | None = None,
    modes: list[str] | None = None,
    items_per_dataset: int | None = None,
    answers_per_prompt: int = 3,
    completion_url: str = "",
    completion_code: str = "",
    created_by=None,
) -> HumanStudy:
    """Offer the prompts of `evaluation_set` that match the filters (all when None) to people."""
    if HumanStudy.objects.filter(name=name).exists():
        raise HumanStudyError(f"a study named {name!r} exists already", field="name")
    if not 1 <= answers_per_prompt <= 50:
        raise HumanStudyError("answers per prompt: between 1 and 50", field="answers_per_prompt")
    _completion_check(completion_url=completion_url, completion_code=completion_code)
    _slice_check(evaluation_set, datasets=datasets, mappings=mappings, modes=modes)
    if items_per_dataset is not None and items_per_dataset < 1:
        raise HumanStudyError("items per dataset: at least 1", field="items_per_dataset")
    prompts = Prompt.objects.filter(evaluation_set=evaluation_set)
    if datasets:
        prompts = prompts.filter(item__dataset__name__in=datasets)
    if mappings:
        prompts = prompts.filter(mapping__name__in=mappings)
    prompts = prompts.filter(mode__in=modes or ["direct"])
    chosen = _first_items(
        prompts.order_by("item__dataset__name", "item_id", "id"), items_per_dataset
    )
    if not chosen:
        raise HumanStudyError("no prompt of the set matches these datasets, mappings and modes")
    study = HumanStudy.objects.create(
        name=name, evaluation_set=evaluation_set, answers_per_prompt=answers_per_prompt,
        completion_url=completion_url, completion_code=completion_code, created_by=created_by,
    )  # fmt: skip
    study.prompts.set(chosen)
    return study


def _slice_check(
    evaluation_set: EvaluationSet,
    *,
    datasets: list[str] | None,
    mappings: list[str] | None,
    modes: list[str] | None,
) -> None:
    """Name a dataset, mapping or mode the set does not hold: "no prompt matches" left the
    researcher to guess which of the three was wrong (a typo, or a mapping left out of the set)."""
    held = {
        "datasets": list(evaluation_set.datasets.order_by("name").values_list("name", flat=True)),
        "mappings": list(evaluation_set.mappings.values_list("name", flat=True)),
        "modes": list(evaluation_set.modes),
    }
    for field, chosen in (("datasets", datasets), ("mappings", mappings), ("modes", modes)):
        unknown = [name for name in chosen or [] if name not in held[field]]
        if unknown:
            raise HumanStudyError(
                f"{field}: the set {evaluation_set.name!r} has no "
                f"{', '.join(repr(n) for n in unknown)}; it has {', '.join(held[field])}",
                field=field,
            )


def _completion_check(*, completion_url: str, completion_code: str) -> None:
    if len(completion_code) > 100:
        raise HumanStudyError("completion code: at most 100 characters", field="completion_code")
    if completion_url:
        try:
            URLValidator(schemes=["http", "https"])(completion_url)
        except ValidationError:
            raise HumanStudyError(
                f"completion URL: {completion_url!r} is not an http(s) address",
                field="completion_url",
            ) from None


def _first_items(prompts, items_per_dataset: int | None) -> list[int]:
    """Keep the prompts of the first `items_per_dataset` sampled items of each dataset."""
    kept, seen = [], {}
    for prompt_id, item_id, dataset in prompts.values_list("id", "item_id", "item__dataset_id"):
        items = seen.setdefault(dataset, [])
        if item_id not in items:
            if items_per_dataset is not None and len(items) >= items_per_dataset:
                continue
            items.append(item_id)
        kept.append(prompt_id)
    return kept


def same_channel_q(annotator: Annotator, prefix: str = "") -> Q:
    """Answers given the way `annotator` gives them: in-house, or on the same crowd platform.

    Each channel gets `answers_per_prompt` answers per prompt, so the crowd never starves the
    in-house baseline and the other way round; rejected answers leave room for a new one, and
    so do those of an account whose kind no researcher has decided yet (they count in no
    result, annotate.selectors.results): the in-house channel counts experts' answers. So do
    answers whose place a sync released (`place_released`: the platform's whole listing of
    their HIT did not have them once their hand-back was due, a forged assignment id say)
    until a sync confirms them, and those of a blocked worker (the block marks them so, as it
    frees a batch's slots; the unblock gives each its place back only if its prompt still has
    one free, and one left out takes the next place that frees: annotate.crowd.services.review.
    worker_block, worker_unblock, _answer_place_handed_on). The one count of a prompt's places: the replacements plan,
    the per-prompt limit, and as the same columns the next prompt's choice (_WORK_NEXT) and
    the study page (annotate.verbalizer.selectors._channel_of) read it.
    """
    holds_place = ~Q(**{f"{prefix}status": AssignmentStatus.REJECTED}) & Q(
        **{f"{prefix}place_released": False}
    )
    if annotator.kind == AnnotatorKind.CROWD:
        return holds_place & Q(
            **{
                f"{prefix}annotator__kind": AnnotatorKind.CROWD,
                f"{prefix}annotator__platform": annotator.platform,
            }
        )
    return holds_place & Q(**{f"{prefix}annotator__kind": AnnotatorKind.EXPERT})


def channel_places_free(
    *, study: HumanStudy, prompt_id: int, channel: Annotator, exclude_id: int | None = None
) -> int:
    """How many of the prompt's places in the study `channel`'s answers (same_channel_q: the
    channel `channel`, an annotator, answers in) leave free, not counting the answer
    `exclude_id`; 0 or less when full. The one count of a prompt's places in a channel that
    the per-prompt limit, an answer on a HIT of a worker counted as an expert, a place handed
    on and a kind's change read; the caller holds the lock its channel's answers take turns
    on (in-house: the study's row)."""
    taken = HumanAnswer.objects.filter(same_channel_q(channel), study=study, prompt_id=prompt_id)
    if exclude_id is not None:
        taken = taken.exclude(pk=exclude_id)
    return study.answers_per_prompt - taken.count()


def human_work_next(*, study: HumanStudy, annotator: Annotator) -> tuple[Prompt | None, int, int]:
    """Return the annotator's next prompt (one they have not answered, least answered first,
    counting the answers of their channel, `same_channel_q`), their answers so far and the
    study's prompts, in two queries: the page an annotator sees after every answer.

    The least answered prompt comes first, always: the study's places fill evenly, so a study
    closed early compares the verbalizers on the same items. Among the prompts equally
    answered, each annotator goes through the study in rounds (`_WORK_NEXT`): a round holds one
    prompt of every item, so an item's prompts (its verbalizers and modes) are a round apart,
    not side by side, where the second would be answered primed by the first (the human
    baseline's carry-over); then the person's own order of the items (`_order_params`), the
    same in every round and on every reload; which of an item's prompts a round holds turns by
    the same order, so people meet an item under different verbalizers first. A person whose
    prompts all have the same count of answers (answering alone, or after everyone else
    finished) meets an item's next prompt N prompts later in a study of N items under M
    mappings, the most the study allows; where others' answers make the counts uneven, the
    even filling comes first and two prompts of one item can come closer, even side by side.

    The choice and both counts are one plain-SQL query (the ORM's exclude-and-count queryset
    cost more CPU to compile than the page's template to render); the prompt is then read by
    its id alone (the pages show its own fields only: text, words, id), a query compiled once
    (annotate.compiled). The SQL counts a prompt's answers as `same_channel_q` does.
    """
    prompt_id, done, total, _ = _work_next_row(study=study, annotator=annotator)
    prompt = None
    if prompt_id is not None:
        prompt = _PROMPT.first(prompt_id=prompt_id)
    return prompt, done, total


def human_work_page(
    *, study: HumanStudy, annotator: Annotator, now: datetime
) -> tuple[Prompt | None, int, int, AnswerChange | None]:
    """Return human_work_next's prompt and counts, and the change the annotator may still make
    to their last answer in the study (human_answer_change_offer), or None: the study's page
    offers it wherever it is shown within CHANGE_WINDOW of that answer (right after it, back
    from the task list, after a new login). The same one query tells whether they answered
    in the window; only then is the answer read (the page of someone who has not answered
    lately costs nothing more)."""
    since = now - CHANGE_WINDOW
    prompt_id, done, total, recent = _work_next_row(study=study, annotator=annotator, since=since)
    prompt = _PROMPT.first(prompt_id=prompt_id) if prompt_id is not None else None
    change = None
    if recent is not None:
        change = human_answer_change_offer(study=study, annotator=annotator, now=now)
    return prompt, done, total, change


def _work_next_row(
    *, study: HumanStudy, annotator: Annotator, since: datetime | None = None
) -> tuple[int | None, int, int, int | None]:
    """Return the id of the annotator's next prompt (None: nothing left for them), their
    answers so far, the study's prompts and, with `since`, the id of their last answer in the
    study given since then (None: none, or `since` not asked), in one query (_WORK_NEXT)."""
    limit = study.answers_per_prompt if study.active else 0
    if annotator.kind == AnnotatorKind.CROWD:
        channel, channel_params = (
            "na.kind = %s AND na.platform = %s",
            [
                AnnotatorKind.CROWD,
                annotator.platform,
            ],
        )
    else:
        channel, channel_params = "na.kind = %s", [AnnotatorKind.EXPERT]
    k, o = _order_params(annotator.pk)
    params = [
        *[study.pk, AssignmentStatus.REJECTED, *channel_params, o, o, k, o, study.pk],
        *[annotator.pk, limit, study.pk, annotator.pk, study.pk],
    ]
    recent = "NULL"
    if since is not None:
        recent = _RECENT_ANSWER
        params += [study.pk, annotator.pk, connection.ops.adapt_datetimefield_value(since)]
    sql = _WORK_NEXT.format(channel=channel, modulus=_ORDER_MODULUS, recent=recent)
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


# The answering page's reads, each compiled once per process (annotate.compiled): compiling
# these querysets on every view cost the page more CPU than PostgreSQL spent running them.
# One row each (by primary key), so no ordering.
_PROMPT = CompiledQuery(
    Prompt, lambda prompt_id: Prompt.objects.filter(pk=prompt_id).order_by(), "prompt_id"
)
_ACTIVE_STUDY = CompiledQuery(
    HumanStudy,
    lambda study_id: HumanStudy.objects.filter(pk=study_id, active=True).order_by(),
    "study_id",
)


def human_study_open_set(*, study: HumanStudy, active: bool) -> HumanStudy:
    """Close a study to annotators (it leaves their lists and takes no new answer; the answers
    given stay, and count in the report as before) or open it again. A study on a crowd
    platform is not closed here: a worker holding one of its HITs could no longer answer it."""
    if not active and study.publications.exists():
        raise ConflictError(
            f"Study '{study.name}' is published to a crowd platform: workers holding its HITs "
            "could no longer answer, so it is not closed here (close its link or expire its "
            "HITs on its publication page)."
        )
    study.active = active
    study.save(update_fields=["active"])
    return study


def human_study_active(*, human_study_id: int) -> HumanStudy | None:
    """Return the active human study of that id, or None."""
    return _ACTIVE_STUDY.first(study_id=human_study_id)


# A prime above any item id this app will hold. y = (id * k + o) mod it alone would keep the
# ids' differences (neighbouring items would stay k apart, in the same order for everyone);
# squaring twice, ((y * y + o) mod p)^2 mod p, mixes them as a random order would. Every factor
# is below the prime (the id taken modulo it first), so every product stays below 2^63,
# SQLite's and PostgreSQL's bigint.
_ORDER_MODULUS = 2_147_483_647


def _order_params(annotator_id: int) -> tuple[int, int]:
    """The annotator's (k, o) for their order of the study's items (_WORK_NEXT): fixed per
    annotator (a reload shows the same prompt), unrelated between annotators (Knuth's
    multiplicative hash of the id; k never 0)."""
    mixed = (annotator_id * 2_654_435_761) % _ORDER_MODULUS
    return 1 + mixed % (_ORDER_MODULUS - 1), (annotator_id * 40_503 + 12_345) % _ORDER_MODULUS


# HumanStudy.prompts' table, Prompt's, HumanAnswer's and Annotator's (no db_table or db_column
# of their own). `turn` is an item's place in the annotator's order (y, mixed as above: the
# order is the items', so it is the same in every round); `variant` a prompt's place among its
# item's prompts in the study (by id) and `variants` their number, counted before the
# annotator's own answers are left out, so a prompt's round never moves as they answer. A
# prompt's answers count in its own study only, and only those of the asking annotator's
# channel that were not rejected and hold their place (not place_released), as same_channel_q
# counts them ({channel} is one of two fixed conditions). A prompt the annotator answered in
# any study (two studies of a set may share prompts) is not offered again: reports read one
# answer per person and prompt (annotate.selectors.results.counted_human_answers).
_WORK_NEXT = """SELECT
    (SELECT c.prompt_id FROM (
        SELECT t.prompt_id, t.item_id, t.turn, (t.variant + t.turn) %% t.variants AS round, (
            SELECT count(*) FROM verbalizer_humananswer n
            JOIN annotate_annotator na ON na.id = n.annotator_id
            WHERE n.prompt_id = t.prompt_id AND n.study_id = %s AND n.status <> %s
            AND NOT n.place_released AND {channel}) AS answered
        FROM (
            SELECT m.prompt_id, m.item_id,
                ((m.y * m.y + CAST(%s AS BIGINT)) %% {modulus})
                    * ((m.y * m.y + CAST(%s AS BIGINT)) %% {modulus}) %% {modulus} AS turn,
                ROW_NUMBER() OVER (PARTITION BY m.item_id ORDER BY m.prompt_id) - 1 AS variant,
                COUNT(*) OVER (PARTITION BY m.item_id) AS variants
            FROM (
                SELECT sp.prompt_id, p.item_id,
                    ((p.item_id %% {modulus}) * CAST(%s AS BIGINT) + CAST(%s AS BIGINT))
                        %% {modulus} AS y
                FROM verbalizer_humanstudy_prompts sp
                JOIN verbalizer_prompt p ON p.id = sp.prompt_id
                WHERE sp.humanstudy_id = %s
            ) m
        ) t
        WHERE NOT EXISTS(
            SELECT 1 FROM verbalizer_humananswer mine WHERE mine.prompt_id = t.prompt_id
            AND mine.annotator_id = %s)
        ) c WHERE c.answered < %s
        ORDER BY c.answered, c.round, c.turn, c.item_id, c.prompt_id LIMIT 1),
    (SELECT count(*) FROM verbalizer_humananswer WHERE study_id = %s AND annotator_id = %s),
    (SELECT count(*) FROM verbalizer_humanstudy_prompts WHERE humanstudy_id = %s),
    {recent}"""
# The annotator's last answer in the study if given since the time passed (human_work_page).
_RECENT_ANSWER = """(SELECT max(id) FROM verbalizer_humananswer
    WHERE study_id = %s AND annotator_id = %s AND created_at >= %s)"""


def human_answer_submit(
    *, study: HumanStudy, prompt_id: int, annotator: Annotator, key: int, seconds: float | None
) -> HumanAnswer:
    """Store the annotator's answer (key 1 or 2) to a prompt of the study, once."""
    prompt = study.prompts.filter(pk=prompt_id).first()
    if prompt is None or not study.active:
        raise NotFoundError("No such prompt in this study.")
    if key not in (1, 2):
        raise HumanStudyError("key: answer with 1 or 2")
    if seconds is not None and not 0 <= seconds <= MAX_SECONDS:
        raise HumanStudyError(f"seconds: between 0 and {MAX_SECONDS}")
    word = prompt.positive_word if key == 1 else prompt.negative_word
    try:
        with transaction.atomic():
            return HumanAnswer.objects.create(
                study=study, prompt=prompt, annotator=annotator, word=word, seconds=seconds
            )
    except IntegrityError:
        earlier = HumanAnswer.objects.get(study=study, prompt=prompt, annotator=annotator)
        if earlier.word != word:
            raise ConflictError("You answered this item already; answers cannot change.") from None
        return earlier


def human_work_answer_submit(
    *, study: HumanStudy, prompt_id: int, annotator: Annotator, key: int, seconds: float | None
) -> HumanAnswer:
    """Store an in-house annotator's answer (the answering page), never past the study's
    answers per prompt of their channel: the page stops offering a full prompt, and an answer
    posted to one anyway is refused (ConflictError), as a self-hosted participant's is."""
    with transaction.atomic():
        # The person's row first (as a self-hosted participant's answer takes it): their
        # answers to one prompt in two studies of a set, posted at once from two tabs, take
        # turns, so the second sees the first and is refused. Then the study's, so two answers
        # racing for a prompt's last place take turns. The row read under its lock: a kind
        # decided meanwhile (annotator_kind_set holds the row) is the one whose channel counts.
        # A blocked account is refused after the lock, as a blocked participant's answer is
        # (link_answer_submit): read before it, a block committing meanwhile is missed.
        annotator = annotator_locked_unblocked(annotator)
        HumanStudy.objects.select_for_update().filter(pk=study.pk).first()
        return human_answer_submit_within_limit(
            study=study, prompt_id=prompt_id, annotator=annotator, key=key, seconds=seconds
        )


def human_answer_submit_within_limit(
    *, study: HumanStudy, prompt_id: int, annotator: Annotator, key: int, seconds: float | None
) -> HumanAnswer:
    """Store the answer unless the prompt already has the study's answers per prompt from the
    annotator's channel (in-house, or crowd) without them, or the annotator answered it in
    another study of its set (ConflictError: reports read one answer per person and prompt); an
    answer of theirs is stored again as before. The caller holds the lock its channel's answers
    take turns on."""
    answered_in = set(
        HumanAnswer.objects.filter(prompt_id=prompt_id, annotator=annotator).values_list(
            "study_id", flat=True
        )
    )
    mine = study.pk in answered_in
    if answered_in and not mine:
        # The other study is not named: crowd participants see this, and a study's name is the
        # researchers' own (it may say what the study manipulates).
        raise ConflictError(
            "You answered this item in another study already; each person answers an item once."
        )
    if not mine and channel_places_free(study=study, prompt_id=prompt_id, channel=annotator) <= 0:
        raise ConflictError("This item has all the answers it needs; go on to the next one.")
    return human_answer_submit(
        study=study, prompt_id=prompt_id, annotator=annotator, key=key, seconds=seconds
    )


@dataclass(frozen=True)
class AnswerChange:
    """What the next prompt's page offers: the last answer, and the key and word it changes to."""

    answer: HumanAnswer
    key: int
    word: str


def human_answer_change_offer(
    *, study: HumanStudy, annotator: Annotator, now: datetime
) -> AnswerChange | None:
    """Return the change the annotator may still make to their last answer in the study (the
    one human_answer_change would take), or None: no answer, too late, changed already. Asked
    on every showing of the study's page, not only right after the answer: back from the task
    list, or logged in again, the 5 minutes may not be over."""
    answer = (
        HumanAnswer.objects.filter(study=study, annotator=annotator)
        .select_related("prompt")
        .order_by("-id")
        .first()
    )
    if answer is None:
        return None
    if _change_refusal(answer, study=study, annotator=annotator, now=now, known_last=True):
        return None
    prompt = answer.prompt
    if answer.word == prompt.positive_word:
        return AnswerChange(answer=answer, key=2, word=prompt.negative_word)
    return AnswerChange(answer=answer, key=1, word=prompt.positive_word)


@transaction.atomic
def human_answer_change(
    *, study: HumanStudy, annotator: Annotator, prompt_id: int, key: int, now: datetime
) -> HumanAnswer:
    """Change an in-house annotator's last answer in the study to the word of `key`, once,
    within CHANGE_WINDOW of answering and before they answer the next prompt, while the study
    is open; the first word and the time of the change are kept (`changed_from`, `changed_at`)
    and `seconds` stays the time to the first answer. Any other change is refused
    (ConflictError): an older answer, another's (NotFoundError: not theirs), a crowd worker's
    (part of a submitted HIT), and a blocked person's (WorkerBlockedError), as their new
    answer is. The same word again changes nothing."""
    if key not in (1, 2):
        raise HumanStudyError("key: answer with 1 or 2")
    # The person's row first, then the study's, in the order of their next answer
    # (human_work_answer_submit): the block is read under the lock a block takes, so a change
    # is refused once it committed (the answer counts again after an unblock, changed), and
    # the next answer and a change take turns, so "the last answer" is the last one.
    annotator = annotator_locked_unblocked(annotator)
    study = HumanStudy.objects.select_for_update().get(pk=study.pk)
    answer = (
        HumanAnswer.objects.select_for_update(of=("self",))
        .select_related("prompt")
        .filter(study=study, annotator=annotator, prompt_id=prompt_id)
        .first()
    )
    if answer is None:
        raise NotFoundError("You have no answer to this prompt in this study.")
    word = answer.prompt.positive_word if key == 1 else answer.prompt.negative_word
    if word == answer.word:
        return answer  # nothing to change: the same change posted twice, say
    refusal = _change_refusal(answer, study=study, annotator=annotator, now=now)
    if refusal:
        raise ConflictError(refusal)
    answer.changed_from, answer.word, answer.changed_at = answer.word, word, now
    answer.save(update_fields=["changed_from", "word", "changed_at"])
    return answer


def _change_refusal(
    answer: HumanAnswer,
    *,
    study: HumanStudy,
    annotator: Annotator,
    now: datetime,
    known_last: bool = False,
) -> str:
    """Why the answer may not change now ("" when it may), human_answer_change's rule.
    `known_last`: the caller read it as the annotator's last answer (no query to ask again)."""
    minutes = int(CHANGE_WINDOW.total_seconds() // 60)
    if annotator.kind == AnnotatorKind.CROWD or answer.platform_assignment_id:
        return "Answers given on a crowd platform are part of a submitted HIT; they cannot change."
    if not study.active:
        return "This study is closed: its answers cannot change."
    if answer.changed_at is not None:
        return "You changed this answer already; answers change once."
    if answer.status != AssignmentStatus.SUBMITTED:
        return "This answer was reviewed already; it cannot change."
    later = HumanAnswer.objects.filter(study=study, annotator=annotator, pk__gt=answer.pk)
    if not known_last and later.exists():
        return "You answered a later prompt since: only your last answer can change."
    if now - answer.created_at > CHANGE_WINDOW:
        return f"Answers can change for {minutes} minutes after they are given; this one cannot."
    return ""


@dataclass(frozen=True)
class HumanProgress:
    done: int  # the annotator's answers
    total: int  # the study's prompts
    left: bool  # a prompt is still offered to them (human_work_next would show one)


def human_progress(*, study: HumanStudy, annotator: Annotator) -> HumanProgress:
    """Return the annotator's progress in the study and whether anything is left for them: a
    study whose prompts all have their answers from others has nothing, though they gave none."""
    prompt_id, done, total, _ = _work_next_row(study=study, annotator=annotator)
    return HumanProgress(done=done, total=total, left=prompt_id is not None)


def human_work_list(*, annotator: Annotator) -> list[tuple[HumanStudy, HumanProgress]]:
    """Return every active human study with the annotator's progress in it, newest first (the
    task list, and where a finished study's page points next)."""
    studies = HumanStudy.objects.filter(active=True)
    return [(study, human_progress(study=study, annotator=annotator)) for study in studies]
