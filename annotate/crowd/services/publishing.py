"""Publish a batch to a crowd platform: preview the cost, then create one HIT per task.

Every HIT's UniqueRequestToken is stored before the HIT is asked for, so a publish that is retried
(a lost reply, a worker killed half-way, an admin pressing the button twice) finds the HITs made
by earlier tries instead of paying for them twice.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.db.models import Case, Count, Exists, F, OuterRef, Q, TextField, Value, When
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.base import (
    LOCALE,
    MASTERS,
    NUMBER_APPROVED,
    PERCENT_APPROVED,
    TOKENS_KEPT,
    HitTypeSpec,
)
from annotate.crowd.limits import (
    DESCRIPTION_MAX_CHARS,
    KEYWORDS_MAX_CHARS,
    QUALIFICATIONS_MAX,
    TITLE_MAX_CHARS,
    text_length_check,
)
from annotate.crowd.models import AccountBalance, Hit, HitStatus, Publication, PublicationStatus
from annotate.crowd.platforms import (
    get_platform,
    platform_class,
    platform_label,
    platform_names,
    platform_on_sandbox,
    publication_platform,
)
from annotate.crowd.pricing import assignments_cost, fee_description, fee_override
from annotate.crowd.services.expiry import hit_expire, still_live_q
from annotate.errors import (
    ConflictError,
    CrowdPlatformError,
    HitAlreadyExistsError,
    PublishError,
    TransientPlatformError,
)
from annotate.models import Batch
from annotate.services.assignments import counted_assignments
from annotate.services.leases import (
    LeaseHeldError,
    lease_beating,
    lease_held_retry_in,
    lease_silent,
    lease_take,
)

logger = logging.getLogger(__name__)

BUSY = (PublicationStatus.PENDING, PublicationStatus.PUBLISHING)
# HITs a publish still makes: not made yet, or refused. A deleted HIT was made (and paid for its
# work): making it again with its token after MTurk forgot it would make, and pay, a second one.
MISSING = (HitStatus.PENDING, HitStatus.FAILED)
# A publication that ended with HITs missing: its note (`error`) says why, and the page and the
# API add how many are missing, counted from the HITs as stored when shown (publication_note).
ENDED_MISSING = (PublicationStatus.PARTIAL, PublicationStatus.STALLED)
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]"}
DAY_SECONDS = 24 * 3600
# The longest times MTurk takes (CreateHITType, CreateHITWithHITType); longer ones would not fit
# the publication's columns either.
SECONDS_AT_MOST = {
    "assignment_duration_seconds": 365 * DAY_SECONDS,
    "auto_approval_delay_seconds": 30 * DAY_SECONDS,
    "lifetime_seconds": 365 * DAY_SECONDS,
}


def default_qualifications(
    *, min_percent_approved: int = 90, min_hits_approved: int = 500, locale: str = ""
) -> list[dict]:
    """The paper's worker filter: approval rate above 90% and at least 500 approved HITs."""
    requirements = [
        {
            "QualificationTypeId": PERCENT_APPROVED,
            "Comparator": "GreaterThan",
            "IntegerValues": [min_percent_approved],
        },
        {
            "QualificationTypeId": NUMBER_APPROVED,
            "Comparator": "GreaterThanOrEqualTo",
            "IntegerValues": [min_hits_approved],
        },
    ]
    if locale:
        requirements.append(
            {
                "QualificationTypeId": LOCALE,
                "Comparator": "EqualTo",
                "LocaleValues": [{"Country": locale.upper()}],
            }
        )
    return requirements


@dataclass(frozen=True)
class PublishSettings:
    title: str
    description: str
    keywords: str = "annotation, evaluation, instructions"
    reward_usd: Decimal | None = None  # None: the project's reward
    assignment_duration_seconds: int = 3600
    auto_approval_delay_seconds: int = 3 * 24 * 3600
    lifetime_seconds: int = 7 * 24 * 3600
    qualification_requirements: list[dict] = field(default_factory=default_qualifications)
    # Self-hosted links: what a participant gets after the submit (empty: the project's).
    completion_code: str = ""
    completion_url: str = ""


@dataclass(frozen=True)
class CostPreview:
    platform: str
    tasks: int  # tasks with an assignment still open: those that get a HIT
    assignments_per_task: int
    reward_usd: Decimal
    fee_rate: Decimal | None  # a flat rate (0: none), or None: MTurk's schedule (pricing)
    total_usd: Decimal
    balance_usd: Decimal | None
    # Self-hosted: the admin pays the workers on the recruiting site (Prolific...), not through
    # this app; the report's crowd cost still counts the reward of each counted assignment.
    paid_outside: bool = False
    # The assignments still open (what is paid for), and, of tasks × assignments per task, how
    # many were already submitted or are claimed live here (in-house annotators, other links).
    assignments: int = 0
    assignments_taken: int = 0
    tasks_in_batch: int = 0
    fee: str = ""  # which fee applies and why (pricing.fee_description)
    # The other platforms the batch (study) is published on already, and what that means here.
    published_elsewhere: tuple[str, ...] = ()
    published_elsewhere_note: str = ""

    @property
    def affordable(self) -> bool:
        return self.balance_usd is None or self.balance_usd >= self.total_usd


