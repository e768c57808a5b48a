"""A second run of a judge over responses it labelled already: every way of starting one says
how many it replaces and what it costs before anything is spent, and the page and the API start
it only when told to replace them (the command says so and goes on, as it always did). Run
again of an earlier run asks the same when what it has left would overwrite a later run's
labels, and nothing when it only fills in its own missing answers."""

import contextlib
import re
import threading
from decimal import Decimal

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.engine.client import FakeTransport
from annotate.engine.errors import CallRejectedError
from annotate.engine.models import EngineRun
from annotate.engine.services import engine_run_estimate
from annotate.engine.services import runs as engine_runs
from annotate.models import Label
from annotate.templatetags.money import usd_at_most
from evaluation import judge_api
from evaluation.models import ConversationStatus, JudgeRun, RunStatus
from evaluation.services.judge_runs import judge_run_create, judge_run_execute
from tests.evaluation.judge_helpers import make_benchmark, make_judge
from tests.evaluation.openai_stub import StubOpenAI
from tests.threads import at_once

pytestmark = pytest.mark.django_db

PRICE = {"price_prompt_per_1k": Decimal("0.03"), "price_completion_per_1k": Decimal("0.06")}


@pytest.fixture
def stub():
    with StubOpenAI() as server:
        yield server


def _judged(judge, benchmark, systems, **selection) -> JudgeRun:
    """A run of `judge` done to the end, its labels stored."""
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems, **selection)
    return judge_run_execute(run_id=run.pk, sleep=lambda seconds: None)


def _form(judge, benchmark, systems, **extra):
    return {
        "config": judge.pk,
        "benchmark": benchmark.pk,
        "systems": [s.pk for s in systems],
        "subset": "",
        "instruction_ids": "",
        "seed": 0,
        **extra,
    }


def _cost(judge, benchmark, systems) -> Decimal:
    """What the run the form asks for would cost (made for real, then thrown away)."""
    run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    cost = engine_run_estimate(run=run.engine_run).cost_usd
    run.delete()
    EngineRun.objects.filter(pk=run.engine_run_id).delete()
    return cost


def _rows() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


def _seen(page) -> str:
    """What the page showed it replaces, as its form sends it back with the box."""
    return re.search(r'name="replace_seen" value="([^"]*)"', page.text).group(1)


def _labels(judge) -> list[tuple[int, int, int]]:
    return sorted(
        Label.objects.filter(annotator=judge.annotator).values_list(
            "question_id", "response_id", "value"
        )
    )


def test_the_estimate_says_nothing_of_labels_when_the_judge_never_ran_here(client, researcher):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a", "b"))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    other_benchmark, other_systems, _ = make_benchmark(systems=("c",))
    _judged(judge, other_benchmark, other_systems)  # labels elsewhere replace nothing here
    client.force_login(researcher)

    page = client.post(reverse("judge:run-new"), _form(judge, benchmark, systems, estimate="1"))

    assert page.status_code == 200 and page.context["estimate"].units == 4
    assert page.context["estimate"].labels_before is None
    assert 'id="replace-warning"' not in page.text and "already have labels" not in page.text


def test_the_estimate_says_how_many_responses_a_second_run_replaces_and_what_it_costs(
    client, researcher
):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a", "b"))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    first = _judged(judge, benchmark, systems, instruction_ids=["task_1"])  # 2 of 4 responses
    cost = _cost(judge, benchmark, systems)
    client.force_login(researcher)
    before = _rows()

    page = client.post(reverse("judge:run-new"), _form(judge, benchmark, systems, estimate="1"))

    assert page.status_code == 200 and _rows() == before  # an estimate keeps nothing
    warning = re.search(r'<p class="error" role="alert" id="replace-warning">(.*?)</p>', page.text)
    assert warning, page.text
    assert warning.group(1).startswith(
        f"2 of 4 responses already have labels from this judge (run #{first.pk}); starting "
        f"replaces them; the run (4 responses) costs at most {usd_at_most(cost)}."
    )
    assert 'name="replace"' in page.text  # the checkbox that confirms it


