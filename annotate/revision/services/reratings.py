"""Re-rating for agreement (paper §5, "Human"): a random sample of finished turns, rated again.

Researchers send the sample; each turn goes to one other annotator, never the one who did the
session (paper §5: "We ensure the interaction annotators do not re-annotate their own previous
interactions"): the session's annotator in the app, or for an imported session the login its
line names (the app's export writes it as `annotator`). The annotator sees (question, previous
answer, instruction, revised answer) and gives a rating with a comment.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils.text import capfirst

from annotate.errors import ConflictError, NotFoundError, ProjectSetupError, SubmissionError
from annotate.revision.models import (
    COMMENT_MAX_CHARS,
    Rating,
    RerateStatus,
    Rerating,
    Study,
)
from annotate.revision.selectors import rerate_candidates, rerate_owners
from annotate.revision.services.sessions import text_length_check


class RerateRepeatError(ConflictError):
    """Turns were sent since the form was shown: the same form posted twice (a double click, a
    stale tab, a client's retry), refused so that it sends no second sample. `sent` says what
    the study has sent since (how many, to whom, when) without calling it this sample, for a
    caller that cannot tell (a command run after a sample sent on the page)."""

    def __init__(self, message: str, *, sent: str) -> None:
        self.sent = sent
        super().__init__(message)


class RerateSampleError(ProjectSetupError):
    """The sample cannot be sent as asked; `field` names the input to change (size, annotators)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, field=field)


@transaction.atomic
def reratings_sample(
    *,
    study: Study,
    annotators: Sequence[AbstractBaseUser],
    size: int,
    seed: int,
    now: datetime,
    sent_before: int | None = None,
) -> list[Rerating]:
    """Send `size` random finished turns (seeded) not yet re-rated by another person (a
    re-rating by the session's own annotator does not count: `rerate_candidates`), each to
    another annotator.

    The sample is drawn from the turns some chosen annotator may re-rate: with one annotator
    chosen, not those of their own sessions (an imported session: whom its line names); with
    more, every turn left. Raises, naming both counts, when fewer than `size` are eligible.
    Annotators take turns in the given order; a turn whose session belongs to the annotator
    whose turn it is goes to the next one.

    `sent_before` is how many of the study's turns were sent when the caller's form was shown
    (the page's "Sent"); if that is no longer so, the form was sent already and
    RerateRepeatError refuses it, sending nothing. None (a caller with no page): no such check.
    """
    # The study's row lock makes two posts of one form wait for each other, so the second
    # sees the first one's sample and is refused rather than drawing another. FOR NO KEY
    # UPDATE: it still excludes another sample (and an edit or deletion of the study), but not
    # the FOR KEY SHARE that a row going in under the study takes at its commit, so annotators
    # starting sessions there (and imports, judge runs) do not wait for the sample; none of
    # them changes what the sample draws (finished turns and their re-ratings).
    Study.objects.select_for_update(no_key=True).filter(pk=study.pk).first()
    if sent_before is not None:
        _repeat_check(study=study, sent_before=sent_before)
    if not annotators:
        raise RerateSampleError(
            "choose at least one annotator for the re-rating", field="annotators"
        )
    if size < 1:
        raise RerateSampleError(f"the sample size must be at least 1, not {size}", field="size")
    candidates = rerate_candidates(study=study)
    chosen_ids = {annotator.pk for annotator in annotators}
    # Only one annotator can own a session, so with two or more chosen every turn may go.
    eligible = [
        (turn_id, owner_id)
        for turn_id, owner_id in rerate_owners(
            study=study, annotators=annotators, candidates=candidates
        )
        if chosen_ids - {owner_id}
    ]
    if size > len(eligible):
        raise RerateSampleError(
            _too_few(left=len(candidates), eligible=len(eligible), size=size, alone=annotators[0]),
            field="size",
        )
    chosen = random.Random(seed).sample(eligible, size)
    created, cursor = [], 0
    for turn_id, owner_id in chosen:
        step = next(
            step
            for step in range(len(annotators))
            if annotators[(cursor + step) % len(annotators)].pk != owner_id
        )
        annotator = annotators[(cursor + step) % len(annotators)]
        cursor = (cursor + step + 1) % len(annotators)
        created.append(Rerating(turn_id=turn_id, annotator=annotator, created_at=now))
    return Rerating.objects.bulk_create(created)


def _repeat_check(*, study: Study, sent_before: int) -> None:
    """Refuse, naming what was sent, when the study's sent count is no longer `sent_before`."""
    sent = Rerating.objects.filter(turn__session__study=study).order_by("id")
    count = sent.count()
    if count == sent_before:
        return
    if count < sent_before:
        sent = f"the study has {count} turns sent for re-rating, not {sent_before}"
        raise RerateRepeatError(
            f"{capfirst(sent)} as when this form was shown (some were deleted)", sent=sent
        )
    since = list(sent.select_related("annotator")[sent_before:])
    per_annotator: dict[str, int] = {}
    for rerating in since:
        name = rerating.annotator.get_username()
        per_annotator[name] = per_annotator.get(name, 0) + 1
    to = ", ".join(f"{n} to {name}" for name, n in sorted(per_annotator.items()))
    last = max(rerating.created_at for rerating in since)
    sent = (
        f"{len(since)} turn{'' if len(since) == 1 else 's'} went for re-rating since the study "
        f"had {sent_before} sent ({to}; at {last:%Y-%m-%d %H:%M:%S} UTC), {count} in all"
    )
    raise RerateRepeatError(f"This sample was sent already: {sent}", sent=sent)


def _too_few(*, left: int, eligible: int, size: int, alone: AbstractBaseUser) -> str:
    """Why `size` turns cannot be sent: fewer are left, or (one annotator chosen) fewer are
    left that are not of that annotator's own sessions."""
    if eligible == left:
        return f"only {left} finished turns are left to re-rate, not {size}"
    name = alone.get_username()
    return (
        f"only {eligible} of the {left} finished turns left may go to {name}, the only "
        f"annotator chosen (the other {left - eligible} are of {name}'s own sessions), not "
        f"{size}: ask for {eligible} or fewer, or choose another annotator too"
    )


@transaction.atomic
def rerating_submit(
    *, rerating_id: int, user: AbstractBaseUser, rating: str, comment: str, now: datetime
) -> Rerating:
    """Store the annotator's rating and comment of a turn sent to them."""
    try:
        rerating = Rerating.objects.select_for_update().get(pk=rerating_id, annotator=user)
    except Rerating.DoesNotExist:
        raise NotFoundError("no such re-rating") from None
    if rerating.status == RerateStatus.DONE:
        raise ConflictError("this turn is already re-rated")
    rating = rating.strip().lower()  # "Good", " bad ": any case, as the imports take them
    if rating not in Rating.values:
        raise SubmissionError("rate the revision good, neutral or bad", missing=["rating"])
    if not comment.strip():
        raise SubmissionError("a comment explaining the rating is required", missing=["comment"])
    text_length_check(field="comment", text=comment.strip(), limit=COMMENT_MAX_CHARS)
    rerating.rating, rerating.comment = rating, comment.strip()
    rerating.status, rerating.rated_at = RerateStatus.DONE, now
    rerating.save(update_fields=["rating", "comment", "status", "rated_at"])
    return rerating