def open_assignments(*, batch: Batch, now: datetime) -> dict[int, int]:
    """Each task of the batch (by id, in HIT order) with the assignments it still needs: the
    project's assignments per task less those holding one of its slots (live claims and
    accepted submissions, as the claim counts them: counted_assignments), never below 0."""
    per_task = batch.project.assignments_per_task
    tasks = batch.tasks.order_by("position", "id").annotate(
        taken=Count("assignments", filter=counted_assignments(now=now, prefix="assignments__"))
    )
    return {task.pk: max(per_task - task.taken, 0) for task in tasks}


def publication_preview(
    *,
    batch: Batch,
    platform_name: str,
    reward_usd: Decimal | None = None,
    user=None,
    now: datetime | None = None,
) -> CostPreview:
    """What publishing would cost, and the account balance (asked from the platform).

    Only the assignments still open are paid for (open_assignments): a task that already has
    its assignments per task, submitted or claimed here, gets no HIT. Raises PublishError when
    no task has any left. A self-hosted link costs its reward per assignment with no fee, paid
    on the recruiting site: what the report's crowd cost counts for that work
    (crowd_paid_per_assignment).
    """
    platform_check(platform_name)
    published_check(target={"batch": batch}, platform_name=platform_name)
    reward = batch.project.reward_usd if reward_usd is None else reward_usd
    reward_check(platform_name=platform_name, reward_usd=reward)
    still_open = open_assignments(batch=batch, now=now or timezone.now())
    nothing_left_check(batch=batch, still_open=still_open)
    platform = get_platform(platform_name, user=user)
    fee = fee_override() if platform.pays_workers else Decimal(0)
    per_task, assignments = batch.project.assignments_per_task, sum(still_open.values())
    hits = [left for left in still_open.values() if left]  # each HIT's MaxAssignments
    return CostPreview(
        platform=platform_name,
        tasks=len(hits),
        assignments_per_task=per_task,
        reward_usd=reward,
        fee_rate=fee,
        total_usd=assignments_cost(hits=[(n, n) for n in hits], reward_usd=reward, flat_rate=fee),
        balance_usd=account_balance_check(
            platform=platform,
            platform_name=platform_name,
            sandbox=platform_on_sandbox(platform_name),
        ),
        paid_outside=not platform.pays_workers,
        assignments=assignments,
        assignments_taken=len(still_open) * per_task - assignments,
        tasks_in_batch=len(still_open),
        fee=fee_description(flat_rate=fee, max_assignments=hits),
        **published_elsewhere(target={"batch": batch}, platform_name=platform_name),
    )


def published_elsewhere(*, target: dict, platform_name: str) -> dict:
    """The other platforms `target` ({"batch": …} or {"human_study": …}) is published on, and a
    note for the preview saying what a second publication does: a batch's publications share
    its tasks' slots (their workers race for the same claims), a study's each collect its
    answers per prompt (every platform is a channel of its own: verbalizer same_channel_q).
    A failed publication published nothing and is left out; for a batch, so is one whose HITs
    have all ended or whose link is closed: its workers race for nothing any more."""
    others_q = Publication.objects.filter(**target).exclude(platform=platform_name)
    others_q = others_q.exclude(status=PublicationStatus.FAILED)
    if "batch" in target:
        live_hits = Hit.objects.filter(
            still_live_q(now=timezone.now()) | Q(status=HitStatus.PENDING),
            publication=OuterRef("pk"),
        )
        any_hit = Hit.objects.filter(publication=OuterRef("pk"))
        others_q = others_q.filter(
            Q(Exists(live_hits)) | (~Q(Exists(any_hit)) & Q(link_closed_at__isnull=True))
        )
    others = sorted(set(others_q.values_list("platform", flat=True)))
    if not others:
        return {}
    ((kind, what),) = target.items()
    where = " and ".join(platform_label(name) for name in others)
    if kind == "batch":
        note = (
            f"Batch '{what.name}' is already published on {where}. The publications share its "
            "tasks' slots: their workers race for the same claims, and whoever comes second to "
            "a full task is asked to return it. The assignments quoted here are those open now, "
            "which the other publication's workers may take first."
        )
    else:
        note = (
            f"Study '{what.name}' is already published on {where}. Each platform collects its "
            f"own {what.answers_per_prompt} answers per prompt, so this publication asks for "
            f"{what.answers_per_prompt} more per prompt."
        )
    return {"published_elsewhere": tuple(others), "published_elsewhere_note": note}


def nothing_left_check(*, batch: Batch, still_open: dict[int, int]) -> None:
    """Refuse to publish a batch none of whose tasks needs another assignment."""
    if not still_open:
        raise PublishError(f"Batch '{batch.name}' has no tasks to publish.", field="batch")
    if not any(still_open.values()):
        per_task = batch.project.assignments_per_task
        raise PublishError(
            f"Nothing left to publish: every task of batch '{batch.name}' already has its "
            f"{per_task} assignments per task (submitted or claimed here), so no worker is "
            "needed. Raise the project's assignments per task to ask for more.",
            field="batch",
        )