def test_start_without_the_confirmation_is_refused_beside_it_and_starts_nothing(
    client, researcher, django_capture_on_commit_callbacks
):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    first = _judged(judge, benchmark, systems)
    labels = _labels(judge)
    client.force_login(researcher)
    before = _rows()

    with django_capture_on_commit_callbacks(execute=False) as started:
        refused = client.post(reverse("judge:run-new"), _form(judge, benchmark, systems))

    assert refused.status_code == 400 and started == [] and _rows() == before
    assert _labels(judge) == labels
    errors = refused.context["form"].errors
    assert list(errors) == ["replace"]
    assert errors["replace"][0].startswith(
        f"2 of 2 responses already have labels from this judge (run #{first.pk}); starting "
        "replaces them; the run (2 responses) costs at most $"
    )
    assert "Nothing was started" in errors["replace"][0]
    assert "field" not in errors["replace"][0]  # the box is beside it, not an API field name

    with django_capture_on_commit_callbacks(execute=False) as started:
        confirmed = client.post(
            reverse("judge:run-new"),
            _form(judge, benchmark, systems, replace="on", replace_seen=_seen(refused)),
        )
    second = JudgeRun.objects.exclude(pk=first.pk).get()
    assert confirmed.status_code == 302 and len(started) == 1
    assert confirmed["Location"] == reverse("engine:run-detail", args=[second.engine_run_id])


def test_a_confirmed_paid_start_without_the_replacement_confirmed_sends_nothing(
    client, admin_user, stub, django_capture_on_commit_callbacks
):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,), systems=("a",))
    judge = make_judge(stub.base_url, max_tokens=5, **PRICE)
    first = _judged(judge, benchmark, systems)
    calls = len(stub.requests)
    client.force_login(admin_user)
    form = _form(judge, benchmark, systems)

    asked = client.post(reverse("judge:run-new"), form)  # Start: the total to confirm first
    confirm = asked.context["confirm"]
    assert asked.status_code == 200 and confirm.asked
    assert f"(run #{first.pk}); starting replaces them" in asked.text  # told before any spend
    with django_capture_on_commit_callbacks(execute=False) as started:
        refused = client.post(reverse("judge:run-new"), {**form, confirm.field: confirm.value})

    assert refused.status_code == 400 and started == []
    assert "replace" in refused.context["form"].errors
    assert JudgeRun.objects.count() == 1 and len(stub.requests) == calls


def test_the_api_refuses_a_second_run_without_replace_and_names_the_field(client, admin_user):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    first = _judged(judge, benchmark, systems, instruction_ids=["task_2"])
    client.force_login(admin_user)
    body = {"judge": judge.name, "benchmark": benchmark.name, "systems": ["a"]}
    before = _rows()

    refused = client.post("/api/judge/runs/", body, content_type="application/json")

    assert refused.status_code == 400 and _rows() == before
    answer = refused.json()
    assert answer["field"] == "replace"
    assert answer["detail"].startswith(
        f"1 of 2 responses already have labels from this judge (run #{first.pk});"
    )
    dry = client.post(
        "/api/judge/runs/", {**body, "dry_run": True}, content_type="application/json"
    )
    assert dry.status_code == 200
    assert dry.json()["estimate"]["labels_before"] == {
        "responses_labelled": 1,
        "responses_total": 2,
        "run_ids": [first.pk],
        "responses_imported": 0,
        "seen": f"1/2/0/{first.pk}",
    }
    started = client.post(
        "/api/judge/runs/", {**body, "replace": True}, content_type="application/json"
    )
    assert started.status_code == 202, started.content
    assert JudgeRun.objects.count() == 2


def test_the_api_starts_a_first_run_without_replace(client, admin_user):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(2,), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake")
    client.force_login(admin_user)
    body = {"judge": judge.name, "benchmark": benchmark.name, "systems": ["a"], "dry_run": True}

    dry = client.post("/api/judge/runs/", body, content_type="application/json")
    started = client.post(
        "/api/judge/runs/", {**body, "dry_run": False}, content_type="application/json"
    )

    assert dry.json()["estimate"]["labels_before"] is None
    assert started.status_code == 202, started.content


def test_the_command_prints_the_warning_and_judges_again_as_before(capsys):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a", "b"))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    arguments = ["--config", judge.name, "--benchmark", benchmark.name]
    call_command("judge", *arguments, "--instructions", "task_1")
    first = JudgeRun.objects.get()
    cost = _cost(judge, benchmark, systems)
    capsys.readouterr()
    warning = (
        f"2 of 4 responses already have labels from this judge (run #{first.pk}); starting "
        f"replaces them; the run (4 responses) costs at most {usd_at_most(cost)}."
    )

    call_command("judge", *arguments, "--dry-run")
    assert capsys.readouterr().out.splitlines()[1] == warning
    call_command("judge", *arguments)  # no new option, no refusal: it judges again

    lines = capsys.readouterr().out.splitlines()
    second = JudgeRun.objects.exclude(pk=first.pk).get()
    assert lines[:2] == [f"Created judge run {second.pk} (all).", warning]
    assert second.status == "done"


