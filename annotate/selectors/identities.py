"""Who may see a crowd worker's identity on its platform: one rule for pages, API and exports.

A crowd worker's annotator name carries their platform id (`mturk:<workerId>`, `selfhosted:<PID>`).
It is shown only to admins and to the researchers of a project the worker's work came from (the
project's creator and its researchers; for a verbalizer human study, whoever made the study or
its evaluation set); everyone else sees a stable pseudonym,
`crowd-worker-<annotator id>`. Command-line exports run by an operator see every name. Experts,
LLM judges and imported annotators (no platform worker id) are always shown by name; a platform
worker stays hidden whatever kind a researcher gives them (an expert, "not decided yet").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Q

from annotate.models import Annotator, Assignment
from annotate.roles import is_admin
from annotate.verbalizer.models import HumanAnswer


def crowd_pseudonym(annotator_id: int) -> str:
    return f"crowd-worker-{annotator_id}"


@dataclass(frozen=True)
class IdentityScope:
    """The crowd workers whose platform identity one viewer may see."""

    everyone: bool
    visible: frozenset[int] = frozenset()

    def hides(self, *, annotator_id: int, worker_id: str) -> bool:
        """Return whether this viewer sees the annotator by pseudonym, not by name."""
        # A platform worker (a worker id) whatever kind results give them: a researcher who
        # makes one an expert does not make their platform id public.
        return bool(worker_id) and not self.everyone and annotator_id not in self.visible

    def name(self, *, annotator_id: int, name: str, worker_id: str) -> str:
        """Return the annotator's name, or its pseudonym if this viewer may not see it."""
        if self.hides(annotator_id=annotator_id, worker_id=worker_id):
            return crowd_pseudonym(annotator_id)
        return name

    def name_of(self, annotator: Annotator) -> str:
        return self.name(
            annotator_id=annotator.pk,
            name=annotator.name,
            worker_id=annotator.worker_id,
        )


OPERATOR = IdentityScope(everyone=True)  # management commands: whoever runs them runs the site


def identity_scope(*, user) -> IdentityScope:
    """Return what `user` may see (None, e.g. a deleted requester: no crowd identity)."""
    if user is not None and is_admin(user):
        return OPERATOR
    if user is None or not user.is_authenticated:
        return IdentityScope(everyone=False)
    own_projects = Q(task__batch__project__researchers=user) | Q(
        task__batch__project__created_by=user
    )
    platform_worker = ~Q(annotator__worker_id="")
    worked = Assignment.objects.filter(own_projects, platform_worker)
    # A verbalizer human study's workers: seen by who made the study or its evaluation set.
    own_studies = Q(study__created_by=user) | Q(study__evaluation_set__created_by=user)
    answered = HumanAnswer.objects.filter(own_studies, platform_worker)
    visible = (
        worked.order_by()
        .values_list("annotator_id", flat=True)
        .union(answered.order_by().values_list("annotator_id", flat=True))  # one query
    )
    return IdentityScope(everyone=False, visible=frozenset(visible))


def annotator_names_shown(*, annotator_ids: Iterable[int], scope: IdentityScope) -> dict[int, str]:
    """Return {annotator id: the name `scope` shows} of the annotators that exist; one query."""
    annotators = Annotator.objects.filter(pk__in=set(annotator_ids)).only("name", "worker_id")
    return {annotator.pk: scope.name_of(annotator) for annotator in annotators}