def platform_check(platform_name: str) -> None:
    """Refuse a platform an admin may not publish to here."""
    if platform_name not in platform_names():
        raise PublishError(
            f"Platform '{platform_name}' is not available here; choose one of "
            f"{', '.join(platform_names())}."
        )


def published_check(*, target: dict, platform_name: str) -> None:
    """Refuse a second publication of `target` ({"batch": …} or {"human_study": …}) on one
    platform, before any total is quoted."""
    if Publication.objects.filter(**target, platform=platform_name).exists():
        raise _published_already(target=target, platform_name=platform_name)


def _published_already(*, target: dict, platform_name: str) -> PublishError:
    ((kind, what),) = target.items()
    name = f"{'Batch' if kind == 'batch' else 'Study'} '{what.name}'"
    return PublishError(
        f"{name} is already published on {platform_label(platform_name)}; "
        "open that publication (Publications) to resume or review it, or to ask for "
        "workers in place of rejected work.",
        field="platform",
    )


def _check_settings(*, batch: Batch, platform_name: str, chosen: PublishSettings) -> None:
    published_check(target={"batch": batch}, platform_name=platform_name)
    reward = chosen.reward_usd if chosen.reward_usd is not None else batch.project.reward_usd
    publish_settings_check(platform_name=platform_name, chosen=chosen, reward_usd=reward)


def publish_settings_check(
    *, platform_name: str, chosen: PublishSettings, reward_usd: Decimal
) -> None:
    """Refuse settings no platform takes: no title or description, texts longer than MTurk
    takes (annotate.crowd.limits), no reward, too short or too long times."""
    if not chosen.title.strip() or not chosen.description.strip():
        raise PublishError("Title and description are required: workers choose HITs by them.")
    for name, most, what in (
        ("title", TITLE_MAX_CHARS, "a HIT's title"),
        ("description", DESCRIPTION_MAX_CHARS, "a HIT's description"),
        ("keywords", KEYWORDS_MAX_CHARS, "a HIT's keywords, held shorter here"),
    ):
        text_length_check(
            getattr(chosen, name), field=name, most=most, what=what, error=PublishError
        )
    reward_check(platform_name=platform_name, reward_usd=reward_usd)
    for name in ("assignment_duration_seconds", "lifetime_seconds"):
        if getattr(chosen, name) < 30:
            raise PublishError(f"{name.replace('_', ' ')} must be at least 30 seconds.")
    for name, most in SECONDS_AT_MOST.items():
        if getattr(chosen, name) > most:
            raise PublishError(
                f"{name.replace('_', ' ')} must be at most {most} seconds "
                f"({most // DAY_SECONDS} days)."
            )
    completion_check(completion_code=chosen.completion_code, completion_url=chosen.completion_url)
    qualifications_check(chosen.qualification_requirements)


def qualifications_check(requirements: list[dict]) -> None:
    """Refuse the Masters qualification: MTurk charges 5% more of the reward for it, which no
    total the app shows, confirms or reports counts (pricing); and more than MTurk takes."""
    if len(requirements or []) > QUALIFICATIONS_MAX:
        raise PublishError(
            f"qualification_requirements: at most {QUALIFICATIONS_MAX} (MTurk's limit on a HIT's "
            f"qualification requirements, held for every platform), not {len(requirements)}. "
            "Nothing was published.",
            field="qualification_requirements",
        )
    for position, requirement in enumerate(requirements or []):
        if isinstance(requirement, dict) and requirement.get("QualificationTypeId") in MASTERS:
            raise PublishError(
                f"qualification_requirements[{position}]: the Masters qualification adds a 5% "
                "MTurk fee the app does not price; require an approval rate instead.",
                field="qualification_requirements",
            )


def reward_check(*, platform_name: str, reward_usd: Decimal) -> None:
    """Refuse a reward that is not dollars and cents (the platform is sent it with two
    decimals, so a total quoted at $0.125 an assignment is not what it charges), below 0, or
    below $0.01 on a platform that pays workers."""
    if isinstance(reward_usd, int):
        reward_usd = Decimal(reward_usd)
    if not isinstance(reward_usd, Decimal) or not reward_usd.is_finite():
        raise PublishError(f"The reward {reward_usd} is not an amount.", field="reward_usd")
    if reward_usd < 0 or reward_usd != reward_usd.quantize(Decimal("0.01")):
        raise PublishError(
            f"The reward is dollars and cents, 0 or more (e.g. 0.50), not {reward_usd}.",
            field="reward_usd",
        )
    if platform_class(platform_name).pays_workers and reward_usd < Decimal("0.01"):
        raise PublishError("The reward must be at least $0.01 per assignment.", field="reward_usd")


def completion_check(*, completion_code: str, completion_url: str) -> None:
    """Refuse a completion code longer than 100 characters or a return address that is not
    http(s) (the participant's browser is sent there)."""
    if len(completion_code.strip()) > 100:
        raise PublishError("The completion code has at most 100 characters.")
    if completion_url.strip():
        try:
            URLValidator(schemes=["http", "https"])(completion_url.strip())
        except ValidationError:
            raise PublishError(
                f"The completion URL {completion_url!r} is not an http(s) address."
            ) from None


