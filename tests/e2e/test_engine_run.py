"""A generation run started from its page in a real browser: the run page shows progress move
by itself (polling, no reload) until the run ends."""

import time
from decimal import Decimal

import pytest

from annotate.engine.models import EngineRun, RunStatus
from annotate.engine.services import (
    endpoint_create,
    engine_background_wait,
    engine_run_estimate,
)
from annotate.roles import ADMIN
from annotate.templatetags.money import usd, usd_at_most
from tests.evaluation.openai_stub import Fail, StubOpenAI
from tests.factories import BenchmarkFactory, InstructionFactory, UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def wait_until(page, condition, timeout=30.0) -> list[int]:
    """Read the page's done counter every 100 ms until `condition(done)`; return what was seen."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = int(page.locator("#run-done").inner_text())
        seen.append(done)
        if condition(done):
            return seen
        page.wait_for_timeout(100)
    raise AssertionError(f"timed out; the page showed {seen[-5:]}")


def start_generation(page, stub):
    """The admin starts a generation of e2e-bench on the stub, one call at a time, from its page;
    return the page, now on the run's page (marked to tell a reload from polling)."""
    endpoint_create(
        name="slow-stub", base_url=stub.base_url, model="m", concurrency=1,
        requests_per_minute=100_000, tokens_per_minute=10_000_000,
        price_prompt_per_1k=Decimal("0.01"),  # priced: Start asks to confirm its cost
    )  # fmt: skip
    page.goto("/engine/generate/")
    page.select_option("#id_endpoint", label="slow-stub (paid API: admins only)")
    page.select_option("#id_benchmark", label="e2e-bench")
    page.fill("#id_system", "browser-gen")
    page.click("#start-run")  # a paid endpoint: the estimate first, then "Start for $X"
    page.wait_for_selector("#estimate-confirm")
    page.click("#start-run")
    page.wait_for_url("**/engine/runs/*/")
    page.evaluate("window.__sameDocument = true")
    return page


def test_progress_moves_without_reloading_the_page(page_for):
    benchmark = BenchmarkFactory(name="e2e-bench")
    for n in range(8):
        InstructionFactory(benchmark=benchmark, external_id=f"t{n}", position=n)
    admin = UserFactory(username="e2e-admin", roles=[ADMIN], is_staff=True)
    with StubOpenAI(delay=0.4) as stub:
        stub.fail_next(500)  # the first attempt: possibly billed, then retried
        page = start_generation(page_for(admin), stub)

        # Polled from here (the site's CSP forbids the eval behind wait_for_function).
        seen = wait_until(page, lambda done: done == 8)
        assert any(0 < done < 8 for done in seen)  # progress seen moving, not only the end
        assert seen == sorted(seen)
        wait_until(page, lambda done: page.locator("#run-status").inner_text() == "Done")
        assert page.evaluate("window.__sameDocument") is True  # updated in place, never reloaded
        assert page.locator("#run-stop-form").is_hidden()
        # The page came while the run went on; its results are complete now, and it says so.
        assert page.locator("#run-results").is_visible()
        assert page.locator("#run-results-partial").is_hidden()
        assert page.locator("#run-total").inner_text() == "8"
        # Nothing left to run again: said in place of the button, as the polled JSON tells.
        assert page.locator("#run-resume-form").is_hidden()
        assert page.locator("#run-nothing-left").is_visible()
        engine_background_wait(10)
        run = EngineRun.objects.get()
        # The 500's estimate, polled in beside the cost.
        assert run.possibly_billed_usd > 0
        shown = page.locator("#run-possibly-billed").inner_text()
        assert shown == usd(run.possibly_billed_usd)  # the money filter, as the page
    assert run.status == RunStatus.DONE and run.calls == 8 and len(stub.requests) == 9


