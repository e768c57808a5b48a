"""Publish a batch to a crowd platform: preview the cost, then create one HIT per task.

Every HIT's UniqueRequestToken is stored before the HIT is asked for, so a publish that is retried
(a lost reply, a worker killed half-way, an admin pressing the button twice) finds the HITs made
by earlier tries instead of paying for them twice.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.db.models import Count
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
from annotate.crowd.models import Hit, HitStatus, Publication, PublicationStatus
from annotate.crowd.platforms import get_platform, platform_class, platform_label, platform_names
from annotate.crowd.pricing import assignments_cost, fee_description, fee_override
from annotate.errors import (
    CrowdPlatformError,
    HitAlreadyExistsError,
    PublishError,
    TransientPlatformError,
)
from annotate.models import Batch
from annotate.services.assignments import counted_assignments

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
        balance_usd=platform.account_balance(),
        paid_outside=not platform.pays_workers,
        assignments=assignments,
        assignments_taken=len(still_open) * per_task - assignments,
        tasks_in_batch=len(still_open),
        fee=fee_description(flat_rate=fee, max_assignments=hits),
    )


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
    """Refuse settings no platform takes: no title or description, no reward, too short or too
    long times."""
    if not chosen.title.strip() or not chosen.description.strip():
        raise PublishError("Title and description are required: workers choose HITs by them.")
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
    total the app shows, confirms or reports counts (pricing)."""
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


def publication_publish(*, publication_id: int, now: datetime, user=None) -> Publication:
    """Create the HIT type and every missing HIT. Safe to run twice, or after a crash.

    Raises TransientPlatformError (after marking the publication partial) when the platform keeps
    throttling: the caller retries later and this picks up where it stopped.
    """
    publication = Publication.objects.get(pk=publication_id)
    platform = get_platform(publication.platform, user=user)
    if not platform.creates_hits:
        return _finish(publication, PublicationStatus.PUBLISHED, now=now)
    publication.status = PublicationStatus.PUBLISHING
    publication.save(update_fields=["status"])
    try:
        _ensure_hit_type(publication, platform)
        missing = list(
            publication.hits.exclude(status=HitStatus.CREATED)
            .select_related("publication")
            .order_by("id")
        )
        if missing and publication.created_at <= now - TOKENS_KEPT:
            missing = _adopt_made_before(missing, platform)
        for hit in missing:
            _hit_publish(hit, platform)
    except TransientPlatformError as error:
        _finish(publication, PublicationStatus.PARTIAL, now=now, error=str(error))
        raise
    except CrowdPlatformError as error:  # the HIT type itself was refused
        return _finish(publication, PublicationStatus.FAILED, now=now, error=str(error))
    missing = publication.hits.exclude(status=HitStatus.CREATED).count()
    if missing:
        return _finish(
            publication,
            PublicationStatus.PARTIAL,
            now=now,
            error=f"{missing} of {publication.hits.count()} HITs were not created; see each HIT.",
        )
    return _finish(publication, PublicationStatus.PUBLISHED, now=now)


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


def _finish(publication: Publication, status: str, *, now: datetime, error: str = ""):
    publication.status, publication.error, publication.finished_at = status, error, now
    publication.save(update_fields=["status", "error", "finished_at"])
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