def task_base_url(*, request_base: str) -> str:
    """Where workers' browsers reach us: CROWD_PUBLIC_URL, else the admin's own address.

    MTurk frames only HTTPS pages; plain HTTP is accepted for this machine only (demo, tests).
    """
    base = (settings.CROWD_PUBLIC_URL or request_base).rstrip("/")
    if not base:  # only a command has no request: neither the setting nor --base-url was given
        raise PublishError(
            "Workers reach the task pages at the site's public address, and none is set: "
            "set CROWD_PUBLIC_URL to the public https:// address, or give --base-url."
        )
    parts = urlsplit(base)
    if parts.scheme != "https" and parts.hostname not in {h.strip("[]") for h in LOOPBACK_HOSTS}:
        raise PublishError(
            f"Workers must reach the task pages over HTTPS, but the site address is '{base}'. "
            "Set CROWD_PUBLIC_URL to the public https:// address."
        )
    return base


@transaction.atomic
def publication_create(
    *,
    batch: Batch,
    platform_name: str,
    chosen: PublishSettings,
    base_url: str,
    user=None,
    now: datetime | None = None,
) -> Publication:
    """Store the publication and one HIT row (with its token) per task that still needs an
    assignment, asking for as many as it needs (open_assignments); nothing is spent yet."""
    platform_check(platform_name)
    _check_settings(batch=batch, platform_name=platform_name, chosen=chosen)
    still_open = open_assignments(batch=batch, now=now or timezone.now())
    nothing_left_check(batch=batch, still_open=still_open)
    project = batch.project
    reward = project.reward_usd if chosen.reward_usd is None else chosen.reward_usd
    publication = publication_store(
        target={"batch": batch},
        platform_name=platform_name,
        chosen=chosen,
        reward_usd=reward,
        assignments_per_task=project.assignments_per_task,
        base_url=base_url,
        user=user,
    )
    if platform_class(platform_name).creates_hits:
        Hit.objects.bulk_create(
            Hit(
                publication=publication,
                task_id=task_id,
                max_assignments=left,
                unique_request_token=uuid.uuid4().hex,
            )
            for task_id, left in still_open.items()
            if left
        )
    return publication


def publication_store(
    *,
    target: dict,
    platform_name: str,
    chosen: PublishSettings,
    reward_usd: Decimal,
    assignments_per_task: int,
    base_url: str,
    user=None,
) -> Publication:
    """Store a publication of `target` ({"batch": …} or {"human_study": …}) with its settings;
    the caller adds its HIT rows in the same transaction. A second one of the same target and
    platform (two Confirm clicks at once, both past published_check) is refused as that check
    refuses it, by the table's unique constraint."""
    try:
        with transaction.atomic():
            return Publication.objects.create(
                **target,
                platform=platform_name,
                sandbox=platform_on_sandbox(platform_name),
                title=chosen.title.strip(),
                description=chosen.description.strip(),
                keywords=chosen.keywords.strip(),
                reward_usd=reward_usd,
                fee_rate=fee_override(),
                assignments_per_task=assignments_per_task,
                assignment_duration_seconds=chosen.assignment_duration_seconds,
                auto_approval_delay_seconds=chosen.auto_approval_delay_seconds,
                lifetime_seconds=chosen.lifetime_seconds,
                qualification_requirements=chosen.qualification_requirements,
                completion_code=chosen.completion_code.strip(),
                completion_url=chosen.completion_url.strip(),
                task_base_url=base_url,
                link_token=secrets.token_urlsafe(24),
                created_by=user,
            )
    except IntegrityError:
        if not Publication.objects.filter(**target, platform=platform_name).exists():
            raise
        raise _published_already(target=target, platform_name=platform_name) from None


def hit_question_url(hit: Hit) -> str:
    """The ExternalQuestion URL: the task page of a batch's HIT, the prompt page of a study's."""
    name = "verbalizer:crowd-mturk" if hit.prompt_id is not None else "crowd:mturk-task"
    path = reverse(name, args=[hit.unique_request_token])
    return f"{hit.publication.task_base_url}{path}"


