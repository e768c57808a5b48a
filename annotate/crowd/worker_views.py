"""Pages crowd workers see: an MTurk HIT (preview, then accepted), a self-hosted study link, the
task page and what follows the submit. No login and no session: the signed token in the URL is
the worker's key, so these views are CSRF-exempt (the token is the unguessable part).

Only these pages may be framed, and only by MTurk's origins (CROWD_FRAME_ANCESTORS).
"""

from __future__ import annotations

import functools
import secrets
from dataclasses import replace

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from annotate.crowd import selectors as crowd_selectors
from annotate.crowd.fake import FakePlatform
from annotate.crowd.models import Publication
from annotate.crowd.platforms import demo_platform_in_use
from annotate.crowd.selectors import Confirmation
from annotate.crowd.services import workers
from annotate.crowd.services.addresses import AddressClaims
from annotate.errors import (
    AnnotateError,
    CrowdPlatformError,
    NotFoundError,
    NoWorkError,
    RateLimitedError,
    SubmissionError,
    WorkerBlockedError,
)
from annotate.http import csp_replace_on
from annotate.models import AssignmentStatus
from annotate.roles import is_admin
from annotate.selectors import work as work_selectors
from annotate.services.assignments import claimable_task_ids
from annotate.services.submissions import assignment_submit
from annotate.throttling import (
    CROWD_PAGES_SCOPE,
    CROWD_STARTS_SCOPE,
    OWN_LIMIT,
    client_address,
    page_rate_check,
)

RESERVED_FIELDS = {"csrfmiddlewaretoken", "active_seconds"}


def worker_page(view):
    """Frameable by MTurk, no CSRF cookie needed, rate-limited per address (no login limits
    anyone here), never cached, our errors as a short page."""

    @csrf_exempt
    @xframe_options_exempt
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            page_rate_check(request, scope=CROWD_PAGES_SCOPE)
            response = view(request, *args, **kwargs)
        except NotFoundError:
            raise Http404 from None
        except AnnotateError as error:
            response = render(
                request,
                "crowd/worker_message.html",
                {"message": str(error), "title": getattr(error, "title", "")},
                status=error.http_status,
            )
            if isinstance(error, RateLimitedError):
                response["Retry-After"] = str(error.retry_after)
        # A worker's task and answers are never kept by a shared computer's back button or a
        # proxy for the next person.
        add_never_cache_headers(response)
        # The site's policy (CONTENT_SECURITY_POLICY), but framed by MTurk's origins.
        return csp_replace_on(response, {"frame-ancestors": list(settings.CROWD_FRAME_ANCESTORS)})

    wrapper.page_limit = OWN_LIMIT  # every request counted above, per address
    return wrapper


@worker_page
@require_http_methods(["GET"])
def mturk_task(request: HttpRequest, hit_token: str) -> HttpResponse:
    """The ExternalQuestion URL. MTurk adds assignmentId, hitId, workerId and turkSubmitTo."""
    hit = workers.hit_get_for_worker(hit_token=hit_token)
    params = request.GET
    if workers.is_preview(params.get("assignmentId", "")):
        task = workers.task_of_hit_for_preview(hit=hit)
        page = work_selectors.task_page_preview(task=task, seed=secrets.randbits(62))
        # Deciding whether to accept, a worker reads the guidelines first.
        return render(request, "crowd/task.html", {"page": page, "guidelines_open": True})
    now = timezone.now()
    claims = AddressClaims(address=client_address(request), now=now)
    with claims.one_at_a_time():
        opened = workers.mturk_assignment_open(
            hit=hit,
            assignment_id=params.get("assignmentId", ""),
            hit_id=params.get("hitId", ""),
            worker_id=params.get("workerId", ""),
            turk_submit_to=params.get("turkSubmitTo", ""),
            now=now,
            browser_claims=workers.claims_of_browser(request.COOKIES),
            new_claim_check=claims.check,
        )
        claims.record(opened.assignment)
    response = redirect("crowd:work-task", token=opened.token)
    # Inside MTurk's frame: a third-party cookie, where the browser keeps one (not needed to
    # work, only to move the claim to this worker's next accept of the HIT).
    name, value, max_age = workers.claim_cookie(assignment=opened.assignment, now=now)
    path = reverse("crowd:mturk-task", args=[hit_token])
    response.set_cookie(
        name, value, max_age=max_age, path=path, secure=True, httponly=True, samesite="None"
    )
    return response


