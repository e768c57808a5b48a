"""A human study on the crowd platforms: one HIT per prompt on MTurk (or the fake platform), or a
self-hosted link that hands out the study's prompts one after the other.

Publishing, worker identities, confirmation by the platform, review and blocks are the crowd
app's (annotate.crowd): a study's publication is a `Publication` whose `human_study` is set and
whose HITs point at prompts; a crowd worker's answer is a `HumanAnswer` carrying the platform's
assignment and HIT ids, and counts under annotate.selectors.results like any crowd work.

Inside MTurk's iframe there is no session: the accepted assignment travels in a signed token
(django.core.signing) naming the HIT, the assignment id, the worker and the validated
turkSubmitTo address; a self-hosted participant's token names the publication and the worker.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal

from django.core import signing
from django.db import transaction

from annotate.crowd.models import Hit, HitStatus, Publication, WorkerBlock, crowd_worker_q
from annotate.crowd.platforms import get_platform, platform_class, platform_on_sandbox
from annotate.crowd.pricing import assignments_cost, fee_description, fee_override
from annotate.crowd.services import publishing, workers
from annotate.crowd.services.publishing import CostPreview, PublishSettings
from annotate.errors import ConflictError, NotFoundError, PermissionDeniedError, PublishError
from annotate.models import Annotator, AnnotatorKind
from annotate.verbalizer.models import HumanAnswer, HumanStudy, Prompt
from annotate.verbalizer.services.humans import (
    HumanStudyError,
    channel_places_free,
    human_answer_submit_within_limit,
    human_work_next,
)

DEFAULT_REWARD_USD = Decimal("0.05")  # one prompt, a few seconds of reading
MTURK_SALT = "annotate.verbalizer.crowd.mturk"
LINK_SALT = "annotate.verbalizer.crowd.link"
TOKEN_MAX_AGE = 14 * 24 * 3600


# --- Publishing ---------------------------------------------------------------------------


def study_publication_preview(
    *, study: HumanStudy, platform_name: str, reward_usd: Decimal | None = None, user=None
) -> CostPreview:
    """What publishing the study would cost: prompts × answers per prompt × (reward + fee), each
    prompt a HIT of answers per prompt assignments (pricing.assignments_cost); through a self-hosted
    link, no fee, and paid on the recruiting site (as for a batch)."""
    publishing.platform_check(platform_name)
    publishing.published_check(target={"human_study": study}, platform_name=platform_name)
    reward = DEFAULT_REWARD_USD if reward_usd is None else reward_usd
    publishing.reward_check(platform_name=platform_name, reward_usd=reward)
    prompts = study.prompts.count()
    platform = get_platform(platform_name, user=user)
    fee = fee_override() if platform.pays_workers else Decimal(0)
    hits = [study.answers_per_prompt] * prompts
    total = assignments_cost(hits=[(n, n) for n in hits], reward_usd=reward, flat_rate=fee)
    return CostPreview(
        platform=platform_name,
        tasks=prompts,
        assignments_per_task=study.answers_per_prompt,
        reward_usd=reward,
        fee_rate=fee,
        total_usd=total,
        balance_usd=publishing.account_balance_check(
            platform=platform,
            platform_name=platform_name,
            sandbox=platform_on_sandbox(platform_name),
        ),
        paid_outside=not platform.pays_workers,
        assignments=prompts * study.answers_per_prompt,
        tasks_in_batch=prompts,
        fee=fee_description(flat_rate=fee, max_assignments=hits),
        **publishing.published_elsewhere(
            target={"human_study": study}, platform_name=platform_name
        ),
    )


@transaction.atomic
def study_publication_create(
    *, study: HumanStudy, platform_name: str, chosen: PublishSettings, base_url: str, user=None
) -> Publication:
    """Store the study's publication and one HIT row (with its token) per prompt; nothing is
    spent until `annotate.crowd.services.publishing.publication_publish` runs."""
    publishing.platform_check(platform_name)
    if not study.active:
        raise PublishError(f"Study '{study.name}' is closed; open it before publishing.")
    publishing.published_check(target={"human_study": study}, platform_name=platform_name)
    reward = DEFAULT_REWARD_USD if chosen.reward_usd is None else chosen.reward_usd
    publishing.publish_settings_check(platform_name=platform_name, chosen=chosen, reward_usd=reward)
    publication = publishing.publication_store(
        target={"human_study": study},
        platform_name=platform_name,
        chosen=chosen,
        reward_usd=reward,
        assignments_per_task=study.answers_per_prompt,
        base_url=base_url,
        user=user,
    )
    if platform_class(platform_name).creates_hits:
        Hit.objects.bulk_create(
            Hit(
                publication=publication,
                prompt_id=prompt_id,
                max_assignments=study.answers_per_prompt,
                unique_request_token=uuid.uuid4().hex,
            )
            for prompt_id in study.prompts.order_by("id").values_list("id", flat=True)
        )
    return publication


# --- MTurk: one HIT per prompt ------------------------------------------------------------


@dataclass(frozen=True)
class CrowdPromptTicket:
    """An admitted MTurk worker on a study's HIT: the prompt, and the token to answer it with."""

    hit: Hit
    prompt: Prompt
    annotator: Annotator
    assignment_id: str
    submit_to: str
    token: str
    answer: HumanAnswer | None  # the worker's answer if they gave it already (a reload)

    @property
    def external_submit_url(self) -> str:
        return f"{self.submit_to}/mturk/externalSubmit"


