"""Pages of the LLM judge: the judges and a form to make one, the runs, a form to start one,
its progress."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotate.engine.forms import RunAgainForm
from annotate.engine.pages import run_again, run_again_cost, run_form_submit
from annotate.engine.services.runs import AgainWarning, engine_run_may_control
from annotate.errors import AnnotateError
from annotate.http import error_page, form_refusal
from annotate.roles import ADMIN, RESEARCHER, RESEARCHERS_ONLY, is_admin, require_role
from annotate.throttling import polled
from evaluation.errors import (
    EvaluationError,
    JudgeNotFoundError,
    JudgeReplaceNotConfirmedError,
    JudgeRunError,
)
from evaluation.judge_forms import CHOOSE_BENCHMARK, JudgeConfigForm, JudgeRunForm
from evaluation.models import JudgeRun
from evaluation.selectors.judge_configs import (
    judge_config_get,
    judge_config_list,
    judge_config_prerequisites_missing,
)
from evaluation.selectors.judge_label_runs import judge_run_mixed_note
from evaluation.selectors.judge_runs import (
    judge_prerequisites_missing,
    judge_run_list,
    judge_run_progress,
)
from evaluation.services.judge_configs import judge_config_create
from evaluation.services.judge_runs import (
    judge_run_again_warning,
    judge_run_check_start,
    judge_run_create,
    judge_run_estimate_new,
    judge_run_get,
    judge_run_resume,
    judge_run_start,
)


def _require_researcher(request: HttpRequest) -> None:
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)


@login_required
@require_http_methods(["GET", "POST"])
def config_list(request: HttpRequest) -> HttpResponse:
    """The judge configurations, and a form to make one on an existing engine endpoint."""
    _require_researcher(request)
    form = JudgeConfigForm(request.POST or None)
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            config = judge_config_create(user=request.user, **form.cleaned_data)
        except (AnnotateError, EvaluationError) as error:
            form_refusal(form, error)  # a name taken beside the name, a paid endpoint beside it
            status = error.http_status
        else:
            messages.success(request, f"Created the judge {config.name} on {config.endpoint}.")
            return redirect("judge:config-list")
    elif request.method == "POST":
        status = 400
    context = {
        "configs": judge_config_list(),
        "form": form,
        "is_admin": is_admin(request.user),
        "prerequisites": judge_config_prerequisites_missing(user=request.user),
    }
    return render(request, "evaluation/judge_config_list.html", context, status=status)


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    """Every judge run, or one judge's (`?judge=<configuration id>`)."""
    _require_researcher(request)
    config = None
    if "judge" in request.GET:
        try:
            config = judge_config_get(config_id=request.GET["judge"])
        except JudgeNotFoundError:
            raise Http404 from None
    context = {"runs": judge_run_list(config=config)[:200], "config": config}
    return render(request, "evaluation/judge_run_list.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def run_new(request: HttpRequest) -> HttpResponse:
    """Estimate (nothing spent, nothing kept) or start a judge run; starting returns at once.
    The estimate says which responses the judge labelled already; starting over them needs the
    form's `replace` ticked. Another benchmark chosen sends the form to show it again with what
    was typed and that benchmark's systems (JudgeRunForm)."""
    _require_researcher(request)
    choosing = CHOOSE_BENCHMARK in request.POST
    if choosing:
        form = JudgeRunForm(chosen=request.POST)
    else:
        form = JudgeRunForm(request.POST or None, chosen=request.GET)
    refused: list[JudgeReplaceNotConfirmedError] = []
    sent = run_form_submit(
        request,
        form,
        estimate=lambda: judge_run_estimate_new(
            create=lambda: _judge_run_create(request, form.cleaned_data)
        ),
        start=lambda: _judge_run_start(request, form.cleaned_data, refused=refused),
        endpoint=lambda: form.cleaned_data["config"].endpoint,
        refusals=(AnnotateError, EvaluationError),
        sent=request.method == "POST" and not choosing,
    )
    if sent.started is not None:
        # The run works in the background; its engine page shows the progress live.
        return redirect("engine:run-detail", engine_run_id=sent.started.engine_run_id)
    before = sent.estimate.labels_before if sent.estimate else None
    context = {
        "form": form,
        "estimate": sent.estimate,
        # What the page shows it replaces, sent back with the box (judge_run_check_start).
        "replace_seen": refused[0].seen if refused else before.seen if before else "",
        "confirm": sent.confirm,
        "is_admin": is_admin(request.user),
        "prerequisites": judge_prerequisites_missing(),
    }
    return sent.page(render(request, "evaluation/judge_run_new.html", context, status=sent.status))


def _judge_run_start(
    request: HttpRequest, data: dict, *, refused: list[JudgeReplaceNotConfirmedError]
) -> JudgeRun:
    """One transaction: a refused start (replacing labels unconfirmed, another run of the judge
    still writing them, the user's run start limit) keeps no run. A refusal to replace is said
    beside the box (no API field name) and appended to `refused`, for what the page shows."""
    try:
        with transaction.atomic():
            run = _judge_run_create(request, data)
            seen = request.POST.get("replace_seen", "")  # "": the page showed no warning
            judge_run_check_start(run=run, replace=data["replace"], seen=seen)
            judge_run_start(run=run, user=request.user)
    except JudgeReplaceNotConfirmedError as error:
        refused.append(error)
        on_page = JudgeRunError(error.page_message, field="replace")
        on_page.http_status = error.http_status
        raise on_page from None
    return run


def _judge_run_create(request: HttpRequest, data: dict) -> JudgeRun:
    return judge_run_create(
        config=data["config"],
        benchmark=data["benchmark"],
        systems=data["systems"],
        user=request.user,
        subset=data["subset"] or None,
        instruction_ids=data["instruction_ids"] or None,
        sample=data["sample"],
        seed=data["seed"] or 0,
        spending_cap_usd=data["spending_cap_usd"],
    )


@polled  # reloaded every few seconds while the work runs
@login_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    _require_researcher(request)
    try:
        run = judge_run_get(run_id=run_id)
    except JudgeNotFoundError:
        raise Http404 from None
    progress = judge_run_progress(run=run)
    may_control = run.engine_run is not None and engine_run_may_control(
        user=request.user, endpoint=run.engine_run.endpoint
    )
    shows_again = may_control and not progress.active and progress.questions_missing > 0
    replace = judge_run_again_warning(run=run) if shows_again else AgainWarning()
    context = {
        "run": run,
        "progress": progress,
        "running": progress.active,
        "may_control": may_control,
        "again_cost": run_again_cost(run.engine_run) if shows_again else None,
        # A stopped run that replaced part of an earlier run's labels leaves them mixed.
        "mixed_note": "" if progress.active else judge_run_mixed_note(run=run),
        # Run again over labels a later run wrote: said before, and the box to confirm it.
        "replace_warning": replace.text,
        "again": RunAgainForm(
            initial={
                "spending_cap_usd": run.engine_run.spending_cap_usd if run.engine_run else None,
                "replace_seen": replace.seen,
            },
            asks_replace=bool(replace.text),
        ),
    }
    return render(request, "evaluation/judge_run_detail.html", context)


@login_required
@require_http_methods(["POST"])
def run_resume(request: HttpRequest, run_id: int) -> HttpResponse:
    _require_researcher(request)
    try:
        run = judge_run_get(run_id=run_id)
    except JudgeNotFoundError:
        raise Http404 from None
    try:
        # The page's cap field as on the engine run's page: a run its cap stopped goes on only
        # with a higher one.
        run_again(
            request, run.engine_run, start=lambda: judge_run_resume(run=run, user=request.user)
        )
    except JudgeNotFoundError:
        raise Http404 from None
    except (AnnotateError, EvaluationError) as error:
        back = (reverse("judge:run-detail", args=[run.pk]), f"Back to judge run #{run.pk}")
        return error_page(request, error, back=back)
    return redirect("engine:run-detail", engine_run_id=run.engine_run_id)
