"""Verbalizer runs through the engine against the OpenAI-compatible stub over real HTTP."""

import re

import pytest
from django.core.management import CommandError, call_command
from django.utils.html import escape

from annotate.engine.models import EngineCall, EngineRun
from annotate.templatetags.money import usd_at_most
from annotate.verbalizer.models import ModelAnswer, SystemRun
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.engine.conftest import endpoint_with_unset_key, make_endpoint, start_confirmed
from tests.annotate.verbalizer.helpers import fill

pytestmark = pytest.mark.django_db


def first_word(messages):
    """A model that always answers the first word the instruction names."""
    return re.match(r'Answer "([^"]+)"', messages[-1]["content"]).group(1)


@pytest.fixture
def two_items(db):
    fill("SST-2", [True, False])
    return evaluation_set_create(
        name="s", datasets=["SST-2"], items=2, seed=1, mappings="golden,flipped-golden"
    ).evaluation_set


def test_run_answers_every_prompt_at_temperature_0_and_resumes(stub, two_items, capsys):
    stub.responder = first_word
    make_endpoint(stub.base_url, name="e")
    call_command("verbalizer_run", "--set", "s", "--system", "m", "--endpoint", "e", "--size", "7")
    assert "done: 4 of 4 prompts answered" in capsys.readouterr().out
    assert len(stub.requests) == 4
    assert {body["temperature"] for body in stub.requests} == {0}
    assert all(set(body) == {"model", "messages", "temperature"} for body in stub.requests)
    assert stub.requests[0]["messages"][0]["content"].startswith('Answer "')
    answers = ModelAnswer.objects.select_related("prompt", "engine_call")
    assert all(a.reply == a.prompt.positive_word for a in answers)
    assert all(a.engine_call.reply == a.reply for a in answers)
    run = EngineRun.objects.get()
    assert (run.kind, run.status, run.units_done) == ("verbalizer", "done", 4)
    # Started again: nothing is asked twice.
    call_command("verbalizer_run", "--set", "s", "--system", "m", "--endpoint", "e")
    assert len(stub.requests) == 4
    assert ModelAnswer.objects.count() == 4


def test_the_command_takes_a_spending_cap_and_a_dry_run(stub, two_items, capsys):
    """--spending-cap reached the engine as text and crashed the command (a TypeError)."""
    from decimal import Decimal

    from annotate.models import System

    stub.responder = first_word
    make_endpoint(stub.base_url, name="e", price_prompt_per_1k="1", max_tokens=5)
    command = ["verbalizer_run", "--set", "s", "--system", "m", "--endpoint", "e"]
    call_command(*command, "--dry-run")
    out = capsys.readouterr().out
    assert (
        "Dry run (nothing sent, no run kept): 4 prompts to answer (0 done already), 4 calls" in out
    )
    assert stub.requests == [] and not EngineRun.objects.exists()
    assert not System.objects.filter(name="m").exists()
    with pytest.raises(CommandError, match="--spending-cap: The spending cap cannot be negative"):
        call_command(*command, "--spending-cap", "-1")
    # Half the dry run's worst case: the run stops before the last prompts, within the cap.
    worst = Decimal(re.search(r"at most \$(\d+\.\d+)", out).group(1))
    with pytest.raises(CommandError, match="ended cancelled: Stopped: the next call would exceed"):
        call_command(*command, "--spending-cap", str(worst / 2))
    run = EngineRun.objects.get()
    assert run.spending_cap_usd == worst / 2 and 0 < run.cost_usd <= run.spending_cap_usd
    assert 0 < ModelAnswer.objects.count() == len(stub.requests) < 4


def test_a_cap_set_from_the_dry_runs_worst_case_lets_the_run_finish(stub, two_items, capsys):
    """The dry run said "at most $0.22" for a worst case of $0.223440 (rounded half up), and a
    run capped at that figure was stopped by the cap before its last prompt."""
    from decimal import Decimal

    stub.responder = first_word
    stub.usage = False  # each call then costs its worst case: the engine's count, no reply price
    make_endpoint(
        stub.base_url, name="e", price_prompt_per_1k="0.98", price_completion_per_1k="0",
        max_tokens=5,
    )  # fmt: skip
    command = ["verbalizer_run", "--set", "s", "--system", "m", "--endpoint", "e"]
    call_command(*command, "--dry-run")
    shown = re.search(r"at most \$(\d+\.\d+)", capsys.readouterr().out).group(1)
    call_command(*command, "--spending-cap", shown)
    run = EngineRun.objects.get()
    assert (run.status, run.units_done) == ("done", 4)
    assert Decimal("0.22") < run.cost_usd <= run.spending_cap_usd == Decimal(shown)