def study_hit_get(*, hit_token: str) -> Hit:
    """A study's HIT by the token in its ExternalQuestion URL; anything else is a 404."""
    hit = (
        Hit.objects.select_related("publication__human_study", "prompt")
        .filter(unique_request_token=hit_token, prompt__isnull=False)
        .first()
    )
    if hit is None:
        raise NotFoundError("No such task.")
    return hit


def study_hit_preview(*, hit: Hit) -> Prompt:
    """The prompt a worker sees before accepting the HIT."""
    if hit.status != HitStatus.CREATED:
        raise NotFoundError("This HIT is not one of ours.")
    return hit.prompt


def mturk_prompt_open(
    *, hit: Hit, assignment_id: str, hit_id: str, worker_id: str, turk_submit_to: str
) -> CrowdPromptTicket:
    """Admit an accepted MTurk assignment on a study's HIT (the crowd app's checks: our HIT,
    MTurk's submit host, what the platform reported, blocks, MaxAssignments confirmed workers);
    a refused demo worker gives the offline platform's HIT back. A refused worker leaves no
    worker record (one transaction, as for a batch's HIT)."""
    with (
        workers.demo_hit_returned_when_refused(
            hit=hit, assignment_id=assignment_id, worker_id=worker_id
        ),
        transaction.atomic(),
    ):
        admitted = workers.mturk_worker_admit(
            hit=hit,
            assignment_id=assignment_id,
            hit_id=hit_id,
            worker_id=worker_id,
            turk_submit_to=turk_submit_to,
        )
        answer = _answer_of(
            hit=hit, annotator=admitted.annotator, assignment_id=admitted.assignment_id
        )
        if answer is None:
            workers.worker_slot_check(hit=hit, worker_id=admitted.annotator.worker_id)
    token = signing.dumps(
        {
            "h": hit.pk,
            "a": admitted.assignment_id,
            "w": admitted.annotator.pk,
            "s": admitted.submit_to,
        },
        salt=MTURK_SALT,
        compress=True,
    )
    return CrowdPromptTicket(
        hit=hit,
        prompt=hit.prompt,
        annotator=admitted.annotator,
        assignment_id=admitted.assignment_id,
        submit_to=admitted.submit_to,
        token=token,
        answer=answer,
    )


def _answer_of(*, hit: Hit, annotator: Annotator, assignment_id: str) -> HumanAnswer | None:
    """The worker's earlier answer on this HIT's prompt: the same assignment (a reload) is
    returned; an answer under another assignment, or in another study sharing the prompt
    (reports read one answer per person and prompt), means the work is done already."""
    earlier = HumanAnswer.objects.filter(prompt_id=hit.prompt_id, annotator=annotator).first()
    if earlier is not None and (
        earlier.study_id != hit.publication.human_study_id
        or earlier.platform_assignment_id != assignment_id
    ):
        raise ConflictError("You have already answered this item; please return the HIT.")
    return earlier


def mturk_ticket_get(*, token: str) -> CrowdPromptTicket:
    """The ticket a signed answer token names; a bad or old token is a 404."""
    try:
        data = signing.loads(token, salt=MTURK_SALT, max_age=TOKEN_MAX_AGE)
        hit = Hit.objects.select_related("publication__human_study", "prompt").get(
            pk=data["h"], prompt__isnull=False
        )
        annotator = Annotator.objects.get(crowd_worker_q(), pk=data["w"])
    except (signing.BadSignature, KeyError, TypeError, Hit.DoesNotExist, Annotator.DoesNotExist):
        raise NotFoundError("This task link is not valid (or has expired).") from None
    answer = HumanAnswer.objects.filter(
        study_id=hit.publication.human_study_id, prompt_id=hit.prompt_id, annotator=annotator
    ).first()
    return CrowdPromptTicket(
        hit=hit,
        prompt=hit.prompt,
        annotator=annotator,
        assignment_id=data["a"],
        submit_to=data["s"],
        token=token,
        answer=answer,
    )


