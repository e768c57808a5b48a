"""A human study on the crowd platforms: the admin's publish and review pages, and the pages
crowd workers answer on (an MTurk HIT per prompt, or a self-hosted study link).

Adapters only. The admin pages use the crowd app's `admin_page` (admins only: they spend money);
the worker pages its `worker_page` (no login or session, frameable by MTurk, our errors as a
short page), and keys 1/2 answer as on the in-house page (static/verbalizer/answer.js).
"""

from __future__ import annotations

from django.contrib import messages
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from annotate.crowd import limits, tasks
from annotate.crowd import selectors as crowd_selectors
from annotate.crowd.forms import PublishForm
from annotate.crowd.platforms import platform_names
from annotate.crowd.selectors import Confirmation
from annotate.crowd.services import publishing, review, workers
from annotate.crowd.services.workers import is_preview, link_open_check
from annotate.crowd.views import (
    _back,
    _enqueue,
    _not_published_reason,
    admin_page,
    bonus_amount,
    bonus_form_context,
    bonus_sent_message,
    rejected_message,
)
from annotate.crowd.worker_views import anonymous_remember, link_params, worker_page
from annotate.errors import AnnotateError, PublishError
from annotate.http import csp_replace_on, form_refusal
from annotate.throttling import CROWD_STARTS_SCOPE, page_rate_check
from annotate.verbalizer.models import HumanStudy
from annotate.verbalizer.selectors import study_publication_get, study_review_rows
from annotate.verbalizer.services import crowd
from annotate.verbalizer.services.humans import HumanStudyError
from annotate.verbalizer.views import saved_message

# --- Admins -------------------------------------------------------------------------------


@admin_page
def study_publish(request: HttpRequest, human_study_id: int) -> HttpResponse:
    study = get_object_or_404(
        HumanStudy.objects.select_related("evaluation_set"), pk=human_study_id
    )
    initial = {
        "title": limits.title_fitted(f"Pick the word an instruction asks for ({study.name})"),
        "description": "Read a short instruction and a text; answer with one of two words "
        "(keys 1 and 2), exactly as the instruction says, even where its words seem odd.",
        "keywords": "classification, instructions, quick",
        "reward_usd": crowd.DEFAULT_REWARD_USD,
        "assignment_minutes": 5,
    }
    form = PublishForm(request.POST or None, initial=initial, platforms=platform_names())
    preview = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:  # settings the platform would refuse: before a total to confirm is shown
            publishing.publish_settings_check(
                platform_name=data["platform"], chosen=form.publish_settings(),
                reward_usd=data["reward_usd"],
            )  # fmt: skip
        except PublishError as error:
            form_refusal(form, error)
            return render(request, "crowd/publish.html", _study_publish_context(study, form, None))
        preview = crowd.study_publication_preview(
            study=study, platform_name=data["platform"], reward_usd=data["reward_usd"],
            user=request.user,
        )  # fmt: skip
        confirmed = data["confirm_total"] == preview.total_usd and preview.affordable
        if "publish" in request.POST and confirmed:
            publication = crowd.study_publication_create(
                study=study, platform_name=data["platform"], chosen=form.publish_settings(),
                base_url=publishing.task_base_url(request_base=request.build_absolute_uri("/")),
                user=request.user,
            )  # fmt: skip
            _enqueue(tasks.publish_publication, publication.pk, request.user.pk)
            return redirect("crowd:publication", publication.pk)
        if "publish" in request.POST:  # as a batch's page: say why nothing was published
            messages.warning(request, _not_published_reason(data["confirm_total"], preview))
        form = PublishForm(
            {**request.POST.dict(), "confirm_total": preview.total_usd},
            initial=initial, platforms=platform_names(),
        )  # fmt: skip
        form.is_valid()
    return render(request, "crowd/publish.html", _study_publish_context(study, form, preview))


def _study_publish_context(study: HumanStudy, form: PublishForm, preview) -> dict:
    return {
        "heading": f"Publish human study “{study.name}”",
        "summary": f"Set {study.evaluation_set.name} · {study.prompts.count()} prompts, one HIT "
        f"each · {study.answers_per_prompt} workers per prompt.",
        "form": form,
        "preview": preview,
        # One HIT per prompt, each of the study's answers per prompt an assignment.
        "units": {
            "grid": "Prompts × answers per prompt",
            "work": "Answers",
            "item": "prompt",
            "each": "answer",
        },
        # As for a batch's link: a participant with neither is never paid by Prolific. A study
        # keeps its code on itself, set on the publication page (this form has no such field).
        "no_completion": preview is not None
        and preview.paid_outside
        and not (study.completion_code or study.completion_url),
        "completion_on_form": False,
    }


