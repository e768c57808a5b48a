"""Crowd admin pages: publish a batch, follow its progress, review and pay the work.

Adapters only: parse the form, call one service (or enqueue its Celery task), redirect. Only
admins see these pages (403 for everyone else); services check again before spending money.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_POST

from annotate.crowd import limits, selectors, tasks
from annotate.crowd.fake import DEMO_WORKER, FakePlatform, demo_submit_base, state_file
from annotate.crowd.forms import PublishForm
from annotate.crowd.models import (
    Bonus,
    Hit,
    HitStatus,
    PlatformCall,
    Publication,
)
from annotate.crowd.platforms import (
    demo_platform_in_use,
    platform_label,
    platform_names,
    publication_on_other_endpoint,
)
from annotate.crowd.pricing import bonus_fee_terms
from annotate.crowd.services import publishing
from annotate.crowd.services import replacements as replacement_services
from annotate.crowd.services import review as review_services
from annotate.crowd.services.expiry import expiry_run_of
from annotate.errors import (
    AnnotateError,
    CrowdPlatformError,
    NotFoundError,
    PublishError,
    TransientPlatformError,
)
from annotate.http import form_refusal
from annotate.models import Assignment, Batch
from annotate.roles import ADMIN, ADMINS_ONLY, require_role
from annotate.services.background import background_start
from annotate.services.deferred_tasks import task_enqueue_on_commit
from annotate.throttling import polled
from annotate.verbalizer.models import HumanAnswer

# A HIT is extended by at most the longest lifetime MTurk takes (publishing.SECONDS_AT_MOST).
EXTEND_HOURS_AT_MOST = publishing.SECONDS_AT_MOST["lifetime_seconds"] // 3600


def _back(request: HttpRequest) -> HttpResponse:
    """Redirect to the page the admin came from if it is on this site, else to the list."""
    referer = request.META.get("HTTP_REFERER", "")
    if referer and url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(referer)
    return redirect(reverse("crowd:publication-list"))


def admin_page(view):
    """Admins only (others get the 403 page); our errors become a message on the page they came from."""

    @login_required
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        require_role(request.user, ADMIN, message=ADMINS_ONLY)
        try:
            return view(request, *args, **kwargs)
        except NotFoundError:
            raise Http404 from None
        except AnnotateError as error:
            messages.error(request, str(error))
            return _back(request)

    return wrapper


def _enqueue(task, *args) -> None:
    task_enqueue_on_commit(task=task, args=args)


@admin_page
def publish(request: HttpRequest, batch_id: int) -> HttpResponse:
    batch = get_object_or_404(Batch.objects.select_related("project"), pk=batch_id)
    project = batch.project
    initial = {
        "title": limits.title_fitted(f"Judge AI answers: {project.name}"),
        "description": "Read an instruction and AI responses; answer yes/no questions about each.",
        "keywords": "annotation, evaluation, AI, instructions",
        "reward_usd": project.reward_usd,
        "assignment_minutes": project.allotted_minutes,
        "completion_code": project.completion_code,
        "completion_url": project.completion_url,
    }
    form = PublishForm(
        request.POST or None, initial=initial, platforms=platform_names(), completion=True
    )
    preview = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            # Settings the platform would refuse are refused before a total to confirm is shown.
            publishing.publish_settings_check(
                platform_name=data["platform"],
                chosen=form.publish_settings(),
                reward_usd=data["reward_usd"],
            )
            preview = publishing.publication_preview(
                batch=batch,
                platform_name=data["platform"],
                reward_usd=data["reward_usd"],
                user=request.user,
            )
        except PublishError as error:  # beside its field, or above the form (nothing left)
            form_refusal(form, error)
            return render(request, "crowd/publish.html", _publish_context(batch, form, None))
        confirmed = data["confirm_total"] == preview.total_usd and preview.affordable
        if "publish" in request.POST and confirmed:
            publication = publishing.publication_create(
                batch=batch,
                platform_name=data["platform"],
                chosen=form.publish_settings(),
                base_url=publishing.task_base_url(request_base=request.build_absolute_uri("/")),
                user=request.user,
            )
            _enqueue(tasks.publish_publication, publication.pk, request.user.pk)
            return redirect("crowd:publication", publication.pk)
        if "publish" in request.POST:
            messages.warning(request, _not_published_reason(data["confirm_total"], preview))
        form = PublishForm(
            {**request.POST.dict(), "confirm_total": preview.total_usd},
            initial=initial,
            platforms=platform_names(),
            completion=True,
        )
        form.is_valid()
    return render(request, "crowd/publish.html", _publish_context(batch, form, preview))


def _not_published_reason(confirmed_usd: Decimal | None, preview) -> str:
    """Why a press of Confirm published nothing: the balance, or a total other than the one
    the button showed (the settings changed after the preview)."""
    if not preview.affordable:
        return f"Nothing was published: the balance does not cover ${preview.total_usd}."
    if confirmed_usd is None:
        return f"Nothing was published: confirm the total below, ${preview.total_usd}."
    return (
        f"Nothing was published: the total is now ${preview.total_usd}, not the "
        f"${confirmed_usd} you confirmed (the settings changed after the preview). Check the "
        "cost below and confirm again."
    )


# What the publish preview counts in (templates/crowd/publish.html): a batch's tasks and their
# assignments; a verbalizer human study names its own (annotate/verbalizer/crowd_views.py).
BATCH_UNITS = {
    "grid": "Tasks × assignments",
    "work": "Assignments",
    "item": "task",
    "each": "assignment",
}


def _publish_context(batch: Batch, form: PublishForm, preview) -> dict:
    project = batch.project
    return {
        "heading": f"Publish batch “{batch.name}”",
        "summary": f"Project {project.name} · {project.assignments_per_task} workers per task.",
        "form": form,
        "preview": preview,
        "units": BATCH_UNITS,
        # A self-hosted participant with neither is never paid by a site such as Prolific.
        "no_completion": preview is not None
        and preview.paid_outside
        and not any(form.completion().values()),
        "completion_on_form": True,
    }


@admin_page
def publication_list(request: HttpRequest) -> HttpResponse:
    publishing.publications_stalled_mark(now=timezone.now())  # also without a beat (embedded)
    publications = Publication.objects.select_related("batch__project", "human_study")[:200]
    return render(request, "crowd/publication_list.html", {"publications": publications})


@polled  # reloaded every few seconds while the work runs
@admin_page
def publication_detail(request: HttpRequest, publication_id: int) -> HttpResponse:
    publication = selectors.publication_get(publication_id=publication_id)
    # A publish gone silent (its worker killed) is shown stalled, with Resume, not waited for.
    if publication.status in publishing.BUSY and publishing.publications_stalled_mark(
        now=timezone.now(), publication_id=publication.pk
    ):
        publication = selectors.publication_get(publication_id=publication_id)
    demo_worker = publication.platform == "fake" and demo_platform_in_use()
    hits = _hits_with_work(publication)
    progress = selectors.publication_progress(publication=publication)
    busy = publication.status in publishing.BUSY
    context = {
        "publication": publication,
        "progress": progress,
        "note": selectors.publication_note(publication=publication, progress=progress),
        "spending": selectors.publication_spending(publication=publication),
        "busy": busy,
        "expiry_run": expiry_run_of(publication, now=publication.database_now),
        "expiry_stale_seconds": int(settings.CROWD_EXPIRY_STALE_SECONDS),
        **_resume_context(publication, progress, busy=busy),
        "failed_hits": publication.hits.exclude(error="")[:50],
        "hits": hits,
        "join_url": request.build_absolute_uri(
            reverse(
                "verbalizer:crowd-link-join"
                if publication.human_study_id
                else "crowd:selfhosted-join",
                args=[publication.link_token],
            )
        ),
        "anonymous_default": settings.CROWD_ANONYMOUS_STARTS_PER_LINK,
        **_completion_context(publication),
        "demo_worker": demo_worker,
        "demo_unfinished": _demo_unfinished(hits) if demo_worker else [],
    }
    return render(request, "crowd/publication_detail.html", context)


def _resume_context(publication: Publication, progress, *, busy: bool) -> dict:
    """Resume's quote for HITs not made yet or refused (deleted ones were made), their cost
    confirmed again as the first publish's was, with the balance as last checked: a GET asks
    the platform nothing (Check balance and Resume's confirmation do)."""
    if busy or not progress.missing:
        return {}
    if publication_on_other_endpoint(publication):
        return {}  # made on the other MTurk endpoint: refused (the page's sandbox notice says so)
    return {"resume": publishing.publication_resume_quote(publication=publication)}


def _completion_context(publication: Publication) -> dict[str, str]:
    if publication.platform != "selfhosted":
        return {}
    code, url = selectors.completion_of(publication)
    return {"completion_code": code, "completion_url": url}


def _hits_with_work(publication: Publication) -> list[Hit]:
    """The publication's first 500 HITs, each with how many workers took it here and how many
    submitted (`taken`, `submitted`), whether it expired, and for the offline platform whether
    it is full."""
    hits = list(
        publication.hits.select_related(
            "task__instruction", "prompt__item__dataset", "prompt__mapping"
        )[:500]
    )
    hit_ids = [h.hit_id for h in hits if h.hit_id]
    if publication.human_study_id:  # an answer is stored when it is given: taken = submitted
        rows = (
            HumanAnswer.objects.filter(
                study_id=publication.human_study_id,
                platform_hit_id__in=hit_ids,
                annotator__platform=publication.platform,
            )
            .values("platform_hit_id")
            .annotate(taken=Count("id"), submitted=Count("id"))
        )
    else:
        rows = (
            Assignment.objects.filter(
                platform_hit_id__in=hit_ids,
                annotator__platform=publication.platform,  # a link's STUDY_ID is the URL's word
            )
            .values("platform_hit_id")
            .annotate(
                taken=Count("id"), submitted=Count("id", filter=Q(submitted_at__isnull=False))
            )
        )
    work = {row["platform_hit_id"]: row for row in rows.order_by()}
    on_demo_platform = FakePlatform().taken_per_hit() if publication.platform == "fake" else {}
    now = timezone.now()
    for hit in hits:
        row = work.get(hit.hit_id, {})
        hit.taken, hit.submitted = row.get("taken", 0), row.get("submitted", 0)
        hit.on_platform = on_demo_platform.get(hit.hit_id, 0)
        hit.full = hit.on_platform >= hit.max_assignments
        hit.expired = hit.expires_at is not None and hit.expires_at <= now
    return hits


def _demo_unfinished(hits: list[Hit]) -> list[dict]:
    """The demo workers' HITs accepted on the offline platform and not submitted there (the
    admin left the worker's page), each with the ExternalQuestion URL that reopens it as
    MTurk's "continue" does: the same assignment, on to its /crowd/work/<token>/ page."""
    by_hit_id = {hit.hit_id: hit for hit in hits if hit.hit_id and (hit.task_id or hit.prompt_id)}
    unfinished = FakePlatform().accepted_not_submitted(hit_ids=set(by_hit_id))
    return [
        {
            "hit": by_hit_id[row.hit_id],
            "worker_id": row.worker_id,
            "url": _demo_question_url(by_hit_id[row.hit_id], row.assignment_id, row.worker_id),
        }
        for row in unfinished
        if row.worker_id.startswith(DEMO_WORKER)
    ]


def _demo_question_url(hit: Hit, assignment_id: str, worker_id: str) -> str:
    """The ExternalQuestion URL as MTurk opens it for an accepted assignment: an InFoBench
    task's, or a human study prompt's."""
    query = urlencode(
        {
            "assignmentId": assignment_id,
            "hitId": hit.hit_id,
            "workerId": worker_id,
            "turkSubmitTo": demo_submit_base(),
        }
    )
    page = "verbalizer:crowd-mturk" if hit.prompt_id else "crowd:mturk-task"
    return f"{reverse(page, args=[hit.unique_request_token])}?{query}"


@admin_page
def replacements(request: HttpRequest, publication_id: int) -> HttpResponse:
    """Workers in place of work that no longer counts: what is stored here (GET, no platform
    call), the plan and its cost as the platform tells them (POST "check"), asked for once the
    admin confirms the total shown (POST confirm_total)."""
    publication = selectors.publication_get(publication_id=publication_id)
    now = timezone.now()
    if request.method != "POST":
        return _replacements_page(request, publication, now=now, check=False)
    if request.POST.get("action") == "check":
        return _replacements_page(request, publication, now=now, check=True)
    return _replacements_add(request, publication, now=now)


def _replacements_page(
    request: HttpRequest, publication: Publication, *, now, check: bool
) -> HttpResponse:
    """The page; `check`: with what the platform says each HIT still offers, the cost and the
    balance, and the platform's MaxAssignments of the additions to settle (an admin's press,
    never a GET: the calls are slow, rate-limited by MTurk, and fail in an outage)."""
    user = request.user
    plan = (
        replacement_services.replacements_plan(publication_id=publication.pk, now=now, user=user)
        if check
        else None
    )
    context = {
        "publication": publication,
        "plan": plan,
        "needed": replacement_services.replacements_stored_need(
            publication_id=publication.pk, now=now, user=user
        ),
        "additions": replacement_services.additions_overview(
            publication_id=publication.pk, now=now, user=user, ask_platform=check
        ),
    }
    return render(request, "crowd/replacements.html", context)


def _replacements_add(request: HttpRequest, publication: Publication, *, now) -> HttpResponse:
    try:
        confirm = Decimal(request.POST.get("confirm_total", ""))
    except InvalidOperation:
        raise AnnotateError("Confirm the total shown on the page.") from None
    try:
        done = replacement_services.replacements_create(
            publication_id=publication.pk, confirm_total=confirm, now=now, user=request.user
        )
    except TransientPlatformError as error:
        messages.error(
            request,
            f"The platform did not answer ({error}). Nothing is asked twice: press the "
            "button again to go on.",
        )
        return redirect("crowd:replacements", publication.pk)
    except AnnotateError as error:
        messages.error(request, str(error))
        return redirect("crowd:replacements", publication.pk)
    said = []
    if done.added or not done.reopened:
        said.append(
            f"{done.added} assignment{pluralize(done.added)} added to {done.hits} "
            f"HIT{pluralize(done.hits)}"
        )
    if done.reopened:
        said.append(f"{done.reopened} expired HIT{pluralize(done.reopened)} offered again")
    messages.success(request, "; ".join(said) + ".")
    if done.handed_back:
        messages.info(request, done.handed_back)
    for failure in done.failed:
        messages.error(request, f"Not added: {failure}")
    if done.stopped:
        messages.warning(request, replacement_services.LEASE_LOST)
    return redirect("crowd:publication", publication.pk)


# What an admin may say of an addition on the replacements page, and what it does.
SETTLED = {
    "made": "is counted as made: its assignments and cost, and the HIT's assignments here.",
    "not_made": "is settled as not made: never asked for again, nothing counted.",
}


@admin_page
@require_POST
def replacement_settle(request: HttpRequest, publication_id: int) -> HttpResponse:
    """Settle an addition the platform's HIT cannot tell about, as the admin found it on the
    requester site: made (counted) or not made (never asked for again, nothing counted)."""
    publication = selectors.publication_get(publication_id=publication_id)
    outcome = request.POST.get("outcome", "")
    if outcome not in SETTLED:
        raise AnnotateError("Say whether the platform made the addition: made, or not_made.")
    settled = replacement_services.hit_extension_settle(
        publication_id=publication.pk,
        extension_id=_positive_int(request.POST.get("extension"), "extension"),
        made=outcome == "made",
        now=timezone.now(),
        user=request.user,
    )
    what = f"The addition of {settled.count} on HIT {settled.hit.hit_id}"
    messages.success(request, f"{what} {SETTLED[outcome]}")
    return redirect("crowd:replacements", publication.pk)


@admin_page
@require_POST
def publication_action(request: HttpRequest, publication_id: int) -> HttpResponse:
    publication = selectors.publication_get(publication_id=publication_id)
    action, user, now = request.POST.get("action"), request.user, timezone.now()
    if action == "publish":
        review_services.require_admin(user)
        publishing.publication_resume(
            publication_id=publication.pk,
            confirm_total=_confirmed_total(request),
            now=now,
            user=user,
        )
        _enqueue(tasks.publish_publication, publication.pk, user.pk)
        messages.info(
            request, "Publishing the missing HITs: HITs already made are kept, none is doubled."
        )
    elif action == "balance":
        review_services.require_admin(user)
        known = publishing.publication_balance_check(publication_id=publication.pk, user=user)
        label = platform_label(publication.platform)
        messages.info(
            request,
            f"The {label} account has ${known.balance_usd}."
            if known
            else f"{label} has no account balance.",
        )
    elif action == "sync":
        _enqueue(tasks.sync_publication, publication.pk, user.pk)
        messages.info(request, "Syncing assignments from the platform.")
    elif action == "expire":
        left = review_services.publication_expire_start(
            publication_id=publication.pk, now=now, user=user
        )
        # One platform call per live HIT: never in the request (slow, and cut off by the
        # request's timeout in an outage). The HITs are marked first: a run stopped half-way
        # leaves the rest to the sync beat.
        background_start(task=tasks.expire_publication, args=(publication.pk, user.pk))
        messages.info(request, _expiry_started(left))
    elif action == "extend":
        hit_pk = _positive_int(request.POST.get("hit"), "hit")
        hit = get_object_or_404(Hit, pk=hit_pk, publication=publication)
        hours = _positive_int(request.POST.get("hours"), "hours", high=EXTEND_HOURS_AT_MOST)
        base = max(hit.expires_at or now, now)
        review_services.hit_set_expiration(
            hit_pk=hit.pk, expires_at=base + timedelta(hours=hours), user=user
        )
        messages.success(request, f"HIT {hit.hit_id} extended by {hours} hours.")
    elif action in ("close-link", "reopen-link", "link-limit"):
        limit = request.POST.get("anonymous_starts_limit", "").strip()
        closed = {"close-link": True, "reopen-link": False}.get(
            action, publication.link_closed_at is not None
        )
        review_services.publication_link_set(
            publication_id=publication.pk,
            user=user,
            closed=closed,
            anonymous_starts_limit=_positive_int(limit, "anonymous starts", low=0)
            if limit
            else None,
            now=now,
        )
        messages.success(request, "Study link closed." if closed else "Study link open.")
    elif action == "completion":
        review_services.publication_completion_set(
            publication_id=publication.pk,
            user=user,
            completion_code=request.POST.get("completion_code", ""),
            completion_url=request.POST.get("completion_url", ""),
        )
        messages.success(request, "What participants get after the last submit is saved.")
    elif action == "delete":
        deleted, busy = review_services.publication_delete_finished(
            publication_id=publication.pk, user=user
        )
        messages.success(request, f"{deleted} finished HITs deleted; {busy} still have work.")
    else:
        raise AnnotateError(f"Unknown action '{action}'.")
    return redirect("crowd:publication", publication.pk)


def _expiry_started(left: int) -> str:
    """What an Expire pressed does next: the platform asked about each live HIT, in the
    background."""
    if not left:
        return (
            "Expired: no HIT of it is live here. HITs a stopped publish may have made on the "
            "platform are looked for in the background, and expired too."
        )
    stays = pluralize(left, "it stays,they stay")
    return (
        f"Expiring {left} HIT{pluralize(left)}: the platform is asked in the background, and "
        f"this page shows what it confirms. Until it does, {stays} marked live here; should it "
        "not answer, the sync beat asks again."
    )


@admin_page
@require_POST
def demo_worker_start(request: HttpRequest, hit_pk: int) -> HttpResponse:
    """Accept an offline demo HIT as a new demo worker and open it as MTurk would (the
    ExternalQuestion URL with assignmentId, hitId, workerId and turkSubmitTo)."""
    if not demo_platform_in_use():
        raise NotFoundError("The offline demo platform is not in use.")
    hit = get_object_or_404(
        Hit.objects.filter(Q(task__isnull=False) | Q(prompt__isnull=False)),
        pk=hit_pk,
        publication__platform="fake",
        status=HitStatus.CREATED,
    )
    platform = FakePlatform()
    try:
        on_platform = platform.hit_get(hit_id=hit.hit_id)
    except CrowdPlatformError as error:
        raise AnnotateError(
            f"{error} The offline demo platform keeps its HITs in {state_file()}, and this one "
            "is not there: that file was deleted, or the server runs with another VAR_DIR or "
            "CROWD_FAKE_STATE_FILE. A demo worker's claim on it is released when its time runs "
            "out, as any other."
        ) from None
    if on_platform.expires_at is not None and on_platform.expires_at <= timezone.now():
        raise AnnotateError(
            f"HIT {hit.hit_id} has expired: no worker can take it. Extend it to let them."
        )
    # Not a demo worker who did this instruction in another study: the claim would refuse them.
    # (A study's prompt is answered once per worker in its study, and a study is published
    # once per platform: the platform's own "not taken yet" is the rule there.)
    done_it = (
        selectors.platform_workers_of_instruction(
            platform="fake", instruction_id=hit.task.instruction_id
        )
        if hit.task_id
        else set()
    )
    worker_id = platform.next_demo_worker(hit_id=hit.hit_id, exclude=done_it)
    try:
        assignment_id = platform.worker_accept(hit_id=hit.hit_id, worker_id=worker_id)
    except CrowdPlatformError:
        raise AnnotateError("Every worker this HIT asked for has taken it already.") from None
    return redirect(_demo_question_url(hit, assignment_id, worker_id))


def _confirmed_total(request: HttpRequest) -> Decimal:
    try:
        return Decimal(request.POST.get("confirm_total", ""))
    except InvalidOperation:
        raise AnnotateError("Confirm the total shown on the page.") from None


def _positive_int(value: str | None, name: str, low: int = 1, high: int | None = None) -> int:
    try:
        number = int(value or "")
    except ValueError:
        raise AnnotateError(f"{name} must be a whole number.") from None
    if number < low:
        raise AnnotateError(f"{name} must be at least {low}.")
    if high is not None and number > high:
        raise AnnotateError(f"{name} must be at most {high}.")
    return number


@admin_page
def review(request: HttpRequest, publication_id: int) -> HttpResponse:
    publication = selectors.publication_get(publication_id=publication_id)
    if publication.human_study_id:  # a human study's answers are reviewed with their prompts
        return redirect("verbalizer:crowd-review", publication.pk)
    context = {
        "publication": publication,
        "rows": selectors.review_rows(publication=publication),
        "never_submitted": selectors.never_submitted(publication=publication),
        "reconciliation": selectors.reconciliation(publication=publication),
        "platform_confirms": review_services.platform_confirms(publication.platform),
        **bonus_form_context(publication),
    }
    return render(request, "crowd/review.html", context)


def bonus_form_context(publication) -> dict:
    """What a review page's bonus forms show: the most a bonus may be, and the terms of its fee
    (the confirm, built in the browser, prices the amount typed: static/annotate/site.js); and
    the longest feedback its approve, reject and bonus forms take, and the longest subject and
    text of a message to a worker (the browser stops the typing there rather than losing a
    longer text to the refusal: annotate.crowd.limits)."""
    return {
        "feedback_max": limits.FEEDBACK_MAX_CHARS,
        "subject_max": limits.SUBJECT_MAX_CHARS,
        "message_max": limits.MESSAGE_MAX_CHARS,
        "bonus_max": review_services.bonus_max_usd(),
        "bonus_fee": bonus_fee_terms(flat_rate=publication.fee_rate),
    }


@admin_page
@require_POST
def review_sync(request: HttpRequest, publication_id: int) -> HttpResponse:
    """Sync the publication (a batch's or a human study's) with its platform in this request,
    and say what changed."""
    publication = selectors.publication_get(publication_id=publication_id)
    if not review_services.platform_confirms(publication.platform):
        raise AnnotateError("A self-hosted link has no platform to sync with.")
    try:
        changes = review_services.publication_sync_reported(
            publication_id=publication.pk, now=timezone.now(), user=request.user
        )
    except CrowdPlatformError as error:
        messages.error(
            request,
            f"The sync stopped: {error} The HITs synced before it are kept; sync again later.",
        )
    else:
        messages.success(request, sync_message(changes, platform=publication.platform))
    # A human study's publication is reviewed on its own page, which has this button too.
    return redirect(
        "verbalizer:crowd-review" if publication.human_study_id else "crowd:review", publication.pk
    )


def sync_message(changes: review_services.SyncChanges, *, platform: str) -> str:
    """What a sync changed, in a sentence for the review page."""
    result = changes.result
    head = (
        f"Synced {result.hits} HIT{pluralize(result.hits)} with {platform_label(platform)} "
        f"({result.seen} assignment{pluralize(result.seen)} listed there)"
    )
    parts = [
        f"{count} {text}"
        for count, text in (
            (changes.confirmed, "newly confirmed by the platform"),
            (changes.approved, "approved by the platform (its auto-approval delay ended)"),
            (changes.rejected, "rejected on the platform"),
            (changes.released, "not found there for their worker: their task slots are freed"),
            (changes.restored, "confirmed after their slots were freed: they hold them again"),
        )
        if count
    ]
    message = f"{head}: {'; '.join(parts) if parts else 'nothing changed'}."
    if result.missing_here:
        message += (
            f" {result.missing_here} assignment{pluralize(result.missing_here)} on the platform "
            "with no work here: see Needs attention."
        )
    return message


def rejected_message(work) -> str:
    """What a reject did: told the platform too, or (work it does not know) here only."""
    if review_services.platform_has_verdict_of(work):
        return "Rejected."
    return (
        "Rejected here only: the platform does not know this assignment for this worker "
        "(forged, or not handed back yet), so it was not told. If it arrives there, a sync "
        "shows it on this page with a button to reject it there too."
    )


def bonus_sent_message(bonus: Bonus, *, asked_at) -> str:
    """What a press of the bonus form did: a new bonus sent, or the form sent again (its
    request token made this bonus before `asked_at`: the Back button, a double click), which
    paid nothing more whatever amount or reason it carried now."""
    if bonus.created_at < asked_at:
        return (
            f"This bonus form was sent before: the bonus of ${bonus.amount_usd} it made then "
            f"(reason: “{bonus.reason}”) is the one paid, and nothing more was paid now. "
            "Reload the review page to send another bonus."
        )
    return f"Bonus of ${bonus.amount_usd} sent for payment."


def bonus_amount(request: HttpRequest) -> Decimal:
    """The bonus form's amount in dollars."""
    try:
        return Decimal(request.POST.get("amount", ""))
    except InvalidOperation:
        raise AnnotateError("The bonus amount must be a number such as 0.50.") from None


@admin_page
@require_POST
def assignment_action(request: HttpRequest, assignment_id: int) -> HttpResponse:
    action, user = request.POST.get("action"), request.user
    feedback = request.POST.get("feedback", "")
    if action == "approve":
        review_services.assignment_approve(
            assignment_id=assignment_id, user=user, feedback=feedback
        )
        messages.success(request, "Approved.")
    elif action == "reject":
        done = review_services.assignment_reject(
            assignment_id=assignment_id, user=user, feedback=feedback
        )
        messages.success(request, rejected_message(done))
    elif action == "bonus":
        asked_at = timezone.now()
        bonus = review_services.bonus_create(
            assignment_id=assignment_id, amount_usd=bonus_amount(request), reason=feedback,
            user=user, request_token=request.POST.get("request_token", ""), now=asked_at,
        )  # fmt: skip
        _enqueue(tasks.pay_bonus, bonus.pk, user.pk)
        messages.success(request, bonus_sent_message(bonus, asked_at=asked_at))
    else:
        raise AnnotateError(f"Unknown action '{action}'.")
    return _back(request)


@admin_page
@require_POST
def worker_action(request: HttpRequest, annotator_id: int) -> HttpResponse:
    action, user, reason = request.POST.get("action"), request.user, request.POST.get("reason", "")
    if action == "block":
        block = review_services.worker_block(annotator_id=annotator_id, reason=reason, user=user)
        messages.success(request, blocked_message(block.annotator.platform))
        if note := review_services.platform_not_told(block.annotator, done="blocked"):
            messages.warning(request, note)
        waiting = selectors.worker_unreviewed_count(annotator_id=annotator_id)
        if waiting and block.annotator.platform != "selfhosted":
            messages.warning(
                request,
                f"Still waiting for review: {waiting} of their submissions. The platform "
                "approves and pays each when the auto-approval delay ends (and the cost table "
                "counts it once a sync sees that), unless you reject it first.",
            )
    elif action == "unblock":
        done = review_services.worker_unblock(annotator_id=annotator_id, reason=reason, user=user)
        messages.success(request, unblocked_message(done))
        if done.platform_note:
            messages.warning(request, done.platform_note)
    elif action == "notify":
        done = review_services.workers_notify(
            annotator_ids=[annotator_id],
            subject=request.POST.get("subject", ""),
            message=request.POST.get("message", ""),
            user=user,
        )
        if done.not_sent:
            messages.warning(request, review_services.web_accounts_unreachable(done.not_sent))
        if done.unknown_ids:
            messages.warning(request, review_services.ids_never_given(done.unknown_ids))
        sent = "Message sent." if not done.failed else f"Not delivered: {done.failed}"
        messages.success(request, sent)
    else:
        raise AnnotateError(f"Unknown action '{action}'.")
    return _back(request)


@admin_page
def call_list(request: HttpRequest) -> HttpResponse:
    calls = PlatformCall.objects.select_related("user")[:300]
    return render(request, "crowd/calls.html", {"calls": calls})


def blocked_message(platform: str) -> str:
    """What a block did, by where the worker came from: MTurk, a self-hosted link (no HITs: the
    link offers the tasks), or a web account (platform ""), which no platform knows: this site
    refuses its next claim, prompt and answer (assignments.annotator_locked_unblocked), and its
    next revision session and instruction (assignments.account_block_check)."""
    if not platform:
        return (
            "Web account blocked: their work counts in no result, their claims were ended, and "
            "their work no longer holds its tasks' slots or its study items' places: those go "
            "to the project's or study's other annotators. They get no more tasks, study "
            "prompts or revision sessions here, nor a new instruction in a session in progress "
            "(they are told their account is blocked from new work). No platform "
            "was told: a web account has none. They can still log in and see their recent "
            "assignments and rejected answers (not their studies); "
            "to keep them out altogether, deactivate their user account (Django admin, Users: "
            "Active)."
        )
    offered_to = (
        "participants of the link."
        if platform == "selfhosted"
        else 'workers (on Mechanical Turk through "Workers in place of rejected work").'
    )
    return (
        "Worker blocked: no more of our tasks, and their work counts in no result. Their "
        "work and claims no longer hold their tasks' slots: those tasks are offered to other "
        + offered_to
    )


def unblocked_message(done: review_services.Unblocked) -> str:
    message = f"Worker unblocked: {done.restored} of their submissions count again."
    if done.left_out:
        message += (
            f" {done.left_out} stay out of the results, kept: their tasks got the answers they "
            "need from other workers meanwhile."
        )
    return message