def mturk_answer_submit(
    *, ticket: CrowdPromptTicket, key: int, seconds: float | None
) -> HumanAnswer:
    """Store the worker's answer (key 1 or 2) to the HIT's prompt, once, with the platform's
    assignment and HIT ids. It counts once the platform confirms the assignment.

    The answer is the worker's (one per worker and prompt, as a batch's work is one per worker
    and task); the assignment id is only what their page says. Another worker's answer under
    the same id (a forger who typed it before the worker answered) refuses no one: the
    platform confirms the id for one worker and HIT, and only that worker's answer counts
    (review._hit_store). One answer per assignment id refused the honest worker's own.

    The worker is admitted again (a sync or a block may have come since the prompt opened)
    in the answer's transaction: the admission locks the worker's row before it reads their
    block, as a block takes that row before anything else (review.worker_block), and holds it
    to the store. A block committing meanwhile either is read here (refused, nothing stored)
    or waits for the answer, and then treats it as any answer of a blocked worker. Admitted
    before the transaction, a block committing between the admission and the store let a
    blocked worker's answer in, and told them it was saved."""
    hit = ticket.hit
    study = hit.publication.human_study
    word = _word(ticket.prompt, key, seconds)
    with transaction.atomic():
        annotator = workers.mturk_worker_admit(
            hit=hit,
            assignment_id=ticket.assignment_id,
            hit_id=hit.hit_id,
            worker_id=ticket.annotator.worker_id,
            turk_submit_to=ticket.submit_to,
        ).annotator
        # One worker at a time; no ordering, whose join to the (null) task FOR UPDATE refuses.
        Hit.objects.select_for_update().filter(pk=hit.pk).order_by().first()
        earlier = _answer_of(hit=hit, annotator=annotator, assignment_id=ticket.assignment_id)
        if earlier is not None:
            if earlier.word != word:
                raise ConflictError("You answered this item already; answers cannot change.")
            return earlier
        workers.worker_slot_check(hit=hit, worker_id=annotator.worker_id)
        return HumanAnswer.objects.create(
            study=study,
            prompt=ticket.prompt,
            annotator=annotator,
            word=word,
            seconds=seconds,
            platform_assignment_id=ticket.assignment_id,
            platform_hit_id=hit.hit_id,
            place_released=_in_house_full(study=study, prompt=ticket.prompt, annotator=annotator),
        )


def _in_house_full(*, study: HumanStudy, prompt: Prompt, annotator: Annotator) -> bool:
    """Whether the answer of a platform's worker counted as an expert finds the in-house
    channel's places of the prompt taken (channel_places_free, the per-prompt limit's count),
    under the study's row that in-house answers take turns on, after the HIT's (review.
    _turns_of). Such an answer is kept and paid and waits for a place, as a released one does
    (place_released; review hands on every in-house place that frees, on whichever HIT:
    _in_house_places_handed_on): the HIT's MaxAssignments alone let the in-house channel count
    four answers of three. A crowd worker's answer has the HIT's limit and is never full."""
    if annotator.kind == AnnotatorKind.CROWD:
        return False
    HumanStudy.objects.select_for_update().filter(pk=study.pk).first()
    return channel_places_free(study=study, prompt_id=prompt.pk, channel=annotator) <= 0


def _word(prompt: Prompt, key: int, seconds: float | None) -> str:
    if key not in (1, 2):
        raise HumanStudyError("key: answer with 1 or 2")
    if seconds is not None and not 0 <= seconds <= 24 * 3600:
        raise HumanStudyError("seconds: between 0 and 86400")
    return prompt.positive_word if key == 1 else prompt.negative_word


# --- Self-hosted links ----------------------------------------------------------------------


@dataclass(frozen=True)
class LinkParticipant:
    publication: Publication
    annotator: Annotator
    token: str


def study_link_get(*, link_token: str) -> Publication:
    return workers.publication_for_link(link_token=link_token, human_study=True)