def test_the_estimate_counts_the_prompts_the_run_then_sends(stub, two_items):
    """Each prompt counted as the engine counts a sent one. It was len(text) // 4 + 8, one
    token more than the engine's count for a text whose length is a multiple of four."""
    from annotate.engine.client import estimate_prompt_tokens
    from annotate.engine.services import engine_run_estimate
    from annotate.verbalizer.models import Prompt
    from annotate.verbalizer.services.runs import verbalizer_run_create, verbalizer_run_execute

    for prompt in Prompt.objects.all():  # every length a multiple of four: where the two differ
        prompt.text += " " * (-len(prompt.text) % 4)
        prompt.save(update_fields=["text"])
    stub.responder = first_word
    make_endpoint(stub.base_url, name="e", max_tokens=5)
    system_run = verbalizer_run_create(evaluation_set=two_items, system="m", endpoint="e")

    estimate = engine_run_estimate(run=system_run.engine_run)
    verbalizer_run_execute(system_run=system_run)

    sent = [body["messages"] for body in stub.requests]
    assert estimate.units == estimate.calls == len(sent) == 4
    assert estimate.prompt_tokens == sum(estimate_prompt_tokens(m) for m in sent)


def test_a_failed_call_stores_no_answer_and_the_next_start_fills_it(stub, two_items):
    stub.responder = first_word
    stub.fail_next(400, message="bad request")
    make_endpoint(stub.base_url, name="e")
    with pytest.raises(CommandError, match="ended failed"):
        call_command("verbalizer_run", "--set", "s", "--system", "m", "--endpoint", "e")
    assert ModelAnswer.objects.count() == 3
    assert EngineCall.objects.filter(status="error").count() == 1
    call_command("verbalizer_run", "--set", "s", "--system", "m", "--endpoint", "e")
    assert ModelAnswer.objects.count() == 4


def test_unknown_endpoint_or_mode_is_refused(two_items):
    with pytest.raises(CommandError, match="no engine endpoint named 'x'"):
        call_command("verbalizer_run", "--set", "s", "--system", "m", "--endpoint", "x")
    make_endpoint("", name="fake")
    with pytest.raises(CommandError) as refused:
        call_command(
            "verbalizer_run", "--set", "s", "--system", "m", "--endpoint", "fake", "--modes", "cot"
        )
    assert str(refused.value) == "--modes: the set has modes direct; not cot"  # not ['direct']
    with pytest.raises(CommandError, match="no evaluation set"):
        call_command("verbalizer_run", "--set", "nope", "--system", "m", "--endpoint", "fake")
    # A negative size was kept and put the system first in every figure.
    for size in ("-3", "nan"):
        with pytest.raises(
            CommandError, match=f"--size: billions of parameters, 0 or more; found {size}"
        ):
            call_command(
                "verbalizer_run",
                "--set",
                "s",
                "--system",
                "m",
                "--endpoint",
                "fake",
                "--size",
                size,
            )
    assert not SystemRun.objects.exists()


def test_set_page_starts_a_run_admins_only_on_paid_endpoints(
    client, admin_user, researcher, two_items, stub, django_capture_on_commit_callbacks
):
    from annotate.verbalizer.models import SystemRun
    from annotate.verbalizer.services.runs import verbalizer_run_execute

    stub.responder = first_word
    make_endpoint(stub.base_url, name="paid", price_prompt_per_1k="0.01")
    url = f"/verbalizer/sets/{two_items.pk}/"
    form = {"run-system": "m", "run-endpoint": "paid", "run-modes": ["direct"]}
    client.force_login(researcher)
    refused = client.post(url, form)
    assert refused.status_code == 403 and not SystemRun.objects.exists()
    # Said on the set page, beside the endpoint, with the form as it was filled in.
    assert "only an admin may start a run on it" in str(
        refused.context["run_form"].errors["endpoint"]
    )
    assert refused.context["run_form"]["system"].value() == "m"
    client.force_login(admin_user)
    # The start happens after commit (a thread or Celery); here the test runs it itself.
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        start_confirmed(client, url, {**form, "run-model_size_b": "70"})
    assert len(callbacks) == 1
    system_run = SystemRun.objects.get()
    assert (system_run.model_size_b, system_run.created_by) == (70, admin_user)
    assert system_run.engine_run.status == "pending"
    verbalizer_run_execute(system_run=system_run)
    assert ModelAnswer.objects.filter(run=system_run).count() == 4
    assert system_run.engine_run.__class__.objects.get().cost_usd > 0