@worker_page
@require_http_methods(["GET", "POST"])
def selfhosted_join(request: HttpRequest, link_token: str) -> HttpResponse:
    """A study's public link: a start button, then the worker's next task of the batch."""
    publication = workers.publication_for_link(link_token=link_token)
    if request.method == "GET":
        workers.link_open_check(publication=publication)
        # Link previews and crawlers only GET: a task is handed out on the button's POST.
        params = request.GET.dict()
        participant = link_params(request, publication, params)
        offer = workers.selfhosted_join_offer(
            publication=publication, params=participant, now=timezone.now()
        )
        if offer.blocked:
            return _blocked_participant(request, publication, participant)
        context = {"publication": publication, "params": params, "start_offered": offer.start}
        return render(request, "crowd/join.html", context)
    # Each start is a participant and a claimed task: one address may not take a study's tasks.
    # A participant's next task is no new participant (60 tasks an hour were refused).
    params = link_params(request, publication, request.POST.dict())
    if not workers.selfhosted_returning(publication=publication, params=params):
        page_rate_check(request, scope=CROWD_STARTS_SCOPE)
    claims = AddressClaims(address=client_address(request), now=timezone.now())
    with claims.one_at_a_time():
        try:
            opened = workers.selfhosted_start(
                publication=publication,
                params=params,
                now=claims.now,
                new_claim_check=claims.check,
            )
        except NoWorkError as error:
            return _no_task_left(request, publication, params, error)
        except WorkerBlockedError:
            return _blocked_participant(request, publication, params)
        claims.record(opened.assignment)
    response = redirect("crowd:work-task", token=opened.token)
    anonymous_remember(request, response, publication, opened.assignment.annotator.worker_id)
    return response


def link_params(request: HttpRequest, publication: Publication, params: dict) -> dict:
    """The join page's parameters, with the anonymous participant this browser started as."""
    return workers.selfhosted_params_of_browser(
        publication=publication, params=params, cookies=request.COOKIES
    )


def anonymous_remember(
    request: HttpRequest, response: HttpResponse, publication: Publication, worker_id: str
) -> None:
    """Keep a link's anonymous participant in this browser (a cookie of the join page only), so
    that pressing Start again does not make a second participant. Only one this Start made, or
    the browser's own: an id sent with the Start (`workerId=anon-…` in a link someone else
    made, or a form posted from another site) is never kept, else the browser's later Starts
    without an id would all be that sender's participant."""
    if workers.selfhosted_worker_id(request.POST.dict()):
        return
    cookie = workers.anonymous_participant_cookie(publication=publication, worker_id=worker_id)
    if cookie is not None:
        name, value, max_age = cookie
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path=request.path,
            secure=request.is_secure(),
            httponly=True,
            samesite="Lax",
        )


def _blocked_participant(request: HttpRequest, publication: Publication, params: dict):
    """A blocked participant back on the link (for their completion code, say): what became
    of their work, and no code. Their work counts in no result while the block lasts, and the
    code is what the recruiting site pays on: it was handed out with each submission, and is
    not handed out again until an unblock."""
    submitted_any = crowd_selectors.selfhosted_participant_submitted(
        worker_id=workers.selfhosted_worker_id(params), batch_id=publication.batch_id
    )
    context = {"submitted_any": submitted_any}
    return render(request, "crowd/blocked.html", context, status=403)


def _no_task_left(
    request: HttpRequest, publication: Publication, params: dict, error: NoWorkError
) -> HttpResponse:
    """A start with no task for the participant: someone back for their completion code (the
    done page closed before they copied it) gets it again; someone who submitted nothing is
    told there is no code and to return the study on the site they came from."""
    worker_id = workers.selfhosted_worker_id(params)
    submitted_any = bool(worker_id) and crowd_selectors.selfhosted_participant_submitted(
        worker_id=worker_id, batch_id=publication.batch_id
    )
    code, url = crowd_selectors.completion_of(publication) if submitted_any else ("", "")
    context = {
        "message": str(error),
        "submitted_any": submitted_any,
        "completion_code": code,
        "completion_url": url,
    }
    return render(request, "crowd/no_task.html", context, status=error.http_status)


