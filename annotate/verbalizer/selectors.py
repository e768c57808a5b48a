"""Reads for the crowd review of a human study: each crowd answer with what helps decide on it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from annotate.crowd.models import Publication
from annotate.crowd.selectors import confirmation_of
from annotate.errors import NotFoundError
from annotate.models import Annotator, AnnotatorKind
from annotate.verbalizer.models import HumanAnswer


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
            annotator__kind=AnnotatorKind.CROWD,
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
