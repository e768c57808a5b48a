"""Annotator pages of revision sessions (paper §2.2): thin adapters over services and selectors."""

from __future__ import annotations

import contextlib
import functools

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotate.errors import (
    AnnotateError,
    ConflictError,
    ImportFileError,
    NotFoundError,
    NoWorkError,
    RateLimitedError,
    SubmissionError,
)
from annotate.http import (
    error_page,
    page_errors,
    refused_upload,
    uploaded_path,
    uploads_limited,
    work_limited,
)
from annotate.revision import selectors
from annotate.revision.forms import RerateForm
from annotate.revision.models import TEXT_LIMITS, SessionStatus, Study
from annotate.revision.services import imports, reratings, sessions
from annotate.roles import (
    ADMIN,
    ANNOTATOR,
    RESEARCHER,
    RESEARCHERS_ONLY,
    is_researcher,
    require_role,
)
from annotate.services.assignments import BLOCKED_FROM_NEW_WORK, account_blocked
from annotate.services.files import upload_size_problem
from annotate.throttling import (
    ANNOTATOR_WORK_SCOPE,
    ANNOTATOR_WORK_WHAT,
    MODEL_CALLS_SCOPE,
    page_rate_check,
    polled,
    user_rate_limited,
)


def _annotator_only(request: HttpRequest) -> None:
    require_role(request.user, ANNOTATOR, message="Only annotators have revision sessions.")


DONE_PAGE_SIZE = 20  # finished sessions and done re-ratings listed per page on the home page


@never_cache
@login_required
@page_errors
def home(request: HttpRequest) -> HttpResponse:
    _annotator_only(request)
    finished = selectors.finished_sessions_for_annotator(user=request.user)
    rerated = selectors.done_reratings_for_annotator(user=request.user)
    context = {
        "studies": selectors.studies_for_annotator(user=request.user),
        "reratings": selectors.reratings_for_annotator(user=request.user),
        "finished": Paginator(finished, DONE_PAGE_SIZE).get_page(request.GET.get("sessions_page")),
        "rerated": Paginator(rerated, DONE_PAGE_SIZE).get_page(request.GET.get("reratings_page")),
        # A researcher who also annotates is shown where a held question is reopened.
        "researcher": is_researcher(request.user),
        # A blocked account is told so in place of Start, which would be refused (403);
        # Continue stays for a session in progress (it can still be rated and ended).
        "blocked": BLOCKED_FROM_NEW_WORK if account_blocked(request.user) else "",
    }
    return render(request, "revision/home.html", context)


@login_required
@require_POST
@work_limited(
    outcome="No session was started.", back=lambda **_: (reverse("revision:home"), "Your studies")
)
@page_errors
def start(request: HttpRequest, study_id: int) -> HttpResponse:
    _annotator_only(request)
    study = Study.objects.filter(pk=study_id).first()
    if study is None:
        raise NotFoundError("No such study.")
    # Continuing the session in progress calls no model; a new one asks for its initial answer.
    new = sessions.session_active(study=study, user=request.user) is None
    try:
        with _model_calls_limited(request) if new else contextlib.nullcontext():
            session = sessions.session_assign(study=study, user=request.user, now=timezone.now())
    except RateLimitedError as error:
        return error_page(request, error, back=(reverse("revision:home"), "Your studies"))
    except NoWorkError as error:
        messages.info(request, str(error))
        return redirect("revision:home")
    return redirect("revision:session", session_id=session.pk)


def _model_calls_limited(request: HttpRequest):
    """The user's model call rate (MODEL_CALL_RATE) around an action that sends one: refused
    over it, counted only once the action is accepted (an empty instruction costs nothing)."""
    return user_rate_limited(
        user=request.user, scope=MODEL_CALLS_SCOPE, what="model calls", outcome="Nothing was sent."
    )


@never_cache
@login_required
@require_GET
@page_errors
def session_page(request: HttpRequest, session_id: int) -> HttpResponse:
    page = selectors.session_page_get(session_id=session_id, user=request.user, now=timezone.now())
    # A session ended (finished or given up) offers the next one only where a question is left
    # for this annotator.
    ended = page.session.status != SessionStatus.ACTIVE
    next_open = ended and sessions.session_available(study=page.session.study, user=request.user)
    context = {"page": page, "form": {}, "next_open": next_open, "limits": TEXT_LIMITS}
    # A blocked account is told so in place of the instruction box, Retry, Withdraw and Next
    # session, which would be refused (403) with the text typed lost; rating, finishing and
    # giving up stay. Read only where the page offers one of them: the rating page, the one
    # most seen, reads no more.
    if (page.offers_model_call or next_open) and account_blocked(request.user):
        context.update(blocked=BLOCKED_FROM_NEW_WORK, next_open=False)
    else:
        # A withdrawn instruction comes back in the box, once (`withdraw`); kept for when the
        # box is back if a block came just after the withdrawal.
        context["form"] = request.session.pop(_withdrawn_key(session_id), None) or {}
        if ended and not next_open:
            context["why_no_next"] = sessions.session_unavailable_reason(
                study=page.session.study, user=request.user
            )
    return render(request, "revision/session.html", context)