@admin_page
def study_review(request: HttpRequest, study_publication_id: int) -> HttpResponse:
    publication = study_publication_get(publication_id=study_publication_id)
    rows = study_review_rows(publication=publication)
    approvable = [str(row.answer.id) for row in rows if row.approvable]
    context = {
        "publication": publication,
        "rows": rows,
        "approvable_count": len(approvable),
        # One field for them all: a field each put a page of more answers than Django's
        # DATA_UPLOAD_MAX_NUMBER_FIELDS (1,000) past it, and the approve answered 400.
        "approvable_ids": ",".join(approvable),
        "reconciliation": crowd_selectors.reconciliation(publication=publication),
        "platform_confirms": review.platform_confirms(publication.platform),
        **bonus_form_context(publication),
    }
    return render(request, "verbalizer/crowd_review.html", context)


@admin_page
@require_POST
def study_review_approve(request: HttpRequest, study_publication_id: int) -> HttpResponse:
    """Approve the review page's submitted, confirmed answers together: those ticked, or every
    one it showed ("shown", its ids in one field, comma-separated: not those that came in
    since the page was loaded)."""
    publication = study_publication_get(publication_id=study_publication_id)
    field = "shown" if request.POST.get("scope") == "shown" else "answer"
    values = [part for value in request.POST.getlist(field) for part in value.split(",")]
    answer_ids = [int(value) for value in values if value.strip().isdigit()]
    if not answer_ids:
        raise HumanStudyError("Tick the answers to approve first; nothing was approved.")
    done = review.human_answers_approve(
        publication=publication, answer_ids=answer_ids, user=request.user,
        feedback=request.POST.get("feedback", ""),
    )  # fmt: skip
    approved = f"Approved {done.approved} answer{pluralize(done.approved)}."
    if done.skipped:
        approved += (
            f" {done.skipped} left as {pluralize(done.skipped, 'it was,they were')}: no longer "
            "submitted (decided meanwhile), not confirmed by the platform, or of a blocked "
            "worker."
        )
    messages.success(request, approved)
    if done.refused:
        messages.error(request, "Not approved: " + "; ".join(done.refused))
    if done.stopped:
        messages.warning(
            request,
            f"{done.stopped} {done.untried} answer{pluralize(done.untried)} not tried yet: "
            "approve them again in a minute.",
        )
    return redirect("verbalizer:crowd-review", publication.pk)


@admin_page
@require_POST
def answer_action(request: HttpRequest, answer_id: int) -> HttpResponse:
    action, user = request.POST.get("action"), request.user
    feedback = request.POST.get("feedback", "")
    if action == "approve":
        review.human_answer_approve(answer_id=answer_id, user=user, feedback=feedback)
        messages.success(request, "Approved.")
    elif action == "reject":
        done = review.human_answer_reject(answer_id=answer_id, user=user, feedback=feedback)
        messages.success(request, f"{rejected_message(done)} The answer no longer counts.")
    elif action == "bonus":
        asked_at = timezone.now()
        bonus = review.human_answer_bonus_create(
            answer_id=answer_id, amount_usd=bonus_amount(request), reason=feedback, user=user,
            request_token=request.POST.get("request_token", ""), now=asked_at,
        )  # fmt: skip
        _enqueue(tasks.pay_bonus, bonus.pk, user.pk)
        messages.success(request, bonus_sent_message(bonus, asked_at=asked_at))
    else:
        raise AnnotateError(f"Unknown action '{action}'.")
    # Back to the answer's own row, not the page's top: a review goes down the page.
    return redirect(_without_fragment(_back(request).url) + f"#answer-{answer_id}")


def _without_fragment(url: str) -> str:
    return url.split("#", 1)[0]


# --- Crowd workers --------------------------------------------------------------------------


def _key_and_seconds(request: HttpRequest) -> tuple[int, float | None]:
    try:
        key = int(request.POST["key"])
        seconds = float(request.POST.get("seconds") or "nan")
    except (KeyError, ValueError):
        raise HumanStudyError("An answer needs key 1 or 2.") from None
    return key, None if seconds != seconds else seconds


@worker_page
@require_http_methods(["GET"])
def mturk_prompt(request: HttpRequest, hit_token: str) -> HttpResponse:
    """The ExternalQuestion URL of a study's HIT: a preview, or the prompt to answer."""
    hit = crowd.study_hit_get(hit_token=hit_token)
    params = request.GET
    if is_preview(params.get("assignmentId", "")):
        prompt = crowd.study_hit_preview(hit=hit)
        return render(request, "verbalizer/crowd_prompt.html", {"prompt": prompt, "preview": True})
    ticket = crowd.mturk_prompt_open(
        hit=hit, assignment_id=params.get("assignmentId", ""), hit_id=params.get("hitId", ""),
        worker_id=params.get("workerId", ""), turk_submit_to=params.get("turkSubmitTo", ""),
    )  # fmt: skip
    if ticket.answer is not None:
        return _mturk_done(request, ticket)
    action = reverse("verbalizer:crowd-mturk-answer", args=[ticket.token])
    # The answer's address carries a signature made this second: the key of the prompt's first
    # showing (answer.js) names the assignment instead, the same on every reload.
    shown_key = f"mturk:{params.get('hitId', '')}:{params.get('assignmentId', '')}"
    context = {"prompt": ticket.prompt, "action": action, "shown_key": shown_key}
    return render(request, "verbalizer/crowd_prompt.html", context)


