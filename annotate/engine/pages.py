"""What the pages that start an engine run share: their "Estimate the cost" and "Start" buttons.

Generation, the InFoBench judge, the KIWI classifiers and rating judge and the verbalizer each
have a form with both buttons (`templates/engine/run_estimate.html` shows the estimate,
`templates/engine/run_start_button.html` is the Start button). On an endpoint that spends money,
Start first shows the estimate and a "Start for $X" button carrying that total; the run starts
only when the total sent equals the one computed again then, as the crowd publish page does, and
once more inside the start's transaction with the endpoint's row locked
(`engine_run_cost_confirmed`), so a price edited in between never starts a run unconfirmed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Generic, TypeVar

from django import forms
from django.core.cache import cache
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.template.defaultfilters import pluralize

from annotate.engine.errors import (
    EngineCostNotConfirmedError,
    EngineRunError,
    EngineStartRepeatedError,
)
from annotate.engine.forms import RunAgainForm
from annotate.engine.models import Endpoint, EngineRun
from annotate.engine.selectors import engine_run_unit_name
from annotate.engine.services import (
    RunEstimate,
    engine_run_cap_set,
    engine_run_check_again,
    engine_run_estimate,
    engine_run_start,
)
from annotate.engine.services.runs import (
    engine_run_check_key,
    engine_run_check_may_start,
    engine_run_cost_confirmed,
    engine_run_may_control,
)
from annotate.errors import AnnotateError
from annotate.http import form_refusal
from annotate.templatetags.money import usd_at_most

T = TypeVar("T")

ESTIMATE_BUTTON = "estimate"  # the name of the "Estimate the cost" button
CONFIRM_FIELD = "confirm_total"  # the "Start for $X" button's name (after the form's prefix)
# How long a confirmed paid Start refuses the same form sent again by the same user.
START_REPEAT_SECONDS = 60


@dataclass(frozen=True)
class StartConfirmation:
    """The "Start for $X" button of a run on an endpoint that spends money."""

    total: Decimal  # the estimated cost the button confirms
    field: str  # the button's name, with the form's prefix
    asked: bool = False  # Start was pressed without a confirmed total: nothing started
    stale: Decimal | None = None  # the total confirmed, when it was no longer the estimate's

    @property
    def value(self) -> str:
        """The total as the button sends it (never localized)."""
        return str(self.total)


@dataclass(frozen=True)
class RunFormOutcome(Generic[T]):
    """What a sent run form came to: an estimate, a started run, or the form to show again."""

    estimate: RunEstimate | None = None
    confirm: StartConfirmation | None = None  # set when the estimate is of a paid endpoint
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
    endpoint: Callable[[], Endpoint | None],
    refusals: tuple[type[Exception], ...] = (AnnotateError,),
    sent: bool | None = None,
) -> RunFormOutcome[T]:
    """Estimate or start the run the form asks for, as its button says.

    `estimate()` answers the Estimate button without starting or keeping anything (the
    services' `engine_run_estimate_new`), `start()` makes and starts the run. Both run only on a
    valid form. `endpoint()` is the endpoint the run would call (None: unknown, `start` refuses
    it): when it spends money (its estimate above $0), Start starts only if the form sent the estimated total
    (`confirm_total`) and it equals `estimate()` computed now; otherwise nothing starts and the
    outcome is the estimate to confirm (`confirm`). A refusal (one of `refusals`, with its `http_status`) is shown on the form,
    beside the field it names, and nothing is kept (over the user's run start limit, the
    outcome's `page` adds Retry-After). `sent` says whether this form was sent
    (default: the request is a POST; a page with two forms says which one was).
    """
    if not (request.method == "POST" if sent is None else sent):
        return RunFormOutcome()
    if not form.is_valid():
        return RunFormOutcome(status=400)
    try:
        chosen = endpoint()
        if chosen is None or not chosen.spends_money:
            if ESTIMATE_BUTTON in request.POST:
                return RunFormOutcome(estimate=estimate())
            return RunFormOutcome(started=start())
        if ESTIMATE_BUTTON not in request.POST:  # a start it could only refuse asks nothing
            # Who may spend first: a researcher is told the endpoint is an admin's, not which
            # variable the server reads its key from.
            engine_run_check_may_start(user=request.user, endpoint=chosen)
            engine_run_check_key(endpoint=chosen)
        now = estimate()
        field = form.add_prefix(CONFIRM_FIELD)
        if ESTIMATE_BUTTON in request.POST:
            if not now.cost_usd:  # priced at nothing: Start needs no confirmed total
                return RunFormOutcome(estimate=now)
            return RunFormOutcome(estimate=now, confirm=StartConfirmation(now.cost_usd, field))
        if not now.cost_usd:
            return RunFormOutcome(started=start())
        confirmed = _confirmed_total(request.POST.get(field))
        if confirmed is None or confirmed != now.cost_usd:
            confirm = StartConfirmation(now.cost_usd, field, asked=True, stale=confirmed)
            return RunFormOutcome(estimate=now, confirm=confirm)
        try:
            # Checked again as it starts (engine_run_cost_confirmed), once per form sent.
            with _started_once(request), engine_run_cost_confirmed(total=confirmed):
                return RunFormOutcome(started=start())
        except EngineCostNotConfirmedError:  # its prices were edited since: ask again
            chosen.refresh_from_db()  # the form's instance, which `estimate` prices with
            now = estimate()
            confirm = StartConfirmation(now.cost_usd, field, asked=True, stale=confirmed)
            return RunFormOutcome(estimate=now, confirm=confirm, status=409)
    except refusals as error:
        form_refusal(form, error)
        return RunFormOutcome(
            status=getattr(error, "http_status", 400),
            retry_after=getattr(error, "retry_after", None),
        )


@contextmanager
def _started_once(request: HttpRequest) -> Iterator[None]:
    """Refuse (EngineStartRepeatedError) a confirmed paid Start whose form this user sent to
    this page in the last START_REPEAT_SECONDS, unless that one was refused.

    A double click on "Start for $X", or the form sent again, made a second run of the same
    work: its estimate is still the first's (nothing is stored before the run does it), and
    both ran, each paying for every call. The mark is the cache's (shared by the site's
    processes with CACHE_URL), taken by an atomic add before the run is made."""
    sent = sorted(
        (name, tuple(request.POST.getlist(name)))
        for name in request.POST
        if name != "csrfmiddlewaretoken"
    )
    digest = hashlib.sha256(repr((request.user.pk, request.path, sent)).encode()).hexdigest()
    key = f"engine-paid-start:{digest}"
    if not cache.add(key, True, timeout=START_REPEAT_SECONDS):
        raise EngineStartRepeatedError(
            "This Start for the confirmed total was sent twice (a double click, or the form "
            "sent again): the first one started the run (see Runs), this one started nothing."
        )
    try:
        yield
    except BaseException:
        cache.delete(key)  # refused: nothing started, so the same form may be sent again
        raise


def _confirmed_total(sent: str | None) -> Decimal | None:
    """The total a "Start for $X" button sent; None when none (or not a number) was."""
    try:
        total = Decimal(sent or "")
    except InvalidOperation:
        return None
    return total if total.is_finite() else None


@dataclass(frozen=True)
class RunAgainCost:
    """What "Run again" of a run on an endpoint that spends money asks to confirm."""

    total: Decimal  # the estimate of what is left, sent back as `confirm_total`
    question: str  # the button's confirmation dialog (data-confirm)

    @property
    def value(self) -> str:
        return str(self.total)


def run_again_cost(run: EngineRun) -> RunAgainCost | None:
    """The cost "Run again" of `run` confirms: None on the offline fake, or with nothing left."""
    if not run.endpoint.spends_money:
        return None
    try:
        estimate = engine_run_estimate(run=run)
    except EngineRunError:  # a kind this process cannot load: the start refuses it, saying why
        return None
    if not estimate.units or not estimate.cost_usd:  # nothing left, or priced at nothing
        return None
    question = (
        f"Run again on {run.endpoint.name}, a paid API? "
        f"{engine_run_unit_name(run=run).capitalize()} left: {estimate.units}; "
        f"{estimate.calls} call{pluralize(estimate.calls)}, about {estimate.prompt_tokens} "
        f"prompt tokens and at most {estimate.completion_tokens} completion tokens: "
        f"at most {usd_at_most(estimate.cost_usd)}."
    )
    return RunAgainCost(estimate.cost_usd, question)


def _run_again_check_confirmed(request: HttpRequest, run: EngineRun) -> Decimal | None:
    """Refuse Run again on a paid endpoint unless the form sent the cost it would have now;
    return that total (None when there is nothing to confirm). Who may not start it at all
    hears that from the start instead."""
    if not engine_run_may_control(user=request.user, endpoint=run.endpoint):
        return None
    cost = run_again_cost(run)
    if cost is None:  # nothing is spent, or nothing is left (the start says so)
        return None
    confirmed = _confirmed_total(request.POST.get(CONFIRM_FIELD))
    if confirmed == cost.total:
        return confirmed
    said = "no total was confirmed" if confirmed is None else f"you confirmed ${confirmed}"
    raise EngineCostNotConfirmedError(
        f"Run {run.pk} calls a paid API and running it again would now cost at most "
        f"${cost.value} ({said}): nothing was started. Go back to the run and press Run again "
        "to confirm this total."
    )


def run_again(
    request: HttpRequest, run: EngineRun, *, start: Callable[[], object] | None = None
) -> None:
    """The run pages' "Run again": on an endpoint that spends money, only with the cost it
    would have now confirmed (`confirm_total`, as `run_again_cost` gives it to the page); over
    labels another run wrote, only with "Replace earlier labels" ticked (`replace`, held to
    the labels the page showed by `replace_seen`, `engine_run_check_again`, first); then the
    spending cap their form sends (when it has the field), then `start()` (default: start the
    engine run). Raises the refusal (AnnotateError, or what `start` raises); a refused start
    keeps the cap as it was."""
    form = RunAgainForm(request.POST, asks_replace=True)
    label = form.fields["spending_cap_usd"].label
    if not form.is_valid():  # shown on a page of its own: say which field it is about
        raise EngineRunError(f"{label}: {' '.join(form.errors['spending_cap_usd'])}")
    with transaction.atomic():
        # The check (a judge run's: its judge's row) before the cap (the run's row), in the
        # order the start takes them: two Run again at once, one with a cap, each held the
        # lock the other waited for (a deadlock).
        try:
            engine_run_check_again(
                run=run,
                replace=form.cleaned_data["replace"],
                seen=form.cleaned_data["replace_seen"],
            )
        except EngineRunError as error:
            if error.page_message == str(error):
                raise
            status = error.http_status
            raise EngineRunError(
                error.page_message, field=error.field, http_status=status
            ) from None
        if "spending_cap_usd" in request.POST:  # absent: unchanged
            try:
                engine_run_cap_set(
                    run=run, cap=form.cleaned_data["spending_cap_usd"], user=request.user
                )
            except EngineRunError as error:
                if error.field != "spending_cap_usd":
                    raise
                raise EngineRunError(f"{label}: {error}", field=error.field) from None
        confirmed = _run_again_check_confirmed(request, run)  # refused: the cap is rolled back
        with engine_run_cost_confirmed(total=confirmed):  # checked again as it starts
            if start is None:
                engine_run_start(run=run, user=request.user)
            else:
                start()