@login_required
@require_GET
@page_errors
def session_read(request: HttpRequest, session_id: int) -> HttpResponse:
    """A researcher reads any session as it was done: every turn with its answer, edit,
    rating, comment and passages, as text (the annotator's page stays theirs alone)."""
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    record = selectors.session_record_get(session_id=session_id)
    return render(request, "revision/session_read.html", {"record": record})


def _withdrawn_key(session_id: int) -> str:
    return f"revision-withdrawn-{session_id}"


@polled  # reloaded every few seconds while the work runs
@never_cache  # the annotator's own answer text, polled
@login_required
@require_GET
def session_state(request: HttpRequest, session_id: int) -> JsonResponse:
    try:
        state = selectors.session_state(
            session_id=session_id, user=request.user, now=timezone.now()
        )
    except NotFoundError:
        return JsonResponse({"detail": "not found"}, status=404)
    return JsonResponse(state)


def _act(
    request: HttpRequest,
    session_id: int,
    action,
    unsaved: str,
    *,
    model_call: bool = False,
    **values,
) -> HttpResponse:
    """Run the session action; a refusal keeps the form's input on the page.

    Every action counts on the user's work rate (scope "annotator-work"); one that sends a model
    call (`model_call`) also counts against the user's rate of those (scope "model-calls") once
    it is accepted. Over either, nothing is done and the page keeps the form's input. A
    conflict means the page was out of date (another tab moved the session on): the session is
    shown as it is now, with what was not saved and why, not a dead end."""
    try:
        page_rate_check(
            request, scope=ANNOTATOR_WORK_SCOPE, what=ANNOTATOR_WORK_WHAT, outcome=f"{unsaved}."
        )
        with _model_calls_limited(request) if model_call else contextlib.nullcontext():
            action(session_id=session_id, user=request.user, **values)
    except RateLimitedError as error:
        response = _session_page_refused(request, session_id, error)
        response["Retry-After"] = str(error.retry_after)
        return response
    except ConflictError as error:
        why = "" if str(error) == sessions.OUT_OF_DATE else f": {error}"
        messages.warning(
            request,
            f"{unsaved}{why}. This page was out of date (open in another tab?); "
            "here is the session as it is now.",
        )
        return redirect("revision:session", session_id=session_id)
    except SubmissionError as error:
        return _session_page_refused(request, session_id, error)
    return redirect("revision:session", session_id=session_id)


def _session_page_refused(request: HttpRequest, session_id: int, error: AnnotateError):
    """The session page with the refusal and the form as sent (the instruction typed kept)."""
    page = selectors.session_page_get(session_id=session_id, user=request.user, now=timezone.now())
    context = {"page": page, "error": str(error), "form": request.POST, "limits": TEXT_LIMITS}
    response = render(request, "revision/session.html", context, status=error.http_status)
    add_never_cache_headers(response)  # as the session page: the annotator's own work
    return response


def _form_step(request: HttpRequest, name: str) -> int | None:
    """The step (a turn's id or position) the page's form was shown for, or None when the
    form sends none (a caller with no page: the session's step as it is now)."""
    value = request.POST.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise SubmissionError(f"the form's {name} field is not a number: reload the page") from None


def _unsent_instruction(instruction: str) -> str:
    text = instruction.strip()
    return f'Your instruction was not sent ("{text}")' if text else "Your instruction was not sent"


@login_required
@require_POST
@page_errors
def turn_new(request: HttpRequest, session_id: int) -> HttpResponse:
    return _act(
        request,
        session_id,
        sessions.turn_start,
        _unsent_instruction(request.POST.get("instruction", "")),
        model_call=True,
        instruction=request.POST.get("instruction", ""),
        instruction_type=request.POST.get("instruction_type", ""),
        now=timezone.now(),
        position=_form_step(request, "position"),
    )


@login_required
@require_POST
@page_errors
def turn_rate(request: HttpRequest, session_id: int) -> HttpResponse:
    return _act(
        request,
        session_id,
        sessions.turn_rate,
        "Your rating was not saved",
        rating=request.POST.get("rating", ""),
        comment=request.POST.get("comment", ""),
        edited_answer=request.POST.get("edited_answer", ""),
        now=timezone.now(),
        turn_id=_form_step(request, "turn"),
    )