def publication_publish(
    *, publication_id: int, now: datetime, user=None, retry_follows: bool = False
) -> Publication:
    """Create the HIT type and every missing HIT. Safe to run twice, even at once, or after a crash.

    Only the delivery holding the publication's lease makes HITs (`_publish_claim`); another,
    while that one beats, makes none and raises LeaseHeldError (its task looks again once that
    lease could be stale). A publication that ended (partial, stalled, failed, published) or
    that an admin expired is left as it is: only an admin's Resume asks for its HITs again. The
    publication never stays publishing: it ends published, partial (HITs refused, or expired by
    an admin), failed (the HIT type refused), or stalled on an unexpected error. A throttled
    call (TransientPlatformError, raised after marking it) leaves it pending for the caller's
    retry when `retry_follows` (the Celery task with retries left) and no HIT was refused, and
    partial otherwise (`_throttled_end`). A worker killed meanwhile stops the heartbeat, and the
    publication is taken over by the next delivery, or marked stalled (publications_stalled_mark)
    and left to an admin's Resume.
    """
    publication = Publication.objects.get(pk=publication_id)
    platform = publication_platform(publication, user=user)
    if not platform.creates_hits:
        return _finish(publication, PublicationStatus.PUBLISHED, now=now)
    token = _publish_claim(publication_id=publication.pk)
    publication.refresh_from_db()
    if token is None:
        if publication.status != PublicationStatus.PUBLISHING or publication.expired_at:
            logger.info(
                "Publication %s is %s%s: this delivery makes no HIT",
                publication.pk,
                publication.status,
                " and expired" if publication.expired_at else "",
            )
            return publication
        retry_in = lease_held_retry_in(
            job=Publication.objects.filter(pk=publication.pk),
            stale_seconds=settings.CROWD_PUBLISH_STALE_SECONDS,
        )
        raise LeaseHeldError(f"Publication {publication.pk}", retry_in=retry_in)
    publishing = Publication.objects.filter(pk=publication.pk, status=PublicationStatus.PUBLISHING)
    every = settings.CROWD_PUBLISH_STALE_SECONDS / 20
    try:
        with lease_beating(job=publishing, token=token, every=every):
            ended = _hits_publish(
                publication, platform, mine=publishing.filter(lease=token), now=now
            )
    except TransientPlatformError as error:
        _throttled_end(publication, error, now=now, token=token, retry_follows=retry_follows)
        raise
    except CrowdPlatformError as error:  # the HIT type itself was refused
        return _finish(
            publication, PublicationStatus.FAILED, now=now, error=str(error), token=token
        )
    except Exception as error:  # a bug or an outage: the publication must not stay publishing
        logger.exception("Publish of publication %s stopped on an unexpected error", publication.pk)
        _finish(
            publication,
            PublicationStatus.STALLED,
            now=now,
            token=token,
            error=f"{STOPPED_ON_AN_ERROR} ({type(error).__name__}: "
            f"{str(error)[:500]}). The HITs made are kept.",
        )
        raise
    if not ended:  # taken over, stalled or resumed meanwhile: whoever holds it writes the end
        publication.refresh_from_db()
        if publication.expired_at and publication.lease == token:
            missing = hits_missing_count(publication)
            return _finish(
                publication,
                PublicationStatus.PARTIAL if missing else PublicationStatus.PUBLISHED,
                now=now,
                token=token,
                error=EXPIRED_BY_ADMIN if missing else "",
            )
        # The HIT it was making when it was marked stalled may be stored since: made, not missing.
        publication_made_check(publication_id=publication.pk, now=now)
        publication.refresh_from_db()
        return publication
    if hits_missing_count(publication):
        return _finish(
            publication, PublicationStatus.PARTIAL, now=now, token=token, error=NOT_ALL_CREATED
        )
    return _finish(publication, PublicationStatus.PUBLISHED, now=now, token=token)


# The notes of a publication ended with HITs missing say why, never how many: the page and the
# API add that, counted when shown (publication_note), so a HIT found and stored later (an
# Expire's run adopting what a stopped publish made) is never still said to be missing.
EXPIRED_BY_ADMIN = "Expired by an admin."
NOT_ALL_CREATED = "The platform did not create every HIT; see each HIT."
# A publish stopped by a bug or an outage: its cause stays in the note once every HIT is found
# made since (publication_made_check), for the admin to look into.
STOPPED_ON_AN_ERROR = "The publish stopped on an unexpected error"


def hits_missing_count(publication: Publication) -> int:
    """How many of the publication's HITs a Resume makes: not made yet, or refused (MISSING)."""
    return publication.hits.filter(status__in=MISSING).count()


def publication_made_check(*, publication_id: int, now: datetime) -> bool:
    """Mark published a publication that ended with HITs missing (partial or stalled, expired
    by an admin or not) once none is, and return whether it was: HITs a stopped publish made on
    the platform were found and stored since (publication_orphans_adopt). Left as it is while a
    HIT is missing, or when a Resume hands it to a publish meanwhile (no longer ended). The note
    of a publish stopped on an unexpected error is kept: its cause is the admin's to look into."""
    if Hit.objects.filter(publication_id=publication_id, status__in=MISSING).exists():
        return False
    cause_kept = Case(
        When(
            status=PublicationStatus.STALLED,
            error__startswith=STOPPED_ON_AN_ERROR,
            then=F("error"),
        ),
        default=Value(""),
        output_field=TextField(),
    )
    return bool(
        Publication.objects.filter(pk=publication_id, status__in=ENDED_MISSING).update(
            status=PublicationStatus.PUBLISHED, error=cause_kept, finished_at=now
        )
    )


def publication_unheld_expire(*, publication_id: int, now: datetime) -> bool:
    """End at once, expired by an admin, a publication no delivery holds; return whether it
    was. Either it waits for a delivery that has not taken it (a publish, a Resume, or a
    throttled publish's retry not started yet), or its publish went silent (its worker killed,
    `_silent`) and is not marked stalled yet: nothing of it is alive to end it, and left alone
    it would show "Publishing" until the beat marks it. The lease is taken for the expiry in
    the same UPDATE, so a delivery arriving later makes nothing (`_publish_claim`), a silent one
    that wakes stops before its next HIT, and no publish's end is written over it (`_finish`).
    A publication whose delivery beats is left to that delivery, which stops before its next
    HIT and writes the end itself."""
    publication = Publication.objects.get(pk=publication_id)
    if publication.status not in BUSY or publication.expired_at:
        return False
    missing = hits_missing_count(publication)
    unheld = Q(status=PublicationStatus.PENDING) | (
        Q(status=PublicationStatus.PUBLISHING) & _silent()
    )
    ended = Publication.objects.filter(unheld, pk=publication_id, expired_at__isnull=True).update(
        lease=uuid.uuid4().hex,
        status=PublicationStatus.PARTIAL if missing else PublicationStatus.PUBLISHED,
        expired_at=now,
        finished_at=now,
        error=EXPIRED_BY_ADMIN if missing else "",
    )
    return bool(ended)


