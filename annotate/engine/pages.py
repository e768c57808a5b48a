"""What the pages that start an engine run share: their "Estimate the cost" and "Start" buttons.

Generation, the InFoBench judge, the KIWI classifiers and rating judge and the verbalizer each
have a form with both buttons (`templates/engine/run_estimate.html` shows the estimate).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from django import forms
from django.db import transaction
from django.http import HttpRequest, HttpResponse

from annotate.engine.errors import EngineRunError
from annotate.engine.forms import RunAgainForm
from annotate.engine.models import EngineRun
from annotate.engine.services import RunEstimate, engine_run_cap_set, engine_run_start
from annotate.errors import AnnotateError
from annotate.http import form_refusal

T = TypeVar("T")

ESTIMATE_BUTTON = "estimate"  # the name of the "Estimate the cost" button


@dataclass(frozen=True)
class RunFormOutcome(Generic[T]):
    """What a sent run form came to: an estimate, a started run, or the form to show again."""

    estimate: RunEstimate | None = None
    started: T | None = None  # what `start` returned
    status: int = 200  # the page's status when the form is shown again
    retry_after: int | None = None  # seconds, when a rate limit refused the start

    def page(self, response: HttpResponse) -> HttpResponse:
        """The page showing the form again, saying when to retry (Retry-After) if a rate limit
        refused the start."""
        if self.retry_after is not None:
            response["Retry-After"] = str(self.retry_after)
        return response


def run_form_submit(
    request: HttpRequest,
    form: forms.Form,
    *,
    estimate: Callable[[], RunEstimate],
    start: Callable[[], T],
    refusals: tuple[type[Exception], ...] = (AnnotateError,),
    sent: bool | None = None,
) -> RunFormOutcome[T]:
    """Estimate or start the run the form asks for, as its button says.

    `estimate()` answers the Estimate button without starting or keeping anything (the
    services' `engine_run_estimate_new`), `start()` makes and starts the run. Both run only on a
    valid form; a refusal (one of `refusals`, with its `http_status`) is shown on the form,
    beside the field it names, and nothing is kept (over the user's run start limit, the
    outcome's `page` adds Retry-After). `sent` says whether this form was sent
    (default: the request is a POST; a page with two forms says which one was).
    """
    if not (request.method == "POST" if sent is None else sent):
        return RunFormOutcome()
    if not form.is_valid():
        return RunFormOutcome(status=400)
    try:
        if ESTIMATE_BUTTON in request.POST:
            return RunFormOutcome(estimate=estimate())
        return RunFormOutcome(started=start())
    except refusals as error:
        form_refusal(form, error)
        return RunFormOutcome(
            status=getattr(error, "http_status", 400),
            retry_after=getattr(error, "retry_after", None),
        )


def run_again(
    request: HttpRequest, run: EngineRun, *, start: Callable[[], object] | None = None
) -> None:
    """The run pages' "Run again": the spending cap their form sends (when it has the field),
    then `start()` (default: start the engine run). Raises the refusal (AnnotateError, or what
    `start` raises); a refused start keeps the cap as it was."""
    form = RunAgainForm(request.POST)
    label = form.fields["spending_cap_usd"].label
    if not form.is_valid():  # shown on a page of its own: say which field it is about
        raise EngineRunError(f"{label}: {' '.join(form.errors['spending_cap_usd'])}")
    with transaction.atomic():
        if "spending_cap_usd" in request.POST:  # absent: unchanged
            try:
                engine_run_cap_set(
                    run=run, cap=form.cleaned_data["spending_cap_usd"], user=request.user
                )
            except EngineRunError as error:
                if error.field != "spending_cap_usd":
                    raise
                raise EngineRunError(f"{label}: {error}", field=error.field) from None
        if start is None:
            engine_run_start(run=run, user=request.user)
        else:
            start()