@login_required
@require_POST
@page_errors
def retry(request: HttpRequest, session_id: int) -> HttpResponse:
    return _act(
        request, session_id, sessions.call_retry, "Not retried", model_call=True, now=timezone.now()
    )


def _back_to_session(session_id: int) -> tuple[str, str]:
    return reverse("revision:session", args=[session_id]), "Back to the session"


def _step_back(
    request: HttpRequest, session_id: int, action, *, refused: str, done, to: str
) -> HttpResponse:
    """Run `action` (the model keeps failing: the annotator steps back from it) and say
    `done(what it returned)` on the page at `to`; a conflict (nothing to step back from any
    more) says `refused` and why on the session page."""
    try:
        result = action(session_id=session_id, user=request.user)
    except ConflictError as error:
        messages.warning(request, f"{refused}: {error}.")
        return redirect("revision:session", session_id=session_id)
    messages.info(request, done(result))
    return redirect(to)


@login_required
@require_POST
@work_limited(outcome="Nothing was withdrawn.", back=_back_to_session)
@page_errors
def withdraw(request: HttpRequest, session_id: int) -> HttpResponse:
    """The model keeps failing on the last instruction: take it back into the form."""

    def done(turn) -> str:
        request.session[_withdrawn_key(session_id)] = {
            "instruction": turn.instruction,
            "instruction_type": turn.instruction_type,
        }
        return (
            "Your instruction was withdrawn (the model did not answer it) and is back in the "
            "box below: send it again, change it, or end the session if you are satisfied."
        )

    return _step_back(
        request,
        session_id,
        sessions.turn_withdraw,
        refused="Nothing was withdrawn",
        done=done,
        to=reverse("revision:session", args=[session_id]),
    )


@login_required
@require_POST
@work_limited(outcome="The session was not given up.", back=_back_to_session)
@page_errors
def give_up(request: HttpRequest, session_id: int) -> HttpResponse:
    """The model keeps failing before anything was rated: leave the session, marked given up."""
    return _step_back(
        request,
        session_id,
        functools.partial(sessions.session_give_up, now=timezone.now()),
        refused="The session was not given up",
        done=lambda session: (
            f"You gave up the session on “{session.question.text}”: the model did not answer, and "
            "nothing you rated was lost. It counts nowhere, and you will not get this question "
            "again. Start another session when you are ready."
        ),
        to=reverse("revision:home"),
    )


@login_required
@require_POST
@page_errors
def reopen(request: HttpRequest, session_id: int) -> HttpResponse:
    """A researcher puts a given-up session's (question, system) back for annotators; the
    study's report says what was done, or why not."""
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    study_id = selectors.session_study_id(session_id=session_id)
    try:
        session = sessions.session_reopen(
            session_id=session_id, user=request.user, now=timezone.now()
        )
    except ConflictError as error:
        messages.error(request, f"Not reopened: {error}.")
    else:
        who = session.annotator.get_username() if session.annotator else "its annotator"
        messages.success(
            request,
            f"Session {session.pk} reopened: “{session.question.text}” with "
            f"{session.system.name} goes to the next annotator who has not seen the question "
            f"(not {who}, who gave it up). The given-up session is kept.",
        )
    return redirect(reverse("revision-reports:report", args=[study_id]) + "#given-up-sessions")


@login_required
@require_POST
@page_errors
def finish(request: HttpRequest, session_id: int) -> HttpResponse:
    return _act(
        request,
        session_id,
        sessions.session_finish,
        "The session was not ended",
        now=timezone.now(),
        turns=_form_step(request, "turns"),
    )


@never_cache
@login_required
@work_limited(
    outcome="Your rating was not saved.",
    back=lambda rerating_id: (
        reverse("revision:rerating", args=[rerating_id]),
        "Back to the re-rating",
    ),
)
@page_errors
def rerating_page(request: HttpRequest, rerating_id: int) -> HttpResponse:
    page = selectors.rerating_page_get(rerating_id=rerating_id, user=request.user)
    context = {"page": page, "limits": TEXT_LIMITS}
    if request.method == "POST":
        try:
            reratings.rerating_submit(
                rerating_id=rerating_id,
                user=request.user,
                rating=request.POST.get("rating", ""),
                comment=request.POST.get("comment", ""),
                now=timezone.now(),
            )
        except SubmissionError as error:
            context.update(error=str(error), form=request.POST)
            return render(request, "revision/rerating.html", context, status=400)
        study = page.rerating.turn.session.study
        progress = selectors.rerating_progress(user=request.user, study_id=study.pk)
        saved = f"Rating saved: {progress['done']} of {progress['total']} re-rated"
        if progress["next_id"] is not None:  # straight on to the next turn of the study
            messages.success(request, f"{saved}. Thank you!")
            return redirect("revision:rerating", rerating_id=progress["next_id"])
        # The study's last one: say so, and go on to turns sent in another study, if any (the
        # count alone read as if nothing was left to rate).
        saved = f"{saved}: every turn sent to you in {study.name}. Thank you!"
        elsewhere = selectors.rerating_next_elsewhere(user=request.user, study_id=study.pk)
        if elsewhere is not None:
            messages.success(
                request,
                f"{saved} Next, the turns sent to you in {elsewhere.turn.session.study.name}.",
            )
            return redirect("revision:rerating", rerating_id=elsewhere.pk)
        messages.success(request, saved)
        return redirect("revision:home")
    return render(request, "revision/rerating.html", context)