def _throttled_end(
    publication: Publication, error: Exception, *, now: datetime, token: str, retry_follows: bool
) -> None:
    """End a publish stopped by a throttled call. Pending again, for the caller's own retry
    (with a fresh heartbeat: the beat marks it stalled only if that retry never comes), when
    one follows and the platform refused no HIT: the rest is what the admin confirmed. Else
    partial: a refused HIT (insufficient funds, say) is the admin's to decide on, and only their
    Resume, which confirms the cost again and checks the balance, asks for it again."""
    refused = publication.hits.filter(status=HitStatus.FAILED).count()
    if not retry_follows or refused:
        because = "the platform refused HITs" if refused else "no retry follows"
        _finish(
            publication,
            PublicationStatus.PARTIAL,
            now=now,
            token=token,
            error=f"{error} ({because}).",
        )
        return
    Publication.objects.filter(
        pk=publication.pk, lease=token, status=PublicationStatus.PUBLISHING
    ).update(
        status=PublicationStatus.PENDING,
        error=f"{error} (the publish retries by itself).",
        heartbeat_at=Now(),
        finished_at=None,
    )
    publication.refresh_from_db()


def _publish_claim(*, publication_id: int) -> str | None:
    """Take the publication's lease for this delivery: its token, or None when it is not this
    delivery's to run. One conditional UPDATE, so of two deliveries at once only one makes HITs.

    A delivery runs what it was sent for: a publication waiting (publish, an admin's Resume, or
    a throttled publish left pending for its retry: `_throttled_end`), or a publish silent for
    CROWD_PUBLISH_STALE_SECONDS (its worker was killed and the task delivered again: the total
    the admin confirmed for it is still what they asked for). Never one an admin expired, and
    never one marked partial (HITs refused), stalled, failed or published: the admin decides on
    those, and only their Resume, which confirms the cost again and checks the balance, hands
    it back to a publish. Silent by the database's clock, which the heartbeat is written by."""
    publishing = Q(status=PublicationStatus.PUBLISHING)
    waiting = Q(status=PublicationStatus.PENDING)
    return lease_take(
        job=Publication.objects.filter(pk=publication_id, expired_at__isnull=True),
        claimable=waiting | (publishing & _silent()),
        now=Now(),
        status=PublicationStatus.PUBLISHING,
        error="",
        finished_at=None,
    )


def _hits_publish(publication: Publication, platform, *, mine, now: datetime) -> bool:
    """Make the HIT type and the missing HITs while the lease is this delivery's (`mine`: the
    publication while it is); False when it was lost before the last (stalled and taken over)."""
    _ensure_hit_type(publication, platform)
    missing = list(
        publication.hits.filter(status__in=MISSING).select_related("publication").order_by("id")
    )
    if missing and publication.created_at <= now - TOKENS_KEPT:
        missing = _adopt_made_before(missing, platform)
    for hit in missing:
        if not mine.filter(expired_at__isnull=True).update(heartbeat_at=Now()):
            return False
        _hit_publish(hit, platform)
        _expired_meanwhile(hit, platform)
    return True


def _expired_meanwhile(hit: Hit, platform) -> None:
    """End at once a HIT made while an admin expired its publication: their expiry ran through
    the HITs made before it, and may have missed this one. Should the platform not confirm it,
    the HIT is stored as still live (hit_expire) and the publish stops before the next one."""
    expired_at = Publication.objects.filter(pk=hit.publication_id).values_list(
        "expired_at", flat=True
    )[0]
    if expired_at is None or hit.status != HitStatus.CREATED:
        return
    if hit.expires_at is None or hit.expires_at > expired_at:
        hit_expire(hit, platform, at=expired_at)


def _silent() -> Q:
    """Publications whose publish gave no sign of life for CROWD_PUBLISH_STALE_SECONDS (before
    the first heartbeat, since they were made), by the database's clock, which the heartbeat is
    written by: never this host's, which may run ahead of it."""
    return lease_silent(
        stale_seconds=settings.CROWD_PUBLISH_STALE_SECONDS, since_field="created_at"
    )


def publications_stalled_mark(*, now: datetime, publication_id: int | None = None) -> int:
    """Mark publications waiting or publishing whose publish went silent (its worker was
    killed, or its task lost) as stalled, or published when every HIT was made; return how
    many. The page then stops waiting for them and offers Resume. Safe to run twice and at once:
    each is one conditional UPDATE of a row still busy and silent."""
    silent = Publication.objects.filter(_silent(), status__in=BUSY)
    if publication_id is not None:
        silent = silent.filter(pk=publication_id)
    return sum(_stalled_mark(publication, now=now) for publication in silent)


