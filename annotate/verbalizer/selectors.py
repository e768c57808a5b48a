"""Reads of the verbalizer pages: the items a set holds per dataset, a set's rendered prompts, and
the crowd review of a human study (each crowd answer with what helps decide on it)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count

from annotate.crowd.models import Publication
from annotate.crowd.selectors import confirmation_of
from annotate.errors import NotFoundError
from annotate.models import Annotator
from annotate.selectors.results import human_answer_waiting_for_kind_q
from annotate.verbalizer.models import EvaluationSet, Group, HumanAnswer, Mode, Prompt


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