@pytest.fixture
def halfway(monkeypatch):
    """Make a run of a judge on the offline fake that judges its first response and fails on
    the second (its model refuses the request): the second is left for Run again."""

    def judged_halfway(judge, benchmark, systems) -> JudgeRun:
        send = FakeTransport.send

        def refuse_the_second(self, body, on_text=None):
            if any("answer 2" in (m.get("content") or "") for m in body["messages"]):
                raise CallRejectedError("400 refused by the test")
            return send(self, body, on_text)

        run = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
        with monkeypatch.context() as patched:
            patched.setattr(FakeTransport, "send", refuse_the_second)
            judge_run_execute(run_id=run.pk, sleep=lambda seconds: None)
        run.refresh_from_db()
        assert run.status == RunStatus.FAILED
        assert [c.status for c in run.conversations.order_by("response__instruction")] == [
            ConversationStatus.DONE,
            ConversationStatus.FAILED,
        ]
        return run

    return judged_halfway


def test_run_again_over_labels_a_later_run_wrote_says_so_and_needs_the_box(
    client, researcher, halfway, django_capture_on_commit_callbacks
):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    earlier = halfway(judge, benchmark, systems)
    later = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    judge_run_execute(run_id=later.pk)  # judges both responses, the one `earlier` left too
    labels = _labels(judge)
    cost = engine_run_estimate(run=earlier.engine_run).cost_usd
    warning = (
        f"1 of 1 responses already have labels from this judge (run #{later.pk}); starting "
        f"replaces them; the run (1 response) costs at most {usd_at_most(cost)}."
    )
    client.force_login(researcher)
    again = reverse("judge:run-resume", args=[earlier.pk])

    detail = client.get(reverse("judge:run-detail", args=[earlier.pk]))
    shown = re.search(r'<p class="error" role="alert" id="replace-warning">(.*?)</p>', detail.text)
    assert shown and shown.group(1).startswith(warning)
    form = detail.text[detail.text.index(again) :].split("</form>")[0]
    assert 'name="replace"' in form and "Replace earlier labels" in form
    before = _rows()
    with django_capture_on_commit_callbacks(execute=False) as started:
        refused = client.post(again, {"spending_cap_usd": "7"})

    assert refused.status_code == 400 and started == [] and _rows() == before
    assert warning in refused.text and "Nothing was started" in refused.text
    # A page user reads the box's name, not the API's field
    assert "tick “Replace earlier labels” to start it" in refused.text
    assert "(field &#x27;replace&#x27;)" not in refused.text
    earlier.engine_run.refresh_from_db()
    assert earlier.engine_run.status == "failed" and earlier.engine_run.spending_cap_usd is None
    assert _labels(judge) == labels

    with django_capture_on_commit_callbacks(execute=False) as started:
        confirmed = client.post(again, {"replace": "on", "replace_seen": _seen(detail)})
    assert confirmed.status_code == 302 and len(started) == 1


@pytest.mark.parametrize(
    ("detail", "resume", "run_id"),
    [
        ("judge:run-detail", "judge:run-resume", lambda run: run.pk),
        ("engine:run-detail", "engine:run-resume", lambda run: run.engine_run_id),
    ],
)
def test_run_again_refuses_a_replacement_other_than_the_one_the_page_showed(
    client, researcher, halfway, django_capture_on_commit_callbacks, detail, resume, run_id
):
    """The page said run #later's labels; another run relabelled them before Run again was
    pressed: the box ticked for what the page showed does not replace what it did not show."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    earlier = halfway(judge, benchmark, systems)
    later = _judged(judge, benchmark, systems)
    client.force_login(researcher)
    shown = client.get(reverse(detail, args=[run_id(earlier)]))
    assert f"(run #{later.pk}); starting replaces them" in shown.text
    meanwhile = _judged(judge, benchmark, systems)
    again = reverse(resume, args=[run_id(earlier)])
    before = _rows()

    with django_capture_on_commit_callbacks(execute=False) as started:
        refused = client.post(again, {"replace": "on", "replace_seen": _seen(shown)})

    assert refused.status_code == 409 and started == [] and _rows() == before
    assert (
        "What starting replaces is not what the page showed: 1 of 1 responses already have "
        f"labels from this judge (runs #{later.pk}, #{meanwhile.pk}); starting replaces them;"
    ) in refused.text
    assert "tick “Replace earlier labels” again to start it" in refused.text
    now = client.get(reverse(detail, args=[run_id(earlier)]))
    with django_capture_on_commit_callbacks(execute=False) as started:
        confirmed = client.post(again, {"replace": "on", "replace_seen": _seen(now)})
    assert confirmed.status_code == 302 and len(started) == 1


def test_run_again_of_a_run_nobody_else_judged_asks_nothing(
    client, researcher, halfway, django_capture_on_commit_callbacks
):
    """Its own answers so far are not labels it would replace: it only fills in the rest."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    run = halfway(judge, benchmark, systems)
    assert _labels(judge)  # the conversation it finished
    client.force_login(researcher)

    detail = client.get(reverse("judge:run-detail", args=[run.pk]))
    with django_capture_on_commit_callbacks(execute=False) as started:
        again = client.post(reverse("judge:run-resume", args=[run.pk]))

    form = detail.text[detail.text.index(reverse("judge:run-resume", args=[run.pk])) :]
    assert 'id="replace-warning"' not in detail.text and "already have labels" not in detail.text
    assert 'name="replace"' not in form.split("</form>")[0]  # no box to tick either
    assert again.status_code == 302 and len(started) == 1