def test_set_page_says_the_priced_offline_fake_bills_nobody_and_who_may_use_each(
    client, researcher, two_items
):
    make_endpoint("", name="fake", price_prompt_per_1k="0.03")  # priced, still billing nobody
    make_endpoint("http://127.0.0.1:9/v1", name="paid")
    client.force_login(researcher)
    page = client.get(f"/verbalizer/sets/{two_items.pk}/").text
    assert ">fake (offline fake: no bill, researchers may use it)</option>" in page
    assert ">paid (paid API: admins only)</option>" in page
    assert "free" not in page


def test_set_page_estimates_a_run_keeps_nothing_and_keeps_the_form(
    client, admin_user, researcher, two_items, stub
):
    from decimal import Decimal

    from annotate.engine.services import engine_run_estimate
    from annotate.models import System
    from annotate.verbalizer.models import SystemRun
    from annotate.verbalizer.services.runs import verbalizer_run_create

    make_endpoint(stub.base_url, name="paid", price_prompt_per_1k="1", max_tokens=10)
    url = f"/verbalizer/sets/{two_items.pk}/"
    form = {"run-system": "m", "run-endpoint": "paid", "run-modes": ["direct"]}
    form |= {"run-spending_cap_usd": "0.5", "estimate": "1"}
    client.force_login(researcher)
    refused = client.post(url, form)  # a paid endpoint's estimate is an admin's, as its start
    assert refused.status_code == 403 and refused.context["estimate"] is None
    client.force_login(admin_user)
    page = client.post(url, form)
    assert page.status_code == 200 and stub.requests == []
    assert not SystemRun.objects.exists() and not EngineRun.objects.exists()
    assert not System.objects.filter(name="m").exists()
    assert page.context["run_form"]["spending_cap_usd"].value() == "0.5"
    made = verbalizer_run_create(
        evaluation_set=two_items, system="m", endpoint="paid", modes=["direct"],
        spending_cap_usd=Decimal("0.5"),
    )  # fmt: skip
    expected = engine_run_estimate(run=made.engine_run)
    assert page.context["estimate"] == expected and expected.units == 4
    assert made.engine_run.spending_cap_usd == Decimal("0.5")
    shown = " ".join(page.text[page.text.index('id="estimate"') :].split())
    assert f"4 prompts to answer (0 done already), 4 calls, about {expected.prompt_tokens}" in shown
    assert f"at most {usd_at_most(expected.cost_usd)}" in shown


def test_the_engine_run_page_names_the_system_and_set_and_links_to_the_report(
    client, researcher, two_items
):
    """The set page links to its engine run; the run page led only to "All runs", so a
    researcher watching the run had no way on to the set or its report."""
    from django.urls import reverse

    from annotate.verbalizer.services.runs import verbalizer_run_create

    make_endpoint("", name="fake")
    system_run = verbalizer_run_create(evaluation_set=two_items, system="m", endpoint="fake")
    client.force_login(researcher)
    page = client.get(reverse("engine:run-detail", args=[system_run.engine_run_id]))
    html = page.content.decode()
    assert "<h1>System m on set s</h1>" in html
    report = reverse("verbalizer-reports:detail", args=[two_items.pk])
    assert f'<a href="{report}" id="run-results">' in html


def test_the_command_shows_progress_and_the_endpoint_pace(stub, two_items, capsys):
    """verbalizer_run printed nothing until the end, unlike generate and judge."""
    stub.responder = first_word
    make_endpoint(stub.base_url, name="e", concurrency=2)
    call_command("verbalizer_run", "--set", "s", "--system", "m", "--endpoint", "e")
    out, err = capsys.readouterr()
    assert "(endpoint e: 2 calls at a time, at most 1000000 requests and 100000000 tokens" in out
    assert "4/4" in err and "prompt" in err  # the progress bar, on standard error, ends full
    assert "done: 4 of 4 prompts answered" in out