@worker_page
@require_http_methods(["GET", "POST"])
def work_task(request: HttpRequest, token: str) -> HttpResponse:
    held = workers.worker_assignment_get(token=token)
    if request.method == "POST":
        response = _submit(request, held)
    elif held.assignment.submitted_at is not None:
        response = _refused(request, held) or _done(request, held)
    elif held.assignment.status == AssignmentStatus.RETURNED and not held.submit_to:
        response = _returned(request, held)
    else:
        page = work_selectors.task_page_for(assignment=held.assignment)
        response = _task_page(request, held, {"page": page})
    if held.submits_to_mturk:  # the finished assignment is posted to MTurk from this page
        csp_replace_on(response, {"form-action": ["'self'", held.submit_to]})
    return response


@worker_page
@require_http_methods(["POST"])
def work_return(request: HttpRequest, token: str) -> HttpResponse:
    """A self-hosted participant hands their task back; their task page then says what next."""
    held = workers.worker_assignment_get(token=token)
    workers.selfhosted_assignment_return(held=held, now=timezone.now())
    return redirect("crowd:work-task", token=token)


@worker_page
@require_http_methods(["POST"])
def demo_external_submit(request: HttpRequest) -> HttpResponse:
    """What MTurk's externalSubmit does, for the offline demo platform: the worker's HIT is
    submitted there, and counts once an admin's sync confirms it (as on MTurk), unless it was
    late work, which never counts."""
    if not demo_platform_in_use():
        raise NotFoundError("No such page.")
    # The worker's done page signed their assignment id: nobody else can submit their HIT.
    assignment_id = request.POST.get("assignmentId", "")
    workers.demo_submit_check(token=request.POST.get("token", ""), assignment_id=assignment_id)
    try:
        FakePlatform().worker_submit(assignment_id=assignment_id)
    except CrowdPlatformError as error:
        if not _demo_submitted_before(assignment_id):
            raise NotFoundError(str(error)) from None
        # The worker's browser sent it again (a reload of this page, the done page opened
        # again): the platform keeps the first submit, and the worker is told so.
        message = (
            f"The offline demo platform has assignment {assignment_id} already: it was "
            "submitted before, and sending it again changes nothing."
        )
        return _demo_submitted(request, assignment_id, message)
    took = f"The offline demo platform took assignment {assignment_id}, as Mechanical Turk would. "
    if crowd_selectors.platform_work_late(platform=FakePlatform.name, assignment_id=assignment_id):
        message = took + (
            "It was submitted after its time ran out and its task was filled: it is kept but "
            "never counts in the results, whatever a sync or a review does."
        )
    elif crowd_selectors.platform_work_of_blocked_worker(
        platform=FakePlatform.name, assignment_id=assignment_id
    ):
        message = took + (
            "Its worker is blocked here: it is kept but counts in no result while the block "
            "lasts. The platform pays it when its auto-approval delay ends unless an admin "
            'rejects it on the review page ("Spent so far" counts it once a sync confirms it).'
        )
    else:
        message = took + (
            "It counts once a sync of the publication confirms it (an admin may then approve or "
            "reject it on the review page; a rejection takes it out again)."
        )
    return _demo_submitted(request, assignment_id, message)


def _demo_submitted_before(assignment_id: str) -> bool:
    """Whether the offline platform has this assignment submitted (or reviewed) already."""
    try:
        FakePlatform().assignment_get(assignment_id=assignment_id)
    except CrowdPlatformError:
        return False
    return True


def _demo_submitted(request: HttpRequest, assignment_id: str, message: str) -> HttpResponse:
    # An admin playing a demo worker goes on at the publication: sync, then review this work.
    publication_id = (
        crowd_selectors.publication_id_of_hit(
            hit_id=FakePlatform().assignment_get(assignment_id=assignment_id).hit_id
        )
        if is_admin(request.user)
        else None
    )
    return render(
        request,
        "crowd/worker_message.html",
        {"message": message, "publication_id": publication_id},
    )