def test_failure_reasons_appear_while_the_run_goes_on(page_for, snap):
    benchmark = BenchmarkFactory(name="e2e-bench")
    for n in range(8):
        InstructionFactory(benchmark=benchmark, external_id=f"t{n}", position=n)
    admin = UserFactory(username="e2e-admin", roles=[ADMIN], is_staff=True)
    refusal = "model refused: the prompt is too long"
    replies = ["ok", Fail(400, refusal), *["ok"] * 6]  # one call at a time, 0.4 s each
    with StubOpenAI(delay=0.4, replies=replies) as stub:
        page = start_generation(page_for(admin), stub)
        assert page.locator("#run-errors").is_hidden()  # nothing failed yet

        seen = wait_until(page, lambda done: page.locator("#run-errors").is_visible())
        snap(page, "a failure shown while running")
        assert seen[-1] < 7  # shown while units were still to do, not only at the end
        assert refusal in page.locator("#run-error-list").inner_text()
        # Named by its instruction and system, not by its internal key.
        assert page.locator("#run-error-list").inner_text().startswith("t1 · browser-gen: ")
        wait_until(page, lambda done: page.locator("#run-status").inner_text() == "Failed")
        assert page.evaluate("window.__sameDocument") is True  # never reloaded
        assert page.locator("#run-percent-processed").inner_text() == "100"
        assert page.locator("#run-percent-done").inner_text() == "87"  # 7 of 8, rounded down
        assert page.locator("#run-resume-form").is_visible()  # the failed unit is left to do
        assert page.locator("#run-nothing-left").is_hidden()
        engine_background_wait(10)
        # A paid endpoint: Run again asks first with what is left to spend, and sends that total
        # (put on the form from the polled JSON: the page was loaded while the run went on).
        total = str(engine_run_estimate(run=EngineRun.objects.get()).cost_usd)
        assert page.locator("#run-again-total").input_value() == total
        asked = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
        page.click("#run-again")
        assert (
            asked
            and "a paid API? Responses left: 1; 1 call," in asked[0]
            and f"{usd_at_most(total)}." in asked[0]  # the estimate as every page shows it
        )
        assert page.evaluate("window.__sameDocument") is True  # cancelled: nothing sent
        assert EngineRun.objects.get().units_failed == 1 and len(stub.requests) == 8
        assert page.locator("#run-earlier").is_hidden()  # a first start: nothing done earlier

        # Confirmed: the failed unit alone is asked again, and the page (polling) counts the
        # seven its first start did as done by its earlier starts, not as "0 done before".
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("#run-again")
        page.wait_for_url("**/engine/runs/*/")
        wait_until(page, lambda done: page.locator("#run-status").inner_text() == "Done")
        assert page.locator("#run-skipped").inner_text() == "0"
        assert page.locator("#run-earlier").is_visible()
        assert page.locator("#run-done-earlier").inner_text() == "7"
        engine_background_wait(10)
    assert len(stub.requests) == 9


def test_a_run_preparing_its_units_says_so_until_it_has_them(page_for):
    from annotate.engine.services import engine_run_execute
    from annotate.engine.services.generation import (
        generating_system_get_or_create,
        generation_run_create,
    )

    benchmark = BenchmarkFactory(name="e2e-bench")
    for n in range(3):
        InstructionFactory(benchmark=benchmark, external_id=f"t{n}", position=n)
    endpoint = endpoint_create(name="fake", base_url="", model="m")
    system = generating_system_get_or_create(name="gen", endpoint=endpoint)
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
    admin = UserFactory(username="e2e-admin", roles=[ADMIN], is_staff=True)
    page = page_for(admin)
    page.goto(f"/engine/runs/{run.pk}/")
    assert page.locator("#run-preparing").inner_text() == "Preparing units…"
    assert page.locator("#run-counts").is_hidden()  # no "0 / 0"

    engine_run_execute(run_id=run.pk)  # a worker takes it: its units are made, then done

    wait_until(page, lambda done: done == 3)
    assert page.locator("#run-preparing").is_hidden()
    assert page.locator("#run-counts").is_visible()
    assert page.locator("#run-total").inner_text() == "3"


def test_polling_shows_the_time_as_the_page_does_and_the_message_row_only_with_a_message(
    page_for,
):
    """Live, "Time so far" read "9 s" where a reload read "9.0 s"; "Message" was an empty row."""
    from tests.annotate.engine.conftest import make_endpoint

    admin = UserFactory(username="e2e-admin", roles=[ADMIN], is_staff=True)
    run = EngineRun.objects.create(
        kind="generation", endpoint=make_endpoint("", name="fake"), status=RunStatus.PENDING,
        params={"template": "generation_infobench_v1", "system_ids": [], "instruction_ids": []},
        units_total=2, running_seconds=9.0,
    )  # fmt: skip
    page = page_for(admin)
    page.goto(f"/engine/runs/{run.pk}/")
    assert page.locator("#run-elapsed").inner_text() == "9.0"
    assert page.locator("#run-error").is_hidden() and page.locator("#run-error-label").is_hidden()
    EngineRun.objects.filter(pk=run.pk).update(units_done=1, error="rate limited, retrying")
    wait_until(page, lambda done: done == 1)  # polled: the page changed in place
    assert page.locator("#run-elapsed").inner_text() == "9.0"
    assert page.locator("#run-error-label").is_visible()
    assert page.locator("#run-error").inner_text() == "rate limited, retrying"