def test_the_fake_made_as_the_readme_says_answers_as_a_paced_fake_does(two_items):
    """The fake's new default limits change its pace, not its answers."""
    from annotate.verbalizer.models import SystemRun

    call_command("endpoint_create", "local-fake", "--base-url", "", "--model", "fake-1")
    call_command(
        "endpoint_create", "paced-fake", "--base-url", "", "--model", "fake-1",
        "--rpm", "500", "--tpm", "200000",
    )  # fmt: skip
    for system, endpoint in (("new", "local-fake"), ("paced", "paced-fake")):
        call_command("verbalizer_run", "--set", "s", "--system", system, "--endpoint", endpoint)
    replies = {
        system: sorted(
            ModelAnswer.objects.filter(system__name=system).values_list("prompt_id", "reply")
        )
        for system in ("new", "paced")
    }
    assert len(replies["new"]) == 4 and replies["new"] == replies["paced"]
    assert SystemRun.objects.count() == 2


def test_fake_models_answer_a_set_each_as_its_skill_has_it_the_same_every_time():
    """The offline fake answered from the prompt alone: every fake model read the same."""
    fill("SST-2", [True, False] * 6)
    evaluation_set_create(
        name="flipped", datasets=["SST-2"], items=12, seed=1, mappings="golden,flipped-golden"
    )
    systems = (("small", "fake-1b"), ("small-again", "fake-1b"), ("large", "fake-70b"))
    for system, model in systems:
        make_endpoint(name=system, model=model)
        call_command("verbalizer_run", "--set", "flipped", "--system", system, "--endpoint", system)
    replies = {
        system: sorted(
            ModelAnswer.objects.filter(system__name=system).values_list("prompt_id", "reply")
        )
        for system, _ in systems
    }
    assert len(replies["small"]) == 24
    assert replies["small"] == replies["small-again"]
    assert replies["small"] != replies["large"]
    sent = EngineCall.objects.filter(purpose="verbalizer").first().request
    assert set(sent["fake_hint"]) == {"expected", "group", "item"}


def test_the_set_page_says_a_run_prepares_its_units_instead_of_0_of_0(
    client, researcher, two_items
):
    """As the engine's pages: a started run has no units yet, and "0/0" read as an empty run."""
    from django.urls import reverse
    from django.utils import timezone

    from annotate.engine.models import RunStatus
    from annotate.verbalizer.services.runs import verbalizer_run_create, verbalizer_run_execute

    make_endpoint("", name="fake")
    system_run = verbalizer_run_create(evaluation_set=two_items, system="m", endpoint="fake")
    client.force_login(researcher)
    url = reverse("verbalizer:set-detail", args=[two_items.pk])
    for status in (RunStatus.PENDING, RunStatus.RUNNING):  # asked, then taken by a worker
        EngineRun.objects.filter(pk=system_run.engine_run_id).update(
            status=status, heartbeat=timezone.now()
        )
        page = client.get(url).content.decode()
        assert "Preparing units…" in page and "0/0" not in page

    EngineRun.objects.filter(pk=system_run.engine_run_id).update(status=RunStatus.PENDING)
    verbalizer_run_execute(system_run=system_run)
    page = client.get(url).content.decode()
    assert "(Done, 4/4, $" in page and "Preparing units…" not in page


def test_a_run_with_every_prompt_answered_is_refused_by_page_api_and_command_keeping_nothing(
    client, researcher, two_items, capsys
):
    """A second run of the system had nothing to ask, yet was recorded: the set page listed an
    empty run ("0 answers"). As `generate`: "Nothing to do", no run kept, the API answers 409."""
    from django.urls import reverse

    from annotate.verbalizer.services.runs import verbalizer_run_create, verbalizer_run_execute

    make_endpoint("", name="fake")
    verbalizer_run_execute(
        system_run=verbalizer_run_create(evaluation_set=two_items, system="m", endpoint="fake")
    )
    kept = (list(SystemRun.objects.values_list("pk", flat=True)), EngineRun.objects.count())
    message = "Nothing to do: m answered the 4 prompts of set s (direct) already; no run was made."
    call_command("verbalizer_run", "--set", "s", "--system", "m", "--endpoint", "fake")
    assert capsys.readouterr().out == message + "\n"
    client.force_login(researcher)
    api = client.post(
        reverse("api-verbalizer-runs", args=[two_items.pk]),
        {"system": "m", "endpoint": "fake"},
        content_type="application/json",
    )
    assert api.status_code == 409 and api.json() == {"detail": message}
    form = {"run-system": "m", "run-endpoint": "fake", "run-modes": ["direct"]}
    page = client.post(reverse("verbalizer:set-detail", args=[two_items.pk]), form)
    assert page.status_code == 409 and message in page.content.decode()
    assert (list(SystemRun.objects.values_list("pk", flat=True)), EngineRun.objects.count()) == kept


