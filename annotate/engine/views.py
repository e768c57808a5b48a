"""Pages of the engine: endpoints (admins), generation runs, a run's live progress."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods, require_POST

from annotate.engine.errors import (
    EndpointError,
    EndpointNameTakenError,
    EngineError,
    EngineNotFoundError,
    EngineRunDoneError,
    EngineRunEndedError,
)
from annotate.engine.forms import EndpointForm, GenerationRunForm, RunAgainForm
from annotate.engine.pages import run_again, run_again_cost, run_form_submit
from annotate.engine.selectors import (
    endpoint_last_test,
    endpoint_test_verdict,
    engine_run_list,
    engine_run_origin,
    engine_run_progress,
    engine_run_recent_errors,
    engine_run_results_url,
    engine_run_title,
)
from annotate.engine.services import (
    AgainWarning,
    endpoint_create,
    endpoint_get,
    endpoint_test,
    endpoint_update,
    engine_run_again_warning,
    engine_run_estimate_new,
    engine_run_get,
    engine_run_has_work_left,
    engine_run_start,
    engine_run_stop,
)
from annotate.engine.services.generation import (
    generating_system_get_or_create,
    generation_run_create,
)
from annotate.engine.services.runs import (
    engine_run_check_may_start,
    engine_run_check_may_stop,
    engine_run_may_control,
)
from annotate.errors import AnnotateError
from annotate.http import error_page, rate_limited
from annotate.roles import (
    ADMIN,
    ADMINS_ONLY,
    RESEARCHER,
    RESEARCHERS_ONLY,
    is_admin,
    require_role,
)
from annotate.templatetags.money import usd
from annotate.throttling import MODEL_CALLS_SCOPE, polled


def _require_researcher(request: HttpRequest) -> None:
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)


def _require_admin(request: HttpRequest) -> None:
    require_role(request.user, ADMIN, message=ADMINS_ONLY)


def _run_or_404(run_id: int):
    try:
        return engine_run_get(run_id=run_id)
    except EngineNotFoundError:
        raise Http404 from None


# --- Endpoints (admins) -----------------------------------------------------------------------


@login_required
def endpoint_list(request: HttpRequest) -> HttpResponse:
    _require_admin(request)
    from annotate.engine.models import Endpoint

    return render(request, "engine/endpoint_list.html", {"endpoints": Endpoint.objects.all()})


@login_required
@require_http_methods(["GET", "POST"])
def endpoint_edit(request: HttpRequest, endpoint_id: int | None = None) -> HttpResponse:
    _require_admin(request)
    endpoint = None
    if endpoint_id is not None:
        try:
            endpoint = endpoint_get(endpoint_id=endpoint_id)
        except EngineNotFoundError:
            raise Http404 from None
    form = EndpointForm(request.POST or None, instance=endpoint)
    status = 200
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        name = data.pop("name")
        for limit in ("requests_per_minute", "tokens_per_minute"):
            if data.get(limit) is None:  # left blank on a new endpoint: the service's default
                data.pop(limit, None)
        created = endpoint is None
        try:
            if created:
                endpoint = endpoint_create(name=name, **data)
            else:  # as stored: the form wrote its values on `endpoint` while validating
                stored = endpoint_get(endpoint_id=endpoint.pk)
                endpoint = endpoint_update(endpoint=stored, name=name, **data)
        except EngineError as error:
            _error_beside_its_field(form, error)
            status = error.http_status
        else:
            messages.success(
                request, f"Endpoint {endpoint.name} {'created' if created else 'saved'}."
            )
            return redirect("engine:endpoint-edit", endpoint_id=endpoint.pk)
    elif request.method == "POST":
        status = 400
    last_test = endpoint_last_test(endpoint=endpoint) if endpoint else None
    context = {
        "form": form,
        "endpoint": endpoint,
        "last_test": last_test,
        "test_verdict": endpoint_test_verdict(call=last_test) if last_test else None,
    }
    return render(request, "engine/endpoint_edit.html", context, status=status)


def _error_beside_its_field(form: EndpointForm, error: EngineError) -> None:
    """Show the service's error about field x beside field x, any other above the form; a name
    taken links to the endpoint that has it."""
    if isinstance(error, EndpointNameTakenError):
        taken = error.endpoint
        url = reverse("engine:endpoint-edit", args=[taken.pk])
        link = format_html(
            '{} <a href="{}" id="endpoint-name-taken">Open endpoint {}</a>', error.reason, url,
            taken.name,
        )  # fmt: skip
        form.add_error("name", link)
    elif isinstance(error, EndpointError) and error.field in form.fields:
        form.add_error(error.field, error.reason)
    else:
        form.add_error(None, str(error))


@login_required
@require_POST
@rate_limited(  # a real call each time: on the user's model call rate (MODEL_CALL_RATE)
    MODEL_CALLS_SCOPE,
    what="model calls",
    outcome="Nothing was sent.",
    back=lambda endpoint_id: (reverse("engine:endpoint-edit", args=[endpoint_id]), "The endpoint"),
)
def endpoint_test_view(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    """Make one tiny call (10 s timeout at most, no retries) and show its answer or error."""
    _require_admin(request)
    try:
        endpoint = endpoint_get(endpoint_id=endpoint_id)
    except EngineNotFoundError:
        raise Http404 from None
    endpoint_test(endpoint=endpoint)
    return redirect("engine:endpoint-edit", endpoint_id=endpoint.pk)


# --- Runs -------------------------------------------------------------------------------------


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    _require_researcher(request)
    return render(request, "engine/run_list.html", {"runs": engine_run_list()[:200]})


@login_required
def run_detail(request: HttpRequest, engine_run_id: int) -> HttpResponse:
    _require_researcher(request)
    run = _run_or_404(engine_run_id)
    progress = _page_progress(run, request.user)
    may_control = engine_run_may_control(user=request.user, endpoint=run.endpoint)
    title = engine_run_title(run=run)
    context = {
        "run": run,
        "progress": progress,
        "errors": engine_run_recent_errors(run=run),
        "results_url": engine_run_results_url(run=run),
        "origin": engine_run_origin(run=run),
        "title": title,
        "description": _description_shown(run.description, title=title),
        "may_control": may_control,
        # Run again over labels another run wrote (a judge run): said before, and the box,
        # there but hidden while the run is active (its script shows them if it ends so).
        "replace_warning": progress["replace_warning"],
        "again": RunAgainForm(
            initial={
                "spending_cap_usd": run.spending_cap_usd,
                "replace_seen": progress["replace_seen"],
            },
            asks_replace=bool(progress["replace_warning"]) or progress["active"],
        ),
    }
    return render(request, "engine/run_detail.html", context)


def _description_shown(description: str, *, title: str) -> str:
    """The run's description under its heading, or "" when it only says the heading again (a
    verbalizer run's "Verbalizer: system S on set E" under "System S on set E")."""
    if title and description.lower().endswith(title.lower()):
        return ""
    return description