def _stalled_mark(publication: Publication, *, now: datetime) -> int:
    since = publication.heartbeat_at or publication.created_at
    status, error = PublicationStatus.PUBLISHED, ""
    if hits_missing_count(publication):
        status = PublicationStatus.STALLED
        error = (
            f"The publish stopped: its worker gave no sign of life since "
            f"{since.astimezone(UTC):%Y-%m-%d %H:%M} UTC (more than "
            f"{settings.CROWD_PUBLISH_STALE_SECONDS:.0f} s). The HITs made are live."
        )
    return Publication.objects.filter(_silent(), pk=publication.pk, status__in=BUSY).update(
        status=status, error=error, finished_at=now
    )


def account_balance_check(*, platform, platform_name: str, sandbox: bool) -> Decimal | None:
    """Ask `platform` (named `platform_name`, on MTurk's requester sandbox or not) for the
    account balance, and keep it with its time for the pages that show it without asking
    (balance_last_known); None from a platform without one (a self-hosted link)."""
    balance = platform.account_balance()
    if balance is not None:
        AccountBalance.objects.update_or_create(
            platform=platform_name,
            sandbox=sandbox,
            defaults={"balance_usd": balance, "checked_at": timezone.now()},
        )
    return balance


def balance_last_known(*, platform_name: str, sandbox: bool) -> AccountBalance | None:
    """The account balance on that endpoint as last asked, with its time; None if never."""
    return AccountBalance.objects.filter(platform=platform_name, sandbox=sandbox).first()


def publication_balance_check(*, publication_id: int, user=None) -> AccountBalance | None:
    """Ask the platform of the publication (refused on the other MTurk endpoint) for the
    account balance, and keep it (an admin's "Check balance"); None: it has none."""
    publication = Publication.objects.get(pk=publication_id)
    account_balance_check(
        platform=publication_platform(publication, user=user),
        platform_name=publication.platform,
        sandbox=publication.sandbox,
    )
    return balance_last_known(platform_name=publication.platform, sandbox=publication.sandbox)


@dataclass(frozen=True)
class ResumeQuote:
    """What making a publication's missing HITs costs, and the account balance (as asked just
    now, or as last known: `balance_checked_at`)."""

    hits: int
    assignments: int
    total_usd: Decimal
    balance_usd: Decimal | None
    fee: str
    balance_checked_at: datetime | None = None

    @property
    def affordable(self) -> bool:
        return self.balance_usd is None or self.balance_usd >= self.total_usd


def publication_resume_quote(
    *, publication: Publication, user=None, ask_platform: bool = False
) -> ResumeQuote:
    """The cost of the publication's missing HITs (not made yet, or refused; a deleted HIT was
    made and is never made again), priced as its publish priced them: each HIT's
    MaxAssignments at the publication's reward and fee (pricing). A missing HIT that a stopped
    publish made on the platform before it died is adopted, not paid again: this is the most
    a resume spends. The balance is the last one known (no platform call: pages and GETs
    show this), or with `ask_platform` asked from the platform now (a Resume's confirmation)."""
    sizes = list(
        publication.hits.filter(status__in=MISSING).values_list("max_assignments", flat=True)
    )
    balance, checked_at = None, None
    if sizes and ask_platform:
        balance = account_balance_check(
            platform=publication_platform(publication, user=user),
            platform_name=publication.platform,
            sandbox=publication.sandbox,
        )
        checked_at = timezone.now()
    elif sizes:
        known = balance_last_known(platform_name=publication.platform, sandbox=publication.sandbox)
        if known is not None:
            balance, checked_at = known.balance_usd, known.checked_at
    return ResumeQuote(
        hits=len(sizes),
        assignments=sum(sizes),
        total_usd=assignments_cost(
            hits=[(n, n) for n in sizes],
            reward_usd=publication.reward_usd,
            flat_rate=publication.fee_rate,
        ),
        balance_usd=balance,
        fee=fee_description(flat_rate=publication.fee_rate, max_assignments=sizes),
        balance_checked_at=checked_at,
    )


def publication_resume(
    *, publication_id: int, confirm_total: Decimal, now: datetime, user=None
) -> Publication:
    """Hand a publication whose publish ended or stalled with HITs missing to a new publish of
    them once their cost is confirmed again, as the first publish's was: the total quoted
    (publication_resume_quote) sent back, and a balance that covers it. The caller enqueues
    publish_publication. A publish still alive (it beats) is refused: its worker ends it."""
    publications_stalled_mark(now=now, publication_id=publication_id)
    publication = Publication.objects.get(pk=publication_id)
    if not platform_class(publication.platform).creates_hits:
        raise PublishError("A self-hosted link has no HITs to publish.")
    if publication.status in BUSY:
        raise ConflictError(
            "This publication is being published: its worker gave a sign of life less than "
            f"{settings.CROWD_PUBLISH_STALE_SECONDS:.0f} s ago. Should it stop, this page "
            "says so and offers Resume."
        )
    quote = publication_resume_quote(publication=publication, user=user, ask_platform=True)
    _resume_check(publication, quote, confirm_total=confirm_total)
    resumed = (
        Publication.objects.exclude(status__in=BUSY)
        .filter(pk=publication.pk)
        .update(
            status=PublicationStatus.PENDING,
            heartbeat_at=Now(),
            error="",
            finished_at=None,
            expired_at=None,
        )
    )
    if not resumed:  # two confirmations at once (two tabs, a double click): one resumes
        raise ConflictError("This publication was resumed a moment ago: its publish runs.")
    publication.refresh_from_db()
    return publication