def study_link_start(*, publication: Publication, params: dict[str, str]) -> LinkParticipant:
    """A participant starts on a study's link: their id from the URL (PROLIFIC_PID, workerId)
    or a new anonymous one, within the link's cap on anonymous starts; a closed link refuses."""
    workers.link_open_check(publication=publication)
    worker_id = workers.selfhosted_worker_id(params)
    with transaction.atomic():
        if not worker_id:
            workers.anonymous_start_check(publication=publication)
            worker_id = workers.anonymous_worker_id(publication=publication)
        annotator = workers.crowd_worker_get_or_create(platform="selfhosted", worker_id=worker_id)
    token = signing.dumps({"p": publication.pk, "w": annotator.pk}, salt=LINK_SALT, compress=True)
    return LinkParticipant(publication=publication, annotator=annotator, token=token)


def study_link_start_offered(*, publication: Publication, params: dict[str, str]) -> bool:
    """Whether a study link's join page offers Start: to a participant with answers in the
    study or a prompt left for them, as their work page would choose it (human_work_next); a
    newcomer is asked about as an annotator of the link's channel with no answer yet."""
    worker_id = workers.selfhosted_worker_id(params).strip()
    annotator = (
        Annotator.objects.filter(platform="selfhosted", worker_id=worker_id).first()
        if worker_id
        else None
    )
    if annotator is None:  # never saved: id 0 is no row's, so it has answered nothing
        annotator = Annotator(pk=0, kind=AnnotatorKind.CROWD, platform="selfhosted")
    prompt, done, _ = human_work_next(study=publication.human_study, annotator=annotator)
    return prompt is not None or done > 0


def link_participant_get(*, token: str) -> LinkParticipant:
    try:
        data = signing.loads(token, salt=LINK_SALT, max_age=TOKEN_MAX_AGE)
        publication = Publication.objects.select_related("human_study").get(
            pk=data["p"], platform="selfhosted", human_study__isnull=False
        )
        annotator = Annotator.objects.get(pk=data["w"], platform="selfhosted")
    except (signing.BadSignature, KeyError, TypeError, Publication.DoesNotExist,
            Annotator.DoesNotExist):  # fmt: skip
        raise NotFoundError("This study link is not valid (or has expired).") from None
    return LinkParticipant(publication=publication, annotator=annotator, token=token)


def link_work_next(*, participant: LinkParticipant) -> tuple[Prompt | None, int, int]:
    """The participant's next prompt, their answers so far and the study's prompts
    (human_work_next), unless they are blocked."""
    if WorkerBlock.objects.filter(annotator=participant.annotator, active=True).exists():
        raise PermissionDeniedError("Sorry, you can no longer take tasks from this requester.")
    return human_work_next(
        study=participant.publication.human_study, annotator=participant.annotator
    )


def link_answer_submit(
    *, participant: LinkParticipant, prompt_id: int, key: int, seconds: float | None
) -> HumanAnswer:
    """Store a self-hosted participant's answer: one per participant and prompt, and no more
    than the study's answers per prompt from the link's participants, who take turns on the
    link's row (workers.study_link_lock, as a place given back or handed on does).

    The participant's row is locked (FOR NO KEY UPDATE, as a block takes it: review.
    worker_block) before their block is read, to the end of the answer's transaction: a block
    committing meanwhile either waits for the answer or is read here. Read before that lock,
    a block committing in between let a blocked participant's answer in, counted nowhere but
    filling one of the prompt's places, which were then not offered to anybody else."""
    study = participant.publication.human_study
    with transaction.atomic():
        # Read again under its lock: a kind decided meanwhile (crowd or in-house) is the one
        # whose channel, and lock, the answer takes.
        annotator = (
            Annotator.objects.select_for_update(no_key=True)
            .filter(pk=participant.annotator.pk)
            .order_by()
            .first()
        )
        if WorkerBlock.objects.filter(annotator=annotator, active=True).exists():
            raise PermissionDeniedError("Sorry, you can no longer take tasks from this requester.")
        workers.study_link_lock(human_study_id=study.pk)
        if annotator.kind != AnnotatorKind.CROWD:
            # Counted as an expert: their answer is in-house (same_channel_q), and in-house
            # answers take turns on the study's row (human_work_answer_submit), after the
            # link's here as wherever both are taken (review._turns_of).
            HumanStudy.objects.select_for_update().filter(pk=study.pk).first()
        return human_answer_submit_within_limit(
            study=study, prompt_id=prompt_id, annotator=annotator, key=key, seconds=seconds
        )