def test_the_engine_run_page_and_the_api_ask_the_same_of_run_again(
    client, researcher, halfway, django_capture_on_commit_callbacks
):
    """The judge run's engine run ("Live progress, calls and cost") has a Run again of its own,
    and so has the API (POST /api/engine/runs/<id>/resume/)."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    earlier = halfway(judge, benchmark, systems)
    later = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    judge_run_execute(run_id=later.pk)
    labels = _labels(judge)
    said = f"1 of 1 responses already have labels from this judge (run #{later.pk}); starting"
    client.force_login(researcher)
    api = reverse("api-engine-run-resume", args=[earlier.engine_run_id])
    before = _rows()

    page = client.get(reverse("engine:run-detail", args=[earlier.engine_run_id]))
    with django_capture_on_commit_callbacks(execute=False) as started:
        on_page = client.post(reverse("engine:run-resume", args=[earlier.engine_run_id]))
        by_api = client.post(api, {}, content_type="application/json")

    shown = re.search(r'<span id="replace-warning-text">(.*?)</span>', page.text)
    assert shown and shown.group(1).startswith(said) and 'name="replace"' in page.text
    assert on_page.status_code == 400 and said in on_page.text
    assert by_api.status_code == 400 and by_api.json()["field"] == "replace"
    assert by_api.json()["detail"].startswith(said)
    assert "(field 'replace')" in by_api.json()["detail"]  # the API names its field
    assert "(field &#x27;replace&#x27;)" not in on_page.text
    assert started == [] and _rows() == before and _labels(judge) == labels

    with django_capture_on_commit_callbacks(execute=False) as started:
        confirmed = client.post(api, {"replace": True}, content_type="application/json")
    assert confirmed.status_code == 202, confirmed.content
    assert len(started) == 1


def test_the_api_says_what_resume_replaces_and_holds_it_to_what_it_said(
    client, researcher, halfway, django_capture_on_commit_callbacks
):
    """A caller of POST /api/engine/runs/<id>/resume/ could only send `replace` blind: it
    replaced whatever was there when the run started. The run's detail says what it would
    replace and its `replace_seen`; resume with that replaces only what it said (else 409,
    nothing changed, the cap sent with it rolled back), as the judge's start API does."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    earlier = halfway(judge, benchmark, systems)
    client.force_login(researcher)
    detail = reverse("api-engine-run", args=[earlier.engine_run_id])
    resume = reverse("api-engine-run-resume", args=[earlier.engine_run_id])
    alone = client.get(detail).json()
    assert (alone["replace_warning"], alone["replace_seen"]) == (None, "")  # its own answers
    later = _judged(judge, benchmark, systems)
    shown = client.get(detail).json()
    meanwhile = _judged(judge, benchmark, systems)  # relabels what `shown` spoke of
    before, labels = _rows(), _labels(judge)

    with django_capture_on_commit_callbacks(execute=False) as started:
        stale = client.post(
            resume,
            {"replace": True, "replace_seen": shown["replace_seen"], "spending_cap_usd": "7"},
            content_type="application/json",
        )
        unseen = client.post(
            resume, {"replace": True, "replace_seen": ""}, content_type="application/json"
        )

    assert shown["replace_warning"].startswith(
        f"1 of 1 responses already have labels from this judge (run #{later.pk}); starting "
        "replaces them; the run (1 response) costs at most $"
    )
    assert shown["replace_seen"] == f"1/1/0/{later.pk}"
    for refused in (stale, unseen):
        assert refused.status_code == 409, refused.content
        assert refused.json()["field"] == "replace"
    now = client.get(detail).json()
    assert stale.json()["detail"] == (
        f"What starting replaces is not what replace_seen said: {now['replace_warning']} "
        f"Nothing was started: send replace_seen {now['replace_seen']!r} with replace to start it."
    )
    assert f"(runs #{later.pk}, #{meanwhile.pk})" in now["replace_warning"]
    assert started == [] and _rows() == before and _labels(judge) == labels
    earlier.engine_run.refresh_from_db()
    assert earlier.engine_run.status == "failed" and earlier.engine_run.spending_cap_usd is None

    with django_capture_on_commit_callbacks(execute=False) as started:
        confirmed = client.post(
            resume,
            {"replace": True, "replace_seen": now["replace_seen"]},
            content_type="application/json",
        )
    assert confirmed.status_code == 202, confirmed.content
    assert len(started) == 1
    active = client.get(detail).json()  # queued: nothing read, as on its page
    assert active["active"] and (active["replace_warning"], active["replace_seen"]) == (None, "")


