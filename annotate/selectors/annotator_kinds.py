"""Which kind each annotator counts as in one benchmark's results.

An annotator's own kind applies unless a project on the benchmark overrides it. Labels of an
annotator whose kind is not decided (a new web account) count nowhere: not in reports, majorities,
agreement or exports.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from django.db import connection
from django.db.models import Count, Q, QuerySet
from django.db.models.functions import Collate

from annotate.models import DECIDED_KIND_VALUES, Annotator, ProjectAnnotatorKind
from annotate.selectors.fingerprints import stamps_sum


def annotator_kinds_effective(
    *, benchmark_id: int, annotator_ids: Iterable[int] | None = None
) -> dict[int, str]:
    """Return {annotator id: kind} in the benchmark, project overrides applied (two queries).

    With `annotator_ids` only those annotators are read. A benchmark whose projects give one
    annotator two different kinds cannot happen: annotator_project_kind_set refuses it.
    """
    annotators = Annotator.objects.order_by()
    if annotator_ids is not None:
        annotators = annotators.filter(pk__in=list(annotator_ids))
    kinds = dict(annotators.values_list("id", "kind"))
    overrides = ProjectAnnotatorKind.objects.filter(project__benchmark_id=benchmark_id).order_by()
    for annotator_id, kind in overrides.values_list("annotator_id", "kind"):
        if annotator_id in kinds:
            kinds[annotator_id] = kind
    return kinds


def annotators_counted(*, benchmark_id: int, annotator_ids: Iterable[int]) -> dict[int, str]:
    """Return {annotator id: kind} of those annotators whose labels count in the benchmark."""
    kinds = annotator_kinds_effective(benchmark_id=benchmark_id, annotator_ids=annotator_ids)
    return {pk: kind for pk, kind in kinds.items() if kind in DECIDED_KIND_VALUES}


def users_of_decided_kind() -> QuerySet:
    """Ids of the accounts whose own kind is decided (a subquery, evaluated where it is used).

    For work that belongs to no benchmark (KIWI revision sessions and re-ratings, done by an
    account rather than an Annotator), so no project's kind can apply: the account's own kind
    counts, under the same rule as `annotators_counted`. An account that never worked on
    labels has no Annotator yet and is not decided either.
    """
    return (
        Annotator.objects.filter(user__isnull=False, kind__in=DECIDED_KIND_VALUES)
        .order_by()
        .values("user_id")
    )


def kind_stamps() -> tuple:
    """Return what any kind decision moves: how many kinds were set, and the sum of their
    stamps (annotate.services.annotators stamps kind_changed_at each time)."""
    # Every stamp counted and summed, not the latest: a host whose clock is behind can stamp a
    # kind decided after another with an earlier time, and the maximum would not move.
    return tuple(
        Annotator.objects.aggregate(
            n=Count("kind_changed_at"), stamps=stamps_sum("kind_changed_at")
        ).values()
    )


def kinds_fingerprint(*, benchmark_id: int) -> tuple:
    """Return what changes whenever a kind that matters to the benchmark's results changes,
    or the order by name of the annotators who may count there."""
    decided = kind_stamps()
    overrides = tuple(
        ProjectAnnotatorKind.objects.filter(project__benchmark_id=benchmark_id)
        .order_by("annotator_id", "project_id")
        .values_list("annotator_id", "project_id", "kind")
    )
    return (decided, overrides, _name_order(benchmark_id))


def _name_order(benchmark_id: int) -> str:
    """Hash the ids, in name order, of the annotators whose work can count in the benchmark (a
    decided kind of their own, or one a project on it gives them).

    Agreement takes an item's first raters in name order (evaluation.services.reports
    ._rated_items), so a rename (the admin's) can change a kappa while no label changes. Names
    are unique; ordered by code point, as Python sorts them ("C" on PostgreSQL, BINARY on
    SQLite: UTF-8 bytes sort as code points), so only the ids come back.
    """
    overridden = ProjectAnnotatorKind.objects.filter(project__benchmark_id=benchmark_id)
    collation = "C" if connection.vendor == "postgresql" else "BINARY"
    ids = (
        Annotator.objects.filter(
            Q(kind__in=DECIDED_KIND_VALUES) | Q(pk__in=overridden.values("annotator_id"))
        )
        .order_by(Collate("name", collation))
        .values_list("id", flat=True)
    )
    return hashlib.sha256(repr(list(ids)).encode()).hexdigest()[:24]