def _submit(request: HttpRequest, held: workers.WorkerAssignment) -> HttpResponse:
    answers = {
        key: values[0] if len(values) == 1 else values
        for key, values in request.POST.lists()
        if key not in RESERVED_FIELDS
    }
    try:
        result = assignment_submit(
            assignment_id=held.assignment.pk,
            annotator=held.assignment.annotator,
            answers=answers,
            active_seconds=request.POST.get("active_seconds", 0),
            now=timezone.now(),
        )
    except SubmissionError as error:
        return _task_page_with_error(request, held, answers, error)
    if result.questions_next:
        return redirect("crowd:work-task", token=held.token)
    held.assignment.refresh_from_db()
    return _done(request, held, just_submitted=True)


def _task_page_with_error(request, held, answers: dict, error: SubmissionError) -> HttpResponse:
    text_answers = {key: value for key, value in answers.items() if isinstance(value, str)}
    page = work_selectors.task_page_for(assignment=held.assignment, answers=text_answers)
    said, missing = work_selectors.submission_refusal(page=page, error=error)
    context = {"page": page, "error": said, "missing": missing}
    return _task_page(request, held, context, status=error.http_status)


def _task_page(
    request: HttpRequest, held: workers.WorkerAssignment, context: dict, status: int = 200
) -> HttpResponse:
    """The task page of a worker's claim, telling a worker blocked since they claimed it that
    their answers will not count (only about themselves: nothing of other workers)."""
    assignment = held.assignment
    blocked = crowd_selectors.worker_blocked(annotator_id=assignment.annotator_id)
    context = {
        **context,
        "worker_blocked": blocked,
        "hands_back_to_platform": bool(held.submit_to),
        "return_url": _return_url(held),
    }
    if held.submit_to:
        # A platform's worker: the platform hands out each task as a HIT of its own.
        # Open on the worker's first task of the batch, as on an annotator's first of a project.
        context["guidelines_open"] = not crowd_selectors.participant_submitted_in_batch(
            annotator_id=assignment.annotator_id, batch_id=assignment.task.batch_id
        )
    else:
        # A self-hosted participant goes on to the link's next task: "task 2 of 5" as on an
        # annotator's page, of the link's batch; its first task opens the guidelines.
        standing = work_selectors.project_standing(
            assignment=assignment, now=timezone.now(), batch_only=True
        )
        if blocked:  # the link hands a blocked participant no further task
            standing = replace(standing, total=max(standing.number, standing.submitted))
        context["standing"] = standing
    return render(request, "crowd/task.html", context, status=status)


def _return_url(held: workers.WorkerAssignment) -> str:
    """Where a self-hosted participant returns a task not submitted (a platform's worker
    returns the HIT on the platform): "" when there is nothing to return."""
    assignment = held.assignment
    can_return = (
        not held.submit_to
        and assignment.submitted_at is None
        and assignment.status in (AssignmentStatus.CLAIMED, AssignmentStatus.EXPIRED)
    )
    return reverse("crowd:work-return", args=[held.token]) if can_return else ""


def _returned(request: HttpRequest, held: workers.WorkerAssignment) -> HttpResponse:
    """After a self-hosted participant returned a task: another task if their link gives them
    one, else the completion code for the tasks they did submit, or, with none submitted, the
    advice to return the study on the recruiting site (no code for no work)."""
    assignment = held.assignment
    link = _selfhosted_link(assignment)
    next_task = _next_selfhosted_task(held, link)
    submitted_any = next_task is None and crowd_selectors.participant_submitted_in_batch(
        annotator_id=assignment.annotator_id, batch_id=assignment.task.batch_id
    )
    # A blocked participant's code is not handed out again (_blocked_participant).
    withheld = submitted_any and crowd_selectors.worker_blocked(
        annotator_id=assignment.annotator_id
    )
    given = link and submitted_any and not withheld
    code, url = crowd_selectors.completion_of(link) if given else ("", "")
    context = {
        "next_task": next_task,
        "submitted_any": submitted_any,
        "code_withheld": withheld,
        "completion_code": code,
        "completion_url": url,
    }
    return render(request, "crowd/returned.html", context)