@polled  # reloaded every few seconds while the work runs
@login_required
def run_progress(request: HttpRequest, engine_run_id: int) -> JsonResponse:
    """The JSON the run page polls."""
    _require_researcher(request)
    run = _run_or_404(engine_run_id)
    return JsonResponse(
        {**_page_progress(run, request.user), "errors": engine_run_recent_errors(run=run)}
    )


def _page_progress(run, user) -> dict:
    """The run's progress with `cost_shown` and `possibly_billed_shown` (the amounts as the
    page prints them, the money filter's dollars and cents, for its script), `work_left`:
    whether Run again would do anything (read once the run has ended; while it runs its form is
    hidden anyway), `again_confirm`: the cost Run again confirms on a paid endpoint (None:
    none to confirm, or `user` may not run it), and `replace_warning` (None: none, or `user`
    may not run it) with its `replace_seen`: what Run again would overwrite that another run
    wrote (`engine_run_again_warning`), for the page's script to say once the run ends."""
    progress = engine_run_progress(run=run)
    progress["cost_shown"] = usd(progress["cost_usd"])
    progress["possibly_billed_shown"] = usd(progress["possibly_billed_usd"])
    progress["work_left"] = progress["active"] or engine_run_has_work_left(run=run)
    # What Run again confirms once its form shows (on a paid endpoint; the page's script puts it
    # on the button when the run ends while the page is open). Estimated only for who may press.
    shows = not progress["active"] and progress["work_left"]
    may = shows and engine_run_may_control(user=user, endpoint=run.endpoint)
    cost = run_again_cost(run) if may else None
    progress["again_confirm"] = cost and {"total": cost.value, "question": cost.question}
    replace = engine_run_again_warning(run=run) if may else AgainWarning()
    progress["replace_warning"] = replace.text or None
    progress["replace_seen"] = replace.seen
    return progress