def test_the_run_pages_poll_says_what_run_again_replaces_once_the_run_ends(
    client, researcher, halfway
):
    """The engine run page opened while the run is active renders no warning (none is read
    then): its script shows the one the progress JSON carries once the run has ended, with the
    box (there, hidden) and what it said, sent back with the box."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    earlier = halfway(judge, benchmark, systems)
    later = _judged(judge, benchmark, systems)
    client.force_login(researcher)
    progress = reverse("engine:run-progress", args=[earlier.engine_run_id])
    running = {"status": "running", "heartbeat": timezone.now()}  # a live worker's
    EngineRun.objects.filter(pk=earlier.engine_run_id).update(**running)

    active = client.get(reverse("engine:run-detail", args=[earlier.engine_run_id]))
    polled_active = client.get(progress).json()
    EngineRun.objects.filter(pk=earlier.engine_run_id).update(status="failed")
    polled_ended = client.get(progress).json()

    assert re.search(r'<div id="replace-box" hidden>.*name="replace"', active.text, re.S)
    assert re.search(r'<p class="error" role="alert" id="replace-warning" hidden>', active.text)
    assert '<input type="hidden" name="replace_seen" id="id_replace_seen">' in active.text
    assert polled_active["replace_warning"] is None
    assert polled_ended["replace_warning"].startswith(
        f"1 of 1 responses already have labels from this judge (run #{later.pk}); starting "
        "replaces them;"
    )
    ended = client.get(reverse("engine:run-detail", args=[earlier.engine_run_id]))
    assert polled_ended["replace_seen"] == _seen(ended) == f"1/1/0/{later.pk}"
    assert polled_ended["replace_warning"] in ended.text


def test_the_command_says_what_run_again_replaces(capsys, halfway):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    earlier = halfway(judge, benchmark, systems)
    lone = ["--run", str(earlier.pk), "--dry-run"]
    call_command("judge", *lone)
    assert "already have labels" not in capsys.readouterr().out  # its own answers only
    later = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    judge_run_execute(run_id=later.pk)

    call_command("judge", *lone)

    assert (
        capsys.readouterr()
        .out.splitlines()[1]
        .startswith(
            f"1 of 1 responses already have labels from this judge (run #{later.pk}); starting "
            "replaces them"
        )
    )


# --- A run of the judge still queued or running; what the page showed; imported labels --------


@pytest.fixture
def queued(monkeypatch):
    """Started runs stay queued (pending, their start asked): no worker takes them."""
    monkeypatch.setattr(engine_runs, "_broker_configured", lambda: False)
    monkeypatch.setattr(engine_runs, "_start_thread", lambda run_id: None)


def test_a_second_start_while_the_first_is_queued_is_refused_naming_it(client, admin_user, queued):
    """Two identical POSTs made two runs over the same responses, both paid, the labels a mix
    of the two. `replace` does not let the second through: two writers are never wanted."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    client.force_login(admin_user)
    body = {"judge": judge.name, "benchmark": benchmark.name, "systems": ["a"]}

    first = client.post("/api/judge/runs/", body, content_type="application/json")
    before = _rows()
    second = client.post("/api/judge/runs/", body, content_type="application/json")
    replacing = client.post(
        "/api/judge/runs/", {**body, "replace": True}, content_type="application/json"
    )

    assert first.status_code == 202, first.content
    run_id = first.json()["run_id"]
    for refused in (second, replacing):
        assert refused.status_code == 409, refused.content
        assert refused.json()["detail"].startswith(
            f"Judge run #{run_id} (queued, 2 responses) of this judge still judges responses "
            "this run would"
        )
    assert "Nothing was started" in second.json()["detail"]
    assert _rows() == before and JudgeRun.objects.count() == 1