UPLOAD_KINDS = {"questions": "Questions with documents", "sessions": "Sessions (KIWI format)"}


def _run_upload(kind: str, path: str, name: str, systems: list[str], user):
    if kind == "sessions":
        return imports.sessions_import(path=path, study_name=name)
    return imports.study_upload(path=path, study_name=name, systems=systems, user=user)


@login_required
@uploads_limited
@page_errors
def upload(request: HttpRequest) -> HttpResponse:
    """Researchers upload a study's questions (JSON Lines) or KIWI sessions; errors name the line."""
    require_role(request.user, ADMIN, RESEARCHER, message="Only researchers upload studies.")
    context = {"kinds": UPLOAD_KINDS, "form": request.POST}
    if request.method == "POST":
        upload_file = request.FILES.get("file")
        name = request.POST.get("study", "").strip()
        kind = request.POST.get("kind", "questions")
        systems = [s.strip() for s in request.POST.get("systems", "").split(",") if s.strip()]
        if upload_file is None or not name or kind not in UPLOAD_KINDS:
            context["error"] = "Choose a file, a study name and what the file holds."
            return render(request, "revision/upload.html", context, status=400)
        if kind == "sessions" and systems:
            # A sessions file brings its systems (model_name); the field was dropped unread.
            context["error"] = (
                "Systems: a sessions file names its own systems (model_name); leave Systems "
                "empty, or upload questions with documents. Nothing was written."
            )
            return render(request, "revision/upload.html", context, status=400)
        if too_large := upload_size_problem(upload_file.size):
            context["error"] = too_large
            return render(request, "revision/upload.html", context, status=400)
        with uploaded_path(upload_file, suffix=".jsonl") as path:
            try:
                summary = _run_upload(kind, path, name, systems, request.user)
            except AnnotateError as error:
                context["error"] = _upload_refusal(error, path=path, upload=upload_file)
                return render(request, "revision/upload.html", context, status=error.http_status)
        messages.success(request, summary.message.replace(path, upload_file.name))
        study = Study.objects.filter(name=name).first()  # its report: what to do next
        return (
            redirect("revision-reports:report", study.pk) if study else redirect("revision:upload")
        )
    return render(request, "revision/upload.html", context)


def _upload_refusal(error: AnnotateError, *, path: str, upload) -> str:
    """The refusal in the page's words: a system the command takes as --system is the
    Systems field here."""
    if isinstance(error, ImportFileError) and error.path == "--system":
        return f"Systems: {error.problem}. Nothing was written."
    return refused_upload(error, path=path, upload=upload)


# --- Researchers: re-rating (paper §5, "Human") ------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def rerate(request: HttpRequest, study_id: int) -> HttpResponse:
    """Send a seeded random sample of finished turns to other annotators for re-rating."""
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    study = get_object_or_404(Study, pk=study_id)
    form = RerateForm(request.POST or None, study=study)
    status = 200
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            sent = reratings.reratings_sample(
                study=study,
                annotators=list(data["annotators"]),
                size=data["size"],
                seed=data["seed"],
                now=timezone.now(),
                sent_before=data["sent_before"],
            )
        except reratings.RerateRepeatError as error:
            # The page again, fresh: what was sent is shown, and sending again is deliberate.
            messages.error(
                request,
                f"{error}. Nothing more was sent; to send another sample, send the form again.",
            )
            return redirect("revision:rerate", study_id=study.pk)
        except AnnotateError as error:
            form.add_error(getattr(error, "field", None), f"{error}. Nothing was sent.")
            status = error.http_status
        else:
            messages.success(request, f"Sent {len(sent)} turns for re-rating.")
            return redirect("revision:rerate", study_id=study.pk)
    elif request.method == "POST":
        status = 400
    context = {
        "study": study,
        "form": form,
        "summary": selectors.rerate_summary(study=study),
        "eligible": form.eligible_for_chosen(),
        "prerequisites": selectors.rerate_prerequisites_missing(study=study, user=request.user),
    }
    return render(request, "revision/rerate.html", context, status=status)