@worker_page
@require_POST
def mturk_answer(request: HttpRequest, token: str) -> HttpResponse:
    ticket = crowd.mturk_ticket_get(token=token)
    key, seconds = _key_and_seconds(request)
    answer = crowd.mturk_answer_submit(ticket=ticket, key=key, seconds=seconds)
    return _mturk_done(request, ticket, answer)


def _mturk_done(request: HttpRequest, ticket: crowd.CrowdPromptTicket, answer=None):
    """The browser posts the assignment back to MTurk from here (crowd/done.html)."""
    answer = answer or ticket.answer
    if crowd_selectors.assignment_confirmation(assignment=answer) == Confirmation.REFUSED:
        message = (
            f"Mechanical Turk does not know assignment {answer.platform_assignment_id} for "
            f"worker {answer.annotator.worker_id} on this HIT, so this answer does not count."
        )
        return render(request, "crowd/worker_message.html", {"message": message}, status=403)
    context = {
        "assignment": answer,
        "external_submit_url": ticket.external_submit_url,
        "summary": f"prompt={ticket.prompt.pk};answer={answer.word}",
        "saved": saved_message(answer.word),
        # The offline demo platform's externalSubmit is this site's: it checks this token.
        "worker_token": workers.demo_submit_token(
            held_submit_to=ticket.submit_to, assignment_id=answer.platform_assignment_id
        ),
    }
    response = render(request, "crowd/done.html", context)
    if workers.submits_to_host(ticket.submit_to):
        csp_replace_on(response, {"form-action": ["'self'", ticket.submit_to]})
    return response


@worker_page
@require_http_methods(["GET", "POST"])
def link_join(request: HttpRequest, link_token: str) -> HttpResponse:
    """A study's public link: a start button, then the study's prompts one after the other."""
    publication = crowd.study_link_get(link_token=link_token)
    if request.method == "GET":
        link_open_check(publication=publication)
        # Link previews and crawlers only GET: a participant is made on the button's POST.
        params = request.GET.dict()
        offered = crowd.study_link_start_offered(
            publication=publication, params=link_params(request, publication, params)
        )
        context = {"publication": publication, "params": params, "start_offered": offered}
        return render(request, "crowd/join.html", context)
    page_rate_check(request, scope=CROWD_STARTS_SCOPE)  # a start may be a new participant
    params = link_params(request, publication, request.POST.dict())
    participant = crowd.study_link_start(publication=publication, params=params)
    response = redirect("verbalizer:crowd-link-work", token=participant.token)
    anonymous_remember(request, response, publication, participant.annotator.worker_id)
    return response


@worker_page
@require_http_methods(["GET", "POST"])
def link_work(request: HttpRequest, token: str) -> HttpResponse:
    participant = crowd.link_participant_get(token=token)
    if request.method == "POST":
        key, seconds = _key_and_seconds(request)
        try:
            prompt_id = int(request.POST.get("prompt", ""))
        except ValueError:
            raise HumanStudyError("An answer needs the prompt.") from None
        answer = crowd.link_answer_submit(
            participant=participant, prompt_id=prompt_id, key=key, seconds=seconds
        )
        saved = signing.dumps(answer.word, salt=_saved_salt(token))
        return redirect(f"{reverse('verbalizer:crowd-link-work', args=[token])}?saved={saved}")
    study = participant.publication.human_study
    prompt, done, total = crowd.link_work_next(participant=participant)
    # Done with the study: the completion code (or the study site's URL) as for a batch's link,
    # to a participant who answered something; one who found every prompt full gets none.
    if prompt is None and done and study.completion_url:
        return redirect(study.completion_url)
    context = {
        "prompt": prompt,
        "action": request.path,
        "shown_key": request.path,
        "done": done,
        "total": total,
        "completion_code": study.completion_code if prompt is None and done else "",
        "saved": _saved_message(request.GET.get("saved", ""), token),
    }
    return render(request, "verbalizer/crowd_prompt.html", context)


# A crowd worker has no session to hold a message: the word saved rides in the next page's URL,
# signed for this participant's token so no link can make the page claim an answer, and read
# with no query.
def _saved_salt(token: str) -> str:
    return f"verbalizer-crowd-saved:{token}"


def _saved_message(signed: str, token: str) -> str:
    if not signed:
        return ""
    try:
        word = signing.loads(signed, salt=_saved_salt(token))
    except signing.BadSignature:
        return ""
    return saved_message(word)