def test_a_run_on_an_endpoint_whose_key_is_unset_is_refused_writing_nothing(two_items, monkeypatch):
    from django.apps import apps

    endpoint_with_unset_key(monkeypatch, name="keyed")
    counts = {model._meta.label: model.objects.count() for model in apps.get_models()}
    with pytest.raises(CommandError, match="set the environment variable OPENAI_API_KEY"):
        call_command("verbalizer_run", "--set", "s", "--system", "m", "--endpoint", "keyed")
    assert counts == {model._meta.label: model.objects.count() for model in apps.get_models()}


def test_starting_a_run_on_the_set_page_lands_on_its_progress_page(
    client, researcher, two_items, django_capture_on_commit_callbacks
):
    """As the judge pages do: the run's page updates by itself and links the report; the set
    page's table did neither."""
    from django.urls import reverse

    from annotate.verbalizer.models import SystemRun

    make_endpoint("", name="fake")
    client.force_login(researcher)
    form = {"run-system": "m", "run-endpoint": "fake", "run-modes": ["direct"]}
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("verbalizer:set-detail", args=[two_items.pk]), form)
    engine_run_id = SystemRun.objects.get().engine_run_id
    assert response.status_code == 302
    assert response["Location"] == reverse("engine:run-detail", args=[engine_run_id])
    page = client.get(response["Location"]).content.decode()
    assert f"Started engine run #{engine_run_id}." in page
    assert reverse("verbalizer-reports:detail", args=[two_items.pk]) in page


def test_a_runs_page_leads_back_to_its_set_to_start_the_next(
    client, researcher, two_items, django_capture_on_commit_callbacks
):
    """Starting a run lands on the engine's run page; the way back to the set (to run the next
    model or publish a study) was the report's link, two pages away."""
    from django.urls import reverse

    make_endpoint("", name="fake")
    client.force_login(researcher)
    form = {"run-system": "m", "run-endpoint": "fake", "run-modes": ["direct"]}
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("verbalizer:set-detail", args=[two_items.pk]), form)
    page = client.get(response["Location"]).content.decode()
    set_page = reverse("verbalizer:set-detail", args=[two_items.pk])
    assert f'<a href="{set_page}" id="run-origin">← Set s</a>' in page


def test_a_finished_runs_page_no_longer_says_its_results_are_partial(
    client, researcher, two_items, django_capture_on_commit_callbacks
):
    """ "See the results (complete once the run is done)" was said of a run long done."""
    from django.urls import reverse

    from annotate.engine.models import EngineRun, RunStatus

    make_endpoint("", name="fake")
    client.force_login(researcher)
    form = {"run-system": "m", "run-endpoint": "fake", "run-modes": ["direct"]}
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("verbalizer:set-detail", args=[two_items.pk]), form)
    pending = client.get(response["Location"]).text
    assert '<span id="run-results-partial"> (complete once the run is done)</span>' in pending
    EngineRun.objects.update(status=RunStatus.DONE)
    done = client.get(response["Location"]).text
    assert '<span id="run-results-partial" hidden> (complete once the run is done)</span>' in done


def test_a_set_without_runs_points_at_the_form_and_quotes_its_name_in_the_command(
    client, researcher
):
    from django.urls import reverse

    fill("SST-2", [True])
    named = evaluation_set_create(name="my set", datasets=["SST-2"], items=1, seed=1)
    client.force_login(researcher)
    page = client.get(reverse("verbalizer:set-detail", args=[named.evaluation_set.pk]))
    empty = page.content.decode().split('id="no-run">')[1].split("</td>")[0]
    assert '<a href="#run-system">run a system</a> with the form below' in empty
    assert 'verbalizer_run --set "my set" --system NAME' in empty


def test_the_command_a_set_without_runs_prints_names_the_set_when_pasted_into_a_shell(
    client, researcher
):
    """The hint put the name in double quotes as it was: a set named with a double quote broke
    the command, and one with `$` reached verbalizer_run as another name (the shell expanded it).
    """
    import html
    import shlex

    from django.urls import reverse

    fill("SST-2", [True])
    name = 'Tom\'s "best" $HOME set'
    named = evaluation_set_create(name=name, datasets=["SST-2"], items=1, seed=1)
    client.force_login(researcher)
    page = client.get(reverse("verbalizer:set-detail", args=[named.evaluation_set.pk]))
    empty = page.content.decode().split('id="no-run">')[1].split("</td>")[0]
    command = html.unescape(re.search(r"<code>(.*?)</code>", empty).group(1))
    words = shlex.split(command)
    assert words[words.index("--set") + 1] == name