def _refused(request: HttpRequest, held: workers.WorkerAssignment) -> HttpResponse | None:
    """The platform listed this HIT after the submit and this assignment was not in it."""
    assignment = held.assignment
    if crowd_selectors.assignment_confirmation(assignment=assignment) != Confirmation.REFUSED:
        return None
    message = (
        f"Mechanical Turk does not know assignment {assignment.platform_assignment_id} for "
        f"worker {assignment.annotator.worker_id} on this HIT, so these answers do not count."
    )
    # A worker whose browser never handed the HIT back (the page closed first, the network
    # failed) may still do it: the answers are kept, and a later sync counts them once the
    # platform has the assignment and its task has room. A forged id is refused there.
    context = {"message": message, "hand_back": _hand_back(held) if held.submit_to else None}
    return render(request, "crowd/worker_message.html", context, status=403)


def _hand_back(held: workers.WorkerAssignment) -> dict:
    """The fields of the form that posts a finished assignment back to MTurk."""
    assignment = held.assignment
    return {
        "external_submit_url": held.external_submit_url,
        "assignment_id": assignment.platform_assignment_id,
        # The offline demo platform's externalSubmit is this site's: it checks the token.
        "worker_token": workers.demo_submit_token(
            held_submit_to=held.submit_to, assignment_id=assignment.platform_assignment_id
        ),
        "summary": f"task={assignment.task.instruction.external_id};labels={assignment.labels.count()}",
    }


def _done(
    request: HttpRequest, held: workers.WorkerAssignment, *, just_submitted: bool = False
) -> HttpResponse:
    """MTurk: the browser posts the assignment back. Self-hosted: the completion code or URL,
    but to a participant blocked now only with the submit itself (a claim the block ended):
    opened again, the page says their work does not count and gives no code
    (_blocked_participant)."""
    assignment = held.assignment
    project = assignment.task.batch.project
    # MTurk hands out the next HIT and takes this one back itself; a self-hosted link does not.
    link = None if held.submit_to else _selfhosted_link(assignment)
    code, url = (
        crowd_selectors.completion_of(link)
        if link
        else (project.completion_code, project.completion_url)
    )
    # Blocked while holding the claim: the answers are kept but count in no result.
    blocked = crowd_selectors.worker_blocked(annotator_id=assignment.annotator_id)
    told_not_counted = blocked or assignment.status == AssignmentStatus.EXPIRED
    if not held.submit_to and url and not told_not_counted:
        return redirect(url)
    withheld = blocked and not held.submit_to and not just_submitted
    context = {
        "assignment": assignment,
        "completion_code": "" if withheld else code,
        "code_withheld": withheld,
        # Work that does not count: the study site only after the note, by a link.
        "completion_url": "" if held.submit_to or withheld else url,
        **_hand_back(held),
        "next_task": _next_selfhosted_task(held, link),
        "worker_blocked": blocked,
    }
    return render(request, "crowd/done.html", context)


def _selfhosted_link(assignment) -> Publication | None:
    return (
        Publication.objects.select_related("batch__project")
        .filter(batch_id=assignment.task.batch_id, platform="selfhosted")
        .first()
    )


def _next_selfhosted_task(held: workers.WorkerAssignment, publication) -> dict | None:
    """Self-hosted: where the worker gets another task of the batch, if one is left for them."""
    assignment = held.assignment
    if publication is None or not workers.selfhosted_next_task_open(
        publication=publication, annotator=assignment.annotator
    ):
        return None
    left = claimable_task_ids(
        project=assignment.task.batch.project,
        annotator=assignment.annotator,
        now=timezone.now(),
        batch=assignment.task.batch,
        limit=1,
    )
    if not left:
        return None
    url = reverse("crowd:selfhosted-join", args=[publication.link_token])
    # The recruiting site's study and session ids go on with the participant, so the next
    # assignment keeps them as the first did (selfhosted_start).
    params = {
        "workerId": assignment.annotator.worker_id,
        "STUDY_ID": assignment.platform_hit_id,
        "SESSION_ID": assignment.platform_assignment_id,
    }
    return {"url": url, "params": {name: value for name, value in params.items() if value}}
