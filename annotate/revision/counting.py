"""Which revision sessions and re-ratings count in a study's results: the annotator-kind rule.

As for InFoBench labels and verbalizer answers, work done in the app counts only once a
researcher has decided its account's kind (annotate.selectors.annotator_kinds
.users_of_decided_kind: a study belongs to no benchmark, so no project's kind applies, only the
account's own). The KIWI report, the re-rating sample and the session exports follow it. An
imported session has no account (a researcher brought its line in) and always counts.

An account an admin blocked counts in no result while the block lasts, as a blocked worker's
labels and answers do (annotate.selectors.results.blocked_annotator_ids: any active block, read
through blocked_user_ids); its sessions and re-ratings count again once it is unblocked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q

from annotate.revision.models import RerateStatus, Rerating, RevisionSession, SessionStatus, Study
from annotate.selectors.annotator_kinds import users_of_decided_kind
from annotate.selectors.results import blocked_user_ids


def _account_counted_q(field: str) -> Q:
    """Accounts (in `field`) whose work counts: kind decided, not blocked now."""
    return Q(**{f"{field}__in": users_of_decided_kind()}) & ~Q(
        **{f"{field}__in": blocked_user_ids()}
    )


def _account_waiting_for_kind_q(field: str) -> Q:
    """Accounts (in `field`) whose work counts once their kind is decided: not blocked now (a
    block keeps it out whatever the kind)."""
    return ~Q(**{f"{field}__in": users_of_decided_kind()}) & ~Q(
        **{f"{field}__in": blocked_user_ids()}
    )


def counted_session_q(prefix: str = "") -> Q:
    """Sessions (reached through `prefix`, e.g. "session__" from a Turn) that count: imported,
    or of an account whose kind is decided and that is not blocked."""
    return Q(**{f"{prefix}annotator__isnull": True}) | _account_counted_q(f"{prefix}annotator_id")


def session_waiting_for_kind_q(prefix: str = "") -> Q:
    """Sessions of an account whose kind no researcher has decided yet: they count from then."""
    return Q(**{f"{prefix}annotator__isnull": False}) & _account_waiting_for_kind_q(
        f"{prefix}annotator_id"
    )


def counted_rerating_q() -> Q:
    """Re-ratings whose rater counts (a re-rating is always by an account)."""
    return _account_counted_q("annotator_id")


def imported_annotator(extra: dict[str, Any]) -> str:
    """Who did an imported session, as its line names them: `annotator` (this app's export
    writes the login there), else `annotator_id`; "" when it names nobody, JSON when the name
    is not text."""
    named = extra.get("annotator", extra.get("annotator_id", ""))
    return named if isinstance(named, str) else json.dumps(named, ensure_ascii=False)


def rerating_is_own(
    *, rater_id: int, rater_username: str, owner_id: int | None, session_extra: dict
) -> bool:
    """Whether a re-rating is by whoever did the turn's session: its annotator in the app, or
    for an imported session the login its line names. Such a self re-rating (sent under an
    older rule) is not a second person's rating (paper §5): it counts in no agreement and
    leaves its turn to be sent to someone else."""
    if owner_id is not None:
        return rater_id == owner_id
    return imported_annotator(session_extra or {}) == rater_username


@dataclass(frozen=True)
class LeftOut:
    """A study's finished work left out of its results for one reason (a kind not decided yet,
    a block), and the accounts that did it."""

    sessions: int
    annotators: int  # the accounts of those sessions
    reratings: int
    raters: int  # the accounts of those re-ratings

    def as_dict(self) -> dict[str, int]:
        return {
            "sessions": self.sessions,
            "annotators": self.annotators,
            "reratings": self.reratings,
            "raters": self.raters,
        }


def study_waiting_for_kind(*, study: Study) -> LeftOut:
    """Count the study's finished sessions, and the finished re-ratings of its counted turns
    (those of evaluation.revision.report_data.counted_turns), left out only because their
    account's kind is not decided, and the accounts (two queries); not a re-rating by the
    session's own annotator, which counts in no agreement whatever its rater's kind."""
    return _study_left_out(
        study=study,
        sessions_q=session_waiting_for_kind_q(),
        reratings_q=_account_waiting_for_kind_q("annotator_id"),
    )


def study_blocked(*, study: Study) -> LeftOut:
    """Count the study's finished sessions, and the finished re-ratings of its counted turns,
    left out because an admin blocked their account (whatever its kind: a block keeps work
    out before the kind is read), and the accounts (two queries); not a self re-rating."""
    blocked = blocked_user_ids()
    return _study_left_out(
        study=study,
        sessions_q=Q(annotator_id__in=blocked),
        reratings_q=Q(annotator_id__in=blocked),
    )


def _study_left_out(*, study: Study, sessions_q: Q, reratings_q: Q) -> LeftOut:
    """The study's finished sessions of `sessions_q`, and the finished re-ratings of `reratings_q`
    of its counted turns but a self re-rating, with their accounts."""
    sessions = RevisionSession.objects.filter(
        sessions_q, study=study, status=SessionStatus.FINISHED
    ).aggregate(sessions=Count("id"), annotators=Count("annotator", distinct=True))
    # A re-rating by whoever did the session (an imported line naming the rater's login) counts
    # in no agreement whatever its rater (rerating_is_own): not left out for this reason either.
    rows = (
        Rerating.objects.filter(
            counted_session_q("turn__session__"),
            turn__session__study=study,
            turn__session__status=SessionStatus.FINISHED,
            status=RerateStatus.DONE,
        )
        .filter(reratings_q)
        .exclude(turn__rating="")
        .values_list(
            "annotator_id", "annotator__username", "turn__session__annotator_id",
            "turn__session__extra",
        )
    )  # fmt: skip
    raters = [
        rater_id
        for rater_id, username, owner_id, extra in rows
        if not rerating_is_own(
            rater_id=rater_id, rater_username=username, owner_id=owner_id, session_extra=extra
        )
    ]
    return LeftOut(**sessions, reratings=len(raters), raters=len(set(raters)))