def _resume_check(publication: Publication, quote: ResumeQuote, *, confirm_total) -> None:
    if not quote.hits:
        raise PublishError("Every HIT of this publication was made: nothing to resume.")
    if quote.total_usd != confirm_total:
        raise PublishError(
            f"The {quote.hits} missing HITs cost ${quote.total_usd} (you confirmed "
            f"${confirm_total}): confirm the total shown.",
            field="confirm_total",
        )
    if not quote.affordable:
        raise PublishError(
            f"The {platform_label(publication.platform)} account has ${quote.balance_usd}, "
            f"less than the ${quote.total_usd} the {quote.hits} missing HITs cost: add funds, "
            "then resume. Nothing was published.",
            field="confirm_total",
        )


def publication_orphans_adopt(*, publication: Publication, platform, now: datetime) -> int:
    """Store the HITs a stopped publish made on the platform but never stored here (the reply
    came back to a worker that was killed), found by their tokens; return how many. Until
    then nothing here can expire them. A publication that ended with HITs missing and has none
    left is published (publication_made_check)."""
    if not publication.hit_type_id:
        return 0
    missing = list(publication.hits.filter(status__in=MISSING).select_related("publication"))
    if not missing:
        return 0
    adopted = len(missing) - len(_adopt_made_before(missing, platform))
    if adopted:
        publication_made_check(publication_id=publication.pk, now=now)
    return adopted


def _adopt_made_before(hits: list[Hit], platform) -> list[Hit]:
    """Adopt the HITs an earlier try made (found by their tokens, the HITs'
    RequesterAnnotation); return those still to make.

    A publication made more than TOKENS_KEPT ago may have tried them more than 24 hours ago,
    and MTurk forgets a UniqueRequestToken after 24 hours: a HIT whose reply was lost then would
    be made, and paid, a second time with the same token."""
    found = platform.hits_find(unique_request_tokens={hit.unique_request_token for hit in hits})
    for hit in hits:
        info = found.get(hit.unique_request_token)
        if info is not None:
            _hit_created(hit, info)
    return [hit for hit in hits if hit.unique_request_token not in found]


def _finish(
    publication: Publication, status: str, *, now: datetime, error: str = "", token: str = ""
) -> Publication:
    """Store the publication's end: when a `token` is given, only while the lease is still that
    delivery's and the publication still publishing. A delivery that took a silent publish over
    writes its own end; a publish that froze and wakes after it was marked stalled or resumed
    (pending again) writes nothing over the admin's view or the next publish's."""
    rows = Publication.objects.filter(pk=publication.pk)
    if token:
        rows = rows.filter(lease=token, status=PublicationStatus.PUBLISHING)
    if rows.update(status=status, error=error, finished_at=now):
        publication.status, publication.error, publication.finished_at = status, error, now
        return publication
    # Marked stalled while it stored its last HIT: that one was made, and may have been the
    # last missing.
    publication_made_check(publication_id=publication.pk, now=now)
    publication.refresh_from_db()
    return publication


def _ensure_hit_type(publication: Publication, platform) -> None:
    if publication.hit_type_id:
        return
    publication.hit_type_id = platform.hit_type_create(
        spec=HitTypeSpec(
            title=publication.title,
            description=publication.description,
            keywords=publication.keywords,
            reward=publication.reward_usd,
            assignment_duration_seconds=publication.assignment_duration_seconds,
            auto_approval_delay_seconds=publication.auto_approval_delay_seconds,
            qualification_requirements=publication.qualification_requirements,
            fee_rate=publication.fee_rate,
        )
    )
    publication.save(update_fields=["hit_type_id"])


def _hit_publish(hit: Hit, platform) -> None:
    """Create one HIT; if an earlier try already made it, adopt that one."""
    try:
        info = platform.hit_create(
            hit_type_id=hit.publication.hit_type_id,
            question_url=hit_question_url(hit),
            max_assignments=hit.max_assignments,
            lifetime_seconds=hit.publication.lifetime_seconds,
            unique_request_token=hit.unique_request_token,
        )
    except HitAlreadyExistsError:
        info = platform.hit_find(unique_request_token=hit.unique_request_token)
        if info is None:
            hit.status, hit.error = (
                HitStatus.FAILED,
                "HIT exists on the platform but was not found.",
            )
            hit.save(update_fields=["status", "error"])
            return
    except TransientPlatformError:
        raise
    except CrowdPlatformError as error:
        hit.status, hit.error = HitStatus.FAILED, str(error)
        hit.save(update_fields=["status", "error"])
        return
    _hit_created(hit, info)


def _hit_created(hit: Hit, info) -> None:
    hit.hit_id, hit.status, hit.expires_at, hit.error = (
        info.hit_id,
        HitStatus.CREATED,
        info.expires_at,
        "",
    )
    hit.save(update_fields=["hit_id", "status", "expires_at", "error"])