def test_the_page_refuses_a_start_while_a_run_of_the_judge_is_running(client, researcher, queued):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a", "b"))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    running = judge_run_create(config=judge, benchmark=benchmark, systems=systems[:1])
    EngineRun.objects.filter(pk=running.engine_run_id).update(status="running")
    client.force_login(researcher)
    before = _rows()

    refused = client.post(reverse("judge:run-new"), _form(judge, benchmark, systems))

    assert refused.status_code == 409 and _rows() == before
    assert refused.context["form"].non_field_errors() == [
        f"Judge run #{running.pk} (running, 2 responses) of this judge still judges responses "
        "this run would: two runs writing the same labels at once would each be paid and leave "
        "a mix of their answers. Nothing was started: wait for it to end (or stop it on its "
        "page), then start this one."
    ]
    other = make_benchmark(questions_per_instruction=(1,), systems=("c",))
    elsewhere = client.post(reverse("judge:run-new"), _form(judge, other[0], other[1]))
    assert elsewhere.status_code == 302  # other responses: nothing shared, nothing refused


def test_run_again_while_a_later_run_is_queued_is_refused(client, researcher, halfway, queued):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    earlier = halfway(judge, benchmark, systems)
    client.force_login(researcher)
    body = {"judge": judge.name, "benchmark": benchmark.name, "systems": ["a"], "replace": True}
    later = client.post("/api/judge/runs/", body, content_type="application/json").json()
    api = reverse("api-engine-run-resume", args=[earlier.engine_run_id])

    by_api = client.post(api, {"replace": True}, content_type="application/json")
    on_page = client.post(reverse("judge:run-resume", args=[earlier.pk]), {"replace": "on"})

    said = f"Judge run #{later['run_id']} (queued, 1 response) of this judge still judges"
    assert by_api.status_code == 409 and by_api.json()["detail"].startswith(said)
    assert on_page.status_code == 409 and said in on_page.text
    earlier.engine_run.refresh_from_db()
    assert earlier.engine_run.status == "failed"


def test_the_command_refuses_to_run_beside_a_run_of_the_judge_still_writing(halfway, queued):
    """As the page and the API: two runs writing the same labels would each be paid and leave
    a mix of their answers. A new run is not kept; an earlier run is not run again."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    earlier = halfway(judge, benchmark, systems)
    running = judge_run_create(config=judge, benchmark=benchmark, systems=systems)
    live = {"status": "running", "heartbeat": timezone.now()}
    EngineRun.objects.filter(pk=running.engine_run_id).update(**live)
    labels, before = _labels(judge), _rows()
    said = f"Judge run #{running.pk} (running, "

    with pytest.raises(CommandError) as new:
        call_command("judge", "--config", judge.name, "--benchmark", benchmark.name)
    with pytest.raises(CommandError) as again:
        call_command("judge", "--run", str(earlier.pk))

    assert str(new.value).startswith(f"{said}2 responses) of this judge still judges")
    assert str(again.value).startswith(f"{said}1 response) of this judge still judges")
    assert "Nothing was started" in str(new.value)
    assert _rows() == before and _labels(judge) == labels
    earlier.engine_run.refresh_from_db()
    assert earlier.engine_run.status == "failed"


@pytest.mark.django_db(transaction=True)
def test_two_starts_at_once_start_one_run(admin_user, queued, monkeypatch):
    """Both made their run before either checked: each check saw no other run (the other not
    committed yet) and both started. The judge's row lock makes the second check wait for the
    first start's commit, and then see its run."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks: SQLite runs one writer at a time")
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake")
    both_made = threading.Barrier(2, timeout=10)
    create = judge_api.judge_run_create

    def made_then_wait(**kwargs):
        run = create(**kwargs)
        both_made.wait()  # both runs made, neither checked yet
        return run

    monkeypatch.setattr(judge_api, "judge_run_create", made_then_wait)
    body = {"judge": judge.name, "benchmark": benchmark.name, "systems": ["a"]}

    def start():
        client = Client()
        client.force_login(admin_user)
        return client.post("/api/judge/runs/", body, content_type="application/json")

    answers = at_once(start, start)

    assert sorted(answer.status_code for answer in answers) == [202, 409]
    assert JudgeRun.objects.count() == 1


