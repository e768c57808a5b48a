"""The longest texts an admin may give a crowd platform: MTurk's limits, held on every platform.

MTurk refuses a call whose text is longer than it takes (the HIT type, a feedback, a message),
after the app has stored the work and maybe paid for part of it. Each text is checked against
these before anything is stored or sent, on every platform: a reason or message that works on
one platform then works on all of them, and a self-hosted publication's title is one MTurk would
take too. Sources: botocore's service model for MTurk (2017-01-17: NotifyWorkers' Subject and
MessageText, at most ten QualificationRequirements) and MTurk's requester API reference
(RegisterHITType's Title, Description and Keywords, the RequesterFeedback of ApproveAssignment
and RejectAssignment). MTurk documents no limit on a bonus's Reason; it goes in the same
`feedback` field as an approve's or a reject's, and takes the same limit.
"""

from __future__ import annotations

from annotate.errors import FieldInputError

TITLE_MAX_CHARS = 128  # "can be up to 128 characters"
DESCRIPTION_MAX_CHARS = 1999  # "must be less than 2,000 characters"
KEYWORDS_MAX_CHARS = 500  # MTurk takes fewer than 1,000; the publication's column holds 500
FEEDBACK_MAX_CHARS = 1024  # RequesterFeedback; a bonus's Reason too (see above)
SUBJECT_MAX_CHARS = 200  # NotifyWorkers' Subject
MESSAGE_MAX_CHARS = 4096  # NotifyWorkers' MessageText
QUALIFICATIONS_MAX = 10  # "between zero and ten Qualification requirements"


def text_length_check(
    text: str, *, field: str, most: int, what: str, error: type[FieldInputError] = FieldInputError
) -> None:
    """Refuse `text` longer than `most` characters, naming `field`, the limit and `what` the
    text is (e.g. "the feedback a worker is sent")."""
    if len(text) > most:
        raise error(
            f"{field}: at most {most} characters (MTurk's limit on {what}, held for every "
            f"platform), not {len(text)}. Shorten it; nothing was stored or sent.",
            field=field,
        )


def title_fitted(title: str) -> str:
    """`title` cut to TITLE_MAX_CHARS, ending in "…" when cut: the publish pages' default title
    holds a project's or study's name (up to 200 characters), and offered longer it was
    refused as it stood."""
    if len(title) <= TITLE_MAX_CHARS:
        return title
    return title[: TITLE_MAX_CHARS - 1].rstrip() + "…"