def test_a_poll_refused_for_its_rate_is_said_on_the_page_and_asked_again_after_the_wait(
    page_for, settings, monkeypatch, snap
):
    """Past POLL_RATE the progress came as the error page's HTML: the script could not read
    it and showed nothing while it kept asking. Now the page says the refusal and when it
    checks again, keeps its figures, and takes up the progress once the wait is over."""
    from django.core.cache import cache
    from rest_framework.throttling import SimpleRateThrottle

    from tests.annotate.engine.conftest import make_endpoint

    now = [1_000_000.0]  # the limiter's clock, moved by the test
    monkeypatch.setattr(SimpleRateThrottle, "timer", staticmethod(lambda: now[0]))
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "polls": "1/minute"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    admin = UserFactory(username="e2e-admin", roles=[ADMIN], is_staff=True)
    # The minute's one poll was 59 s ago: the page's first poll is refused, for 1 s.
    cache.set(f"throttle_polls_{admin.pk}", [now[0] - 59], 60)
    run = EngineRun.objects.create(
        kind="generation", endpoint=make_endpoint("", name="fake"), status=RunStatus.PENDING,
        params={"template": "generation_infobench_v1", "system_ids": [], "instruction_ids": []},
        units_total=2,
    )  # fmt: skip
    page = page_for(admin)
    page.goto(f"/engine/runs/{run.pk}/")
    page.evaluate("window.__sameDocument = true")
    notice = page.locator(".poll-notice")
    notice.wait_for()
    snap(page, "a poll refused")
    told = "Too many progress checks from your account (at most 1/minute). Please wait 1 s"
    assert told in notice.inner_text() and "checks again by itself" in notice.inner_text()
    assert page.locator("#run-done").inner_text() == "0"  # the figures stay as they were

    EngineRun.objects.filter(pk=run.pk).update(units_done=1)
    now[0] += 1  # the wait is over: the next poll passes
    wait_until(page, lambda done: done == 1)
    assert notice.is_hidden()
    assert page.evaluate("window.__sameDocument") is True  # followed in place, never reloaded


def test_run_again_says_what_it_replaces_once_the_run_ends_while_the_page_is_open(
    page_for, monkeypatch
):
    """Opened while the run was active, the page rendered no replace warning: when the poll
    sees the run end, its Run again form shows the warning and the box to confirm it."""
    from django.utils import timezone

    from annotate.engine.client import FakeTransport
    from annotate.engine.errors import CallRejectedError
    from annotate.roles import RESEARCHER
    from evaluation.services.judge_runs import judge_run_create, judge_run_execute
    from tests.evaluation.judge_helpers import make_benchmark, make_judge

    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake")
    send = FakeTransport.send

    def refuse_the_second(self, body, on_text=None):
        if any("answer 2" in (m.get("content") or "") for m in body["messages"]):
            raise CallRejectedError("400 refused by the test")
        return send(self, body, on_text)

    earlier = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    with monkeypatch.context() as patched:
        patched.setattr(FakeTransport, "send", refuse_the_second)
        judge_run_execute(run_id=earlier.pk, sleep=lambda seconds: None)
    later = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    judge_run_execute(run_id=later.pk, sleep=lambda seconds: None)
    runs = EngineRun.objects.filter(pk=earlier.engine_run_id)
    runs.update(status=RunStatus.RUNNING, heartbeat=timezone.now())
    page = page_for(UserFactory(username="e2e-researcher", roles=[RESEARCHER]))
    page.goto(f"/engine/runs/{earlier.engine_run_id}/")
    assert page.locator("#run-resume-form").is_hidden()

    runs.update(status=RunStatus.FAILED)
    page.wait_for_selector("#replace-warning", state="visible")

    said = page.locator("#replace-warning-text").inner_text()
    assert said.startswith(
        f"1 of 1 responses already have labels from this judge (run #{later.pk}); starting "
        "replaces them;"
    )
    assert page.locator("#id_replace").is_visible()
    assert page.locator("#id_replace_seen").input_value() == f"1/1/0/{later.pk}"