def test_the_model_runs_list_names_the_system_and_the_set_of_a_verbalizer_run(
    client, researcher, two_items
):
    """The Model runs list showed a verbalizer run as a bare "#8" beside the generation and
    judge runs, which name what they do; only its own page said which system and set it was."""
    from django.urls import reverse

    from annotate.verbalizer.services.runs import verbalizer_run_create

    make_endpoint("", name="offline")
    system_run = verbalizer_run_create(evaluation_set=two_items, system="m", endpoint="offline")
    client.force_login(researcher)
    listed = client.get(reverse("engine:run-list")).text

    assert f"#{system_run.engine_run_id}</a> Verbalizer: system m on set s</td>" in listed


def test_a_system_is_not_run_again_on_an_endpoint_serving_another_model(stub, two_items):
    """The second run asked only the prompts the first had left, through another model, and
    the system's rows pooled both models' replies under one name without a word."""
    stub.responder = first_word
    make_endpoint(stub.base_url, name="small", model="model-7b", max_tokens=5)
    make_endpoint(stub.base_url, name="large", model="model-70b", max_tokens=5)
    make_endpoint(stub.base_url, name="small-again", model="model-7b", max_tokens=5)
    command = ["verbalizer_run", "--set", "s", "--system", "m", "--modes", "direct"]
    call_command(*command, "--endpoint", "small")
    answered = ModelAnswer.objects.count()

    with pytest.raises(CommandError) as refused:
        call_command(*command, "--endpoint", "large")

    assert str(refused.value).startswith(
        "--system: m answered prompts of set s through endpoint small (model model-7b); "
        "large serves model model-70b"
    )
    assert SystemRun.objects.count() == 1 and ModelAnswer.objects.count() == answered
    # The same model: a resume, allowed (nothing is left here, so no run is made).
    call_command(*command, "--endpoint", "small-again")
    call_command(*command[:4], "m-70b", "--modes", "direct", "--endpoint", "large")
    assert SystemRun.objects.count() == 2


def test_a_refusal_beside_its_field_does_not_name_the_command_line_option(
    client, researcher, two_items
):
    """Beside System the page read "--system: m answered prompts of set s through ...": the
    command's option, which a person on the page never typed."""
    from django.urls import reverse

    from annotate.verbalizer.services.runs import verbalizer_run_create

    make_endpoint("", name="fake-a", model="model-a")
    make_endpoint("", name="fake-b", model="model-b")
    first = verbalizer_run_create(evaluation_set=two_items, system="m", endpoint="fake-a")
    ModelAnswer.objects.create(  # m answered a prompt through fake-a
        prompt=two_items.prompts.first(), system=first.system, run=first, reply="positive"
    )
    client.force_login(researcher)
    form = {"run-system": "m", "run-endpoint": "fake-b", "run-modes": ["direct"]}
    page = client.post(reverse("verbalizer:set-detail", args=[two_items.pk]), form)
    errors = page.context["run_form"].errors["system"]
    assert errors == [
        "m answered prompts of set s through endpoint fake-a (model model-a); fake-b serves "
        "model model-b, and this run would only ask the prompts left, mixing two models under "
        "one name: give it a system name of its own"
    ]


@pytest.mark.parametrize(
    "cost, shown",
    [("0", "$0.00"), ("0.000123", "$0.00012"), ("0.005", "$0.005"), ("1234.567891", "$1,234.57")],
)
def test_the_set_page_shows_a_runs_cost_in_dollars_and_cents(
    client, researcher, two_items, cost, shown
):
    """ "$0.000000" beside every run: the set page shows costs as the run pages show costs
    (two decimals, halves up), and a cost under a cent by its first two significant digits,
    not as nothing."""
    from decimal import Decimal

    from django.urls import reverse

    from annotate.verbalizer.services.runs import verbalizer_run_create

    make_endpoint("", name="fake")
    system_run = verbalizer_run_create(evaluation_set=two_items, system="m", endpoint="fake")
    EngineRun.objects.filter(pk=system_run.engine_run_id).update(cost_usd=Decimal(cost))
    client.force_login(researcher)
    page = client.get(reverse("verbalizer:set-detail", args=[two_items.pk])).content.decode()
    assert f", {escape(shown)})</a>" in page
    assert f"{Decimal(cost):.6f}" not in page  # never the six stored decimals