def test_start_refuses_a_replacement_other_than_the_one_the_page_showed(client, researcher):
    """The estimate said 2 of 4 (run #1); a run over all 4 ended before Start: the box ticked
    for 2 does not replace 4 unasked."""
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a", "b"))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    first = _judged(judge, benchmark, systems, instruction_ids=["task_1"])
    client.force_login(researcher)
    form = _form(judge, benchmark, systems)
    shown = client.post(reverse("judge:run-new"), {**form, "estimate": "1"})
    assert "2 of 4 responses already have labels" in shown.text
    second = _judged(judge, benchmark, systems)  # meanwhile: all 4
    before = _rows()

    refused = client.post(
        reverse("judge:run-new"), {**form, "replace": "on", "replace_seen": _seen(shown)}
    )

    assert refused.status_code == 409 and _rows() == before
    said = refused.context["form"].errors["replace"][0]
    assert said.startswith(
        "What starting replaces is not what the page showed: 4 of 4 responses already have "
        f"labels from this judge (runs #{first.pk}, #{second.pk}); starting replaces them;"
    )
    assert _seen(refused) == f"4/4/0/{first.pk}.{second.pk}"  # what it shows now
    unseen = client.post(reverse("judge:run-new"), {**form, "replace": "on"})
    assert unseen.status_code == 409  # ticked with no warning shown at all
    confirmed = client.post(
        reverse("judge:run-new"), {**form, "replace": "on", "replace_seen": _seen(refused)}
    )
    assert confirmed.status_code == 302 and JudgeRun.objects.count() == 3


def test_the_api_holds_replace_to_the_dry_runs_seen_when_sent(client, admin_user):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    _judged(judge, benchmark, systems, instruction_ids=["task_1"])
    client.force_login(admin_user)
    body = {"judge": judge.name, "benchmark": benchmark.name, "systems": ["a"]}
    dry = client.post(
        "/api/judge/runs/", {**body, "dry_run": True}, content_type="application/json"
    )
    seen = dry.json()["estimate"]["labels_before"]["seen"]
    _judged(judge, benchmark, systems)  # meanwhile: both responses

    stale = client.post(
        "/api/judge/runs/",
        {**body, "replace": True, "replace_seen": seen},
        content_type="application/json",
    )

    assert stale.status_code == 409 and stale.json()["field"] == "replace"
    assert "2 of 2 responses already have labels" in stale.json()["detail"]
    assert JudgeRun.objects.count() == 2
    now = client.post(
        "/api/judge/runs/", {**body, "dry_run": True}, content_type="application/json"
    )
    fresh = now.json()["estimate"]["labels_before"]["seen"]
    started = client.post(
        "/api/judge/runs/",
        {**body, "replace": True, "replace_seen": fresh},
        content_type="application/json",
    )
    assert started.status_code == 202, started.content


