"""Researchers decide who is an expert and who is a crowd worker, in general or per project."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from annotate.crowd.services.review import human_answers_channel_moved, human_answers_locked
from annotate.errors import AnnotatorKindError
from annotate.models import (
    PERSON_KINDS,
    Annotator,
    AnnotatorKind,
    Project,
    ProjectAnnotatorKind,
)
from annotate.selectors.identities import OPERATOR, IdentityScope
from annotate.verbalizer.models import HumanAnswer

SETTABLE_KINDS = [*PERSON_KINDS, AnnotatorKind.UNDECIDED]


def _check_person(annotator: Annotator) -> None:
    if annotator.kind == AnnotatorKind.LLM:  # a judge: named, never a hidden crowd worker
        raise AnnotatorKindError(
            f"{annotator.name} is an LLM judge; only people's kinds can be changed."
        )


@dataclass(frozen=True)
class KindChange:
    """A kind set, and what it did to the person's verbalizer answers."""

    annotator: Annotator
    # Answers that held a place and wait now: their new channel had every place of their
    # prompt taken, so they count in no result until one frees up.
    answers_left_out: int


@transaction.atomic
def annotator_kind_set(*, annotator: Annotator, kind: str, now: datetime) -> KindChange:
    """Set a person's kind: expert, crowd worker, or not decided (labels count nowhere).

    Their verbalizer answers move to the channel of the new kind (in-house for an expert, their
    platform's crowd for a crowd worker: same_channel_q) within its answers per prompt: one
    that would overfill it waits there for a place, and the places they leave go to answers
    waiting for one (human_answers_channel_moved). Return the change with how many answers
    that counted wait now (what the annotators page tells the researcher)."""
    _check_person(annotator)
    if kind not in SETTABLE_KINDS:
        raise AnnotatorKindError(f"kind must be one of {', '.join(SETTABLE_KINDS)}, not {kind!r}.")
    # The person's row first, as each answer of theirs takes it before reading their kind
    # (human_work_answer_submit, link_answer_submit, an MTurk answer's admission): one in
    # flight is waited for, and one that comes after goes by the new kind. Then the rows their
    # answers' channels take turns on, then the answers (human_answers_locked).
    locked = Annotator.objects.select_for_update(no_key=True).filter(pk=annotator.pk).order_by()
    moved = locked.values_list("kind", flat=True).first() != kind
    answers = human_answers_locked(annotator_id=annotator.pk) if moved else []
    annotator.kind = kind
    annotator.kind_changed_at = now
    annotator.save(update_fields=["kind", "kind_changed_at"])
    holding = [answer.pk for answer in answers if not answer.place_released]
    human_answers_channel_moved(answers=answers, kind=kind)
    # Read after the hand-on, which may have given one of them its place back.
    left_out = 0
    if holding:
        left_out = HumanAnswer.objects.filter(pk__in=holding, place_released=True).count()
    return KindChange(annotator=annotator, answers_left_out=left_out)


@transaction.atomic
def annotator_project_kind_set(
    *, project: Project, annotator: Annotator, kind: str, scope: IdentityScope = OPERATOR
) -> ProjectAnnotatorKind | None:
    """Override a person's kind in one project, or remove the override with kind "".

    Reports are per benchmark, so two projects on one benchmark may not give the same annotator
    two different kinds. A refusal names the annotator as `scope` (the viewer's) may see them.
    """
    _check_person(annotator)
    if not kind:
        ProjectAnnotatorKind.objects.filter(project=project, annotator=annotator).delete()
        return None
    if kind not in PERSON_KINDS:
        raise AnnotatorKindError(
            f"a project's kind must be one of {', '.join(PERSON_KINDS)}, not {kind!r}."
        )
    other = (
        ProjectAnnotatorKind.objects.filter(
            annotator=annotator, project__benchmark_id=project.benchmark_id
        )
        .exclude(project=project)
        .exclude(kind=kind)
        .select_related("project")
        .first()
    )
    if other is not None:
        raise AnnotatorKindError(
            f"{scope.name_of(annotator)} is already {other.get_kind_display().lower()} in project "
            f"'{other.project.name}' on the same benchmark; change that project first."
        )
    override, _ = ProjectAnnotatorKind.objects.update_or_create(
        project=project, annotator=annotator, defaults={"kind": kind}
    )
    return override
