"""Reads of the verbalizer pages: the items a set holds per dataset, a set's rendered prompts, and
the crowd review of a human study (each crowd answer with what helps decide on it)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count

from annotate.crowd.models import Publication
from annotate.crowd.platforms import platform_label
from annotate.crowd.selectors import Confirmation, confirmation_of
from annotate.errors import NotFoundError
from annotate.models import Annotator, AnnotatorKind, AssignmentStatus
from annotate.selectors.identities import IdentityScope
from annotate.selectors.results import human_answer_waiting_for_kind_q
from annotate.verbalizer.models import (
    EvaluationSet,
    Group,
    HumanAnswer,
    HumanStudy,
    Mode,
    Prompt,
)
from annotate.verbalizer.services.humans import channel_places_free


@dataclass(frozen=True)
class WaitingForKind:
    """Answers to a set's human studies that count once a researcher decides their people's kind."""

    answers: int
    people: int


def human_answers_waiting_for_kind(*, evaluation_set: EvaluationSet) -> WaitingForKind:
    """Count the set's human answers left out only because their annotator's kind is undecided
    (a new web account), and the people who gave them."""
    totals = HumanAnswer.objects.filter(
        human_answer_waiting_for_kind_q(), study__evaluation_set=evaluation_set
    ).aggregate(answers=Count("id"), people=Count("annotator", distinct=True))
    return WaitingForKind(**totals)


def human_answers_left_out_by_kind(*, annotator: Annotator, kind: str) -> int:
    """Count the person's verbalizer answers that hold a place now and would lose it were
    their kind `kind`: the channel of that kind (same_channel_q) has every place of their
    prompt taken, so they would wait there and count in no result (annotate.crowd.services.
    review.human_answers_channel_moved, which a kind's change runs). One query per answer
    holding a place; a preview only: the change counts again under its locks."""
    if kind == annotator.kind or kind not in (AnnotatorKind.EXPERT, AnnotatorKind.CROWD):
        return 0
    channel = Annotator(kind=kind, platform=annotator.platform)
    holding = (
        HumanAnswer.objects.filter(annotator=annotator, place_released=False)
        .exclude(status=AssignmentStatus.REJECTED)
        .select_related("study")
    )
    # Their own answers are of their kind now, so none of them is counted in the new channel.
    return sum(
        channel_places_free(study=answer.study, prompt_id=answer.prompt_id, channel=channel) <= 0
        for answer in holding
    )


@dataclass(frozen=True)
class ItemsPerDataset:
    """The items a set holds of each dataset beside the number asked: a dataset with fewer
    items than asked gives all it has (annotate.verbalizer.services.sets.sample_items)."""

    asked: int
    used: dict[str, int]  # dataset name -> items in the set, in name order

    @property
    def uniform(self) -> bool:
        return len(set(self.used.values())) <= 1

    @property
    def counts(self) -> str:
        """The count when every dataset gives as many ("12"), else each ("RTE 100, SST-2 12")."""
        if self.uniform:
            return str(next(iter(self.used.values()), 0))
        return ", ".join(f"{name} {n}" for name, n in self.used.items())

    @property
    def asked_note(self) -> str:
        short = any(n != self.asked for n in self.used.values()) or not self.used
        return f" ({self.asked} asked)" if short else ""

    @property
    def sentence(self) -> str:
        """E.g. "12 items per dataset (100 asked)", or when datasets differ "items per dataset:
        RTE 100, SST-2 12 (100 asked)"."""
        if self.uniform:
            return f"{self.counts} items per dataset{self.asked_note}"
        return f"items per dataset: {self.counts}{self.asked_note}"

    def __str__(self) -> str:
        return self.counts + self.asked_note


def items_per_dataset(*, evaluation_sets: Iterable[EvaluationSet]) -> dict[int, ItemsPerDataset]:
    """Return, by set id, the items each set holds per dataset, in one query for all sets."""
    sets = list(evaluation_sets)
    used: dict[int, dict[str, int]] = defaultdict(dict)
    rows = (
        Prompt.objects.filter(evaluation_set__in=sets)
        .values_list("evaluation_set_id", "item__dataset__name")
        .annotate(n=Count("item_id", distinct=True))
        .order_by("evaluation_set_id", "item__dataset__name")
    )
    for set_id, dataset, n in rows:
        used[set_id][dataset] = n
    return {s.pk: ItemsPerDataset(asked=s.items_per_dataset, used=used[s.pk]) for s in sets}


# A set's prompts are filtered by these URL parameters, each matched to one of the set's values.
PROMPT_FILTERS = {
    "dataset": "item__dataset__name",
    "group": "mapping__group",
    "mapping": "mapping__name",
    "mode": "mode",
}


def set_prompt_filter_options(*, evaluation_set: EvaluationSet) -> dict[str, list[tuple[str, str]]]:
    """The values each prompt filter offers for the set, as (value, label): its datasets, the
    groups of its mappings, its mappings (table order) and its modes."""
    mappings = list(evaluation_set.mappings.all())
    groups = {m.group for m in mappings}
    return {
        "dataset": [
            (d, d) for d in evaluation_set.datasets.order_by("name").values_list("name", flat=True)
        ],
        "group": [(g.value, g.label) for g in Group if g.value in groups],
        "mapping": [(m.name, m.name) for m in mappings],
        "mode": [(m.value, m.label) for m in Mode if m.value in evaluation_set.modes],
    }


def set_prompts(*, evaluation_set: EvaluationSet, chosen: dict[str, str]):
    """The set's prompts as models and people read them, those matching every `chosen` filter
    (keys of PROMPT_FILTERS), in item order, then mapping (table order), then mode."""
    lookups = {PROMPT_FILTERS[key]: value for key, value in chosen.items()}
    return (
        Prompt.objects.filter(evaluation_set=evaluation_set, **lookups)
        .select_related("item__dataset", "mapping")
        .order_by(
            "item__dataset__name", "item__position", "mapping__position", "mapping__name", "mode"
        )
    )


def rejected_answers_of(*, annotator: Annotator, limit: int = 20) -> list[HumanAnswer]:
    """The person's own rejected answers, newest first, with the study each is in: their
    'Label-word tasks' page lists them with the reason an admin gave (reject_reason), the one
    place a web account reads why. Only `annotator`'s: no one else's reason is read here."""
    return list(
        HumanAnswer.objects.filter(annotator=annotator, status=AssignmentStatus.REJECTED)
        .select_related("study")
        .order_by("-created_at", "-pk")[:limit]
    )


def study_publication_get(*, publication_id: int) -> Publication:
    publication = (
        Publication.objects.select_related("human_study__evaluation_set")
        .filter(pk=publication_id, human_study__isnull=False)
        .first()
    )
    if publication is None:
        raise NotFoundError("No such publication of a human study.")
    return publication


@dataclass(frozen=True)
class AnswerReviewRow:
    answer: HumanAnswer
    worker: Annotator
    correct: bool
    worker_correct: int  # the worker's answers in this publication that match the golden label
    worker_total: int
    blocked: bool
    platform_status: str
    confirmation: str

    @property
    def approvable(self) -> bool:
        """Submitted and confirmed (or needing no confirmation), of a worker not blocked: what
        the page's "approve together" offers (review.human_answers_approve). A blocked
        worker's answer is left to its own Approve button."""
        confirmed = self.confirmation in (Confirmation.CONFIRMED, Confirmation.NOT_NEEDED)
        return self.answer.status == AssignmentStatus.SUBMITTED and confirmed and not self.blocked


def study_review_rows(*, publication: Publication) -> list[AnswerReviewRow]:
    """The publication's crowd answers, oldest first; a worker's agreement with the golden
    labels (under the study's mappings) hints at who answered at random."""
    answers = list(
        HumanAnswer.objects.filter(
            study_id=publication.human_study_id,
            annotator__platform=publication.platform,
        )
        .select_related("annotator__block", "prompt__item__dataset", "prompt__mapping")
        .select_related("platform_record")
        .prefetch_related("bonuses")
        .order_by("created_at", "id")
    )
    tally: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for answer in answers:
        tally[answer.annotator_id][0] += answer.word == answer.prompt.expected_word
        tally[answer.annotator_id][1] += 1
    synced = dict(publication.hits.exclude(hit_id="").values_list("hit_id", "synced_at"))
    rows = []
    for answer in answers:
        block = getattr(answer.annotator, "block", None)
        record = getattr(answer, "platform_record", None)
        rows.append(
            AnswerReviewRow(
                answer=answer,
                worker=answer.annotator,
                correct=answer.word == answer.prompt.expected_word,
                worker_correct=tally[answer.annotator_id][0],
                worker_total=tally[answer.annotator_id][1],
                blocked=bool(block and block.active),
                platform_status=record.status if record else "",
                confirmation=confirmation_of(
                    assignment=answer, synced_at=synced.get(answer.platform_hit_id)
                ),
            )
        )
    return rows


# --- A human study's progress (its researcher page) ---------------------------------------

IN_HOUSE = ""  # the in-house channel's key; a crowd channel's is its platform's name


@dataclass(frozen=True)
class ChannelProgress:
    """One channel's progress: each channel (in-house, each crowd platform) is offered every
    prompt until `answers_per_prompt` of its answers that hold a place (not rejected, not
    released by a sync) were given (annotate.verbalizer.services.humans.same_channel_q)."""

    key: str
    answers: int  # towards `wanted`: at most answers_per_prompt per prompt
    wanted: int
    prompts_done: int  # prompts with all the answers this channel wants
    prompts: int

    @property
    def label(self) -> str:
        return "In-house" if self.key == IN_HOUSE else platform_label(self.key)


@dataclass(frozen=True)
class StudyAnnotatorRow:
    name: str  # as the viewer may see it: a hidden crowd worker's pseudonym
    channel: str | None  # IN_HOUSE, a platform, or None: their answers fill no channel
    answers: int
    rejected: int
    blocked: bool = False  # a blocked crowd worker: their answers hold no place, count nowhere


@dataclass(frozen=True)
class StudyProgress:
    channels: list[ChannelProgress]
    groups: list[tuple[str, str, int]]  # (group, label, answers that fill a channel)
    answers: int  # every answer, counted or not
    outside: int  # answers that fill no channel: rejected, released, or of an undecided account
    counts: dict[int, dict[str, int]]  # prompt id -> channel -> answers that fill it
    prompt_ids: list[int]  # the study's prompts in reading order
    needing: list[int]  # those a channel still wants answers for, in the same order
    annotators: list[StudyAnnotatorRow]  # most answers first, at most ANNOTATORS_SHOWN
    annotators_total: int


ANNOTATORS_SHOWN = 200


def _channel_of(kind: str, platform: str, status: str, released: bool) -> str | None:
    """The channel an answer fills (as same_channel_q counts it), None for none: a rejected
    answer and one whose place a sync or its worker's block released (`place_released`) fill
    none."""
    if status == AssignmentStatus.REJECTED or released:
        return None
    if kind == AnnotatorKind.EXPERT:
        return IN_HOUSE
    if kind == AnnotatorKind.CROWD:
        return platform
    return None


def human_study_progress(
    *, study: HumanStudy, platforms: Iterable[str], scope: IdentityScope
) -> StudyProgress:
    """Return the study's progress per channel (in-house, each of `platforms` it is published
    on, any other platform its answers came from) and per mapping group, each prompt's answers
    and the annotators who answered (named as `scope` lets its viewer see them), in two queries
    whatever the study's size: its answers with their prompt's group and annotator, and its
    prompts' ids in reading order."""
    platforms = set(platforms)
    # One row per answer (a person answers a prompt of a study once), counted by channel here.
    rows = list(
        HumanAnswer.objects.filter(study=study)
        .values_list(
            "prompt_id", "prompt__mapping__group", "annotator_id", "annotator__name",
            "annotator__worker_id", "annotator__kind", "annotator__platform", "status",
            "place_released", "annotator__block__active",
        )
        .order_by()
    )  # fmt: skip
    prompt_ids = list(
        Prompt.objects.filter(human_studies=study)
        .order_by(
            "item__dataset__name", "item__position", "mapping__position", "mapping__name", "mode"
        )  # fmt: skip
        .values_list("id", flat=True)
    )
    counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    groups: dict[str, int] = defaultdict(int)
    people: dict[int, list] = {}
    outside = 0
    for row in rows:
        prompt_id, group, annotator_id, name, worker_id, kind, platform, status, released = row[:9]
        channel = _channel_of(kind, platform, status, released)
        person = people.setdefault(
            annotator_id,
            [scope.name(annotator_id=annotator_id, name=name, worker_id=worker_id),
             _channel_of(kind, platform, "", False), 0, 0, bool(row[9])],
        )  # fmt: skip
        person[2] += 1
        person[3] += status == AssignmentStatus.REJECTED
        if channel is None:
            outside += 1
            continue
        counts[prompt_id][channel] += 1
        groups[group] += 1
        if channel != IN_HOUSE:
            platforms.add(channel)
    keys = [IN_HOUSE, *sorted(platforms)]
    wanted = study.answers_per_prompt
    channels = [
        ChannelProgress(
            key=key,
            answers=sum(min(counts[p][key], wanted) for p in prompt_ids if p in counts),
            wanted=wanted * len(prompt_ids),
            prompts_done=sum(1 for p in prompt_ids if p in counts and counts[p][key] >= wanted),
            prompts=len(prompt_ids),
        )
        for key in keys
    ]
    needing = [p for p in prompt_ids if any(counts.get(p, {}).get(k, 0) < wanted for k in keys)]
    annotators = sorted(
        (StudyAnnotatorRow(*person) for person in people.values()),
        key=lambda row: (-row.answers, row.name),
    )
    return StudyProgress(
        channels=channels,
        groups=[(g.value, g.label, groups[g.value]) for g in Group],
        answers=len(rows),
        outside=outside,
        counts={p: dict(c) for p, c in counts.items()},
        prompt_ids=prompt_ids,
        needing=needing,
        annotators=annotators[:ANNOTATORS_SHOWN],
        annotators_total=len(annotators),
    )


def study_prompts_by_id(*, prompt_ids: list[int]) -> list[Prompt]:
    """The prompts of those ids, in that order, with their item's dataset and mapping; one query."""
    found = Prompt.objects.filter(pk__in=prompt_ids).select_related("item__dataset", "mapping")
    by_id = {prompt.pk: prompt for prompt in found}
    return [by_id[pk] for pk in prompt_ids if pk in by_id]