def test_imported_labels_are_counted_apart_from_the_runs(client, researcher):
    benchmark, systems, instructions = make_benchmark(
        questions_per_instruction=(3, 2), systems=("a", "b")
    )
    judge = make_judge(name="fake-judge", backend="fake", **PRICE)
    first = _judged(judge, benchmark, systems, instruction_ids=["task_1"])  # 2 responses
    question = instructions[1].questions.first()
    Label.objects.create(
        question=question,
        response=question.instruction.responses.get(system=systems[0]),
        annotator=judge.annotator,
        value=1,
        imported=True,
    )
    client.force_login(researcher)

    page = client.post(reverse("judge:run-new"), _form(judge, benchmark, systems, estimate="1"))

    assert page.context["estimate"].replace_warning.startswith(
        f"3 of 4 responses already have labels from this judge (run #{first.pk}; 1 imported); "
        "starting replaces them; the run (4 responses) costs at most $"
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("other", ["new", "again"])
def test_two_commands_at_once_judge_only_once(halfway, monkeypatch, other):
    """Two `judge` commands over the same responses at the same instant (two new runs, or a
    new run beside `--run` of an earlier one): each check's lock and transaction ended before
    its run showed started, so both checks passed and both judged, each paid, the labels a
    mix. The first command's run shows queued in the transaction of its check, under the
    judge's lock: the second check waits for it, sees it, and is refused. No run here makes a
    call before both commands have checked (else the first running could refuse the second
    without the lock)."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks: SQLite runs one writer at a time")
    from evaluation.management.commands import judge as command

    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake")
    earlier = halfway(judge, benchmark, systems) if other == "again" else None
    new = ["--config", judge.name, "--benchmark", benchmark.name]
    commands = [new, new] if earlier is None else [["--run", str(earlier.pk)], new]
    made = threading.Barrier(2 if earlier is None else 1, timeout=10)
    checked, checks = threading.Condition(), []
    create, check = command.judge_run_create, command.judge_run_check_start

    def made_then_wait(**kwargs):
        run = create(**kwargs)
        made.wait()  # both new runs made, neither checked yet
        return run

    def counted_check(**kwargs):
        try:
            check(**kwargs)
        finally:
            with checked:
                checks.append(kwargs["run"].pk)
                checked.notify_all()
        # Passed: once the check's transaction commits, nothing more till the other checked.
        transaction.on_commit(both_checked)

    def both_checked():
        with checked:
            checked.wait_for(lambda: len(checks) == 2, timeout=10)

    monkeypatch.setattr(command, "judge_run_create", made_then_wait)
    monkeypatch.setattr(command, "judge_run_check_start", counted_check)

    def run(arguments):
        return lambda: call_command("judge", *arguments)

    outcomes = at_once(*(run(arguments) for arguments in commands))

    refused = [index for index, outcome in enumerate(outcomes) if outcome is not None]
    assert len(refused) == 1, outcomes
    said = outcomes[refused[0]]
    assert isinstance(said, CommandError), said
    assert " of this judge still judges responses this run would" in str(said)
    assert "Nothing was started" in str(said)
    # One run judged; a new run refused was not kept, an earlier one refused is as it was.
    left = ["done", "failed"] if earlier is not None and refused == [0] else ["done"]
    assert sorted(JudgeRun.objects.values_list("status", flat=True)) == left


@pytest.mark.django_db(transaction=True)
def test_two_resumes_at_once_one_with_a_cap_start_the_run_once(admin_user, halfway, monkeypatch):
    """Run again of one judge run twice at the same instant, once with a spending cap: the one
    with the cap locked the run's row (the cap) before the judge's (the check), the other the
    judge's before the run's (the start). Each waited for the other: PostgreSQL broke the
    deadlock by failing one request with an error. Both take the judge's row first: the second
    waits for the first to start the run, and is refused as the run is starting already."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks: SQLite runs one writer at a time")
    from annotate.engine import api as engine_api

    benchmark, systems, _ = make_benchmark(questions_per_instruction=(3, 2), systems=("a",))
    judge = make_judge(name="fake-judge", backend="fake")
    earlier = halfway(judge, benchmark, systems)
    monkeypatch.setattr(engine_runs, "_start_thread", lambda run_id: None)
    # Each request, holding its first lock, waits for the other to hold its own (or, when the
    # other waits for that lock, a little while) before it asks for its second.
    both_hold = threading.Barrier(2)
    capped = threading.local()
    cap_set, check_again = engine_api.engine_run_cap_set, engine_api.engine_run_check_again

    def hold_then_wait():
        # Broken: the other waits for a lock this one holds, so this one goes on.
        with contextlib.suppress(threading.BrokenBarrierError):
            both_hold.wait(timeout=3)

    def cap_set_then_wait(**kwargs):
        cap_set(**kwargs)
        hold_then_wait()

    def check_then_wait(**kwargs):
        check_again(**kwargs)
        if not getattr(capped, "yes", False):
            hold_then_wait()

    monkeypatch.setattr(engine_api, "engine_run_cap_set", cap_set_then_wait)
    monkeypatch.setattr(engine_api, "engine_run_check_again", check_then_wait)
    resume = reverse("api-engine-run-resume", args=[earlier.engine_run_id])

    def again(body):
        def post():
            capped.yes = "spending_cap_usd" in body
            client = Client()
            client.force_login(admin_user)
            return client.post(resume, body, content_type="application/json")

        return post

    answers = at_once(again({"spending_cap_usd": "5"}), again({}))

    assert all(not isinstance(answer, Exception) for answer in answers), answers
    assert sorted(answer.status_code for answer in answers) == [202, 400], answers
    refused = next(answer for answer in answers if answer.status_code == 400)
    assert "starting already" in refused.json()["detail"]
    earlier.engine_run.refresh_from_db()
    assert earlier.engine_run.status == "pending"