@login_required
@require_POST
def run_stop(request: HttpRequest, engine_run_id: int) -> HttpResponse:
    _require_researcher(request)
    run = _run_or_404(engine_run_id)
    try:
        engine_run_check_may_stop(user=request.user, endpoint=run.endpoint)
    except AnnotateError as error:
        return _refused_on_run(request, run, error)
    try:
        engine_run_stop(run=run)
    except EngineRunEndedError as error:  # it ended as Stop was pressed: say so, change nothing
        messages.info(request, str(error))
    return redirect("engine:run-detail", engine_run_id=run.pk)


@login_required
@require_POST
def run_resume(request: HttpRequest, engine_run_id: int) -> HttpResponse:
    _require_researcher(request)
    run = _run_or_404(engine_run_id)
    try:
        run_again(request, run)
    except EngineRunDoneError as error:  # nothing to do is no failure: back to the run
        messages.info(request, str(error))
        return redirect("engine:run-detail", engine_run_id=run.pk)
    except AnnotateError as error:
        return _refused_on_run(request, run, error)
    return redirect("engine:run-detail", engine_run_id=run.pk)


def _refused_on_run(request: HttpRequest, run, error: AnnotateError) -> HttpResponse:
    back = (reverse("engine:run-detail", args=[run.pk]), f"Back to run #{run.pk}")
    return error_page(request, error, back=back)


@login_required
@require_http_methods(["GET", "POST"])
def generation_new(request: HttpRequest) -> HttpResponse:
    """Estimate (nothing spent) or start a generation run; starting returns at once."""
    _require_researcher(request)
    form = GenerationRunForm(request.POST or None)
    sent = run_form_submit(
        request,
        form,
        estimate=lambda: engine_run_estimate_new(
            create=lambda: _generation_create(request, form.cleaned_data)
        ),
        start=lambda: _generation_start(request, form.cleaned_data),
        endpoint=lambda: form.cleaned_data["endpoint"],
    )
    if sent.started is not None:
        return redirect("engine:run-detail", engine_run_id=sent.started.pk)
    context = {
        "form": form,
        "estimate": sent.estimate,
        "confirm": sent.confirm,
        "is_admin": is_admin(request.user),
    }
    return sent.page(render(request, "engine/generation_new.html", context, status=sent.status))


@transaction.atomic
def _generation_start(request: HttpRequest, data: dict):
    """One transaction, one commit: the run starts (in the background) once it commits."""
    run = _generation_create(request, data)
    engine_run_start(run=run, user=request.user)
    return run


def _generation_create(request: HttpRequest, data: dict):
    endpoint = data["endpoint"]
    engine_run_check_may_start(user=request.user, endpoint=endpoint)
    system = generating_system_get_or_create(name=data["system"], endpoint=endpoint)
    return generation_run_create(
        benchmark=data["benchmark"],
        systems=[system],
        endpoint=endpoint,
        user=request.user,
        subset=data["subset"] or None,
        instruction_ids=data["instruction_ids"] or None,
        sample=data["sample"],
        seed=data["seed"] or 0,
        template=data["template"],
        replace=data["replace"],
        spending_cap_usd=data["spending_cap_usd"],
    )
