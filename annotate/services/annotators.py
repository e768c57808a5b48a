"""Researchers decide who is an expert and who is a crowd worker, in general or per project."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from annotate.errors import AnnotatorKindError
from annotate.models import (
    PERSON_KINDS,
    Annotator,
    AnnotatorKind,
    Project,
    ProjectAnnotatorKind,
)
from annotate.selectors.identities import OPERATOR, IdentityScope

SETTABLE_KINDS = [*PERSON_KINDS, AnnotatorKind.UNDECIDED]


def _check_person(annotator: Annotator) -> None:
    if annotator.kind == AnnotatorKind.LLM:  # a judge: named, never a hidden crowd worker
        raise AnnotatorKindError(
            f"{annotator.name} is an LLM judge; only people's kinds can be changed."
        )


@transaction.atomic
def annotator_kind_set(*, annotator: Annotator, kind: str, now: datetime) -> Annotator:
    """Set a person's kind: expert, crowd worker, or not decided (labels count nowhere)."""
    _check_person(annotator)
    if kind not in SETTABLE_KINDS:
        raise AnnotatorKindError(f"kind must be one of {', '.join(SETTABLE_KINDS)}, not {kind!r}.")
    annotator.kind = kind
    annotator.kind_changed_at = now
    annotator.save(update_fields=["kind", "kind_changed_at"])
    return annotator


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
