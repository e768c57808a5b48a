"""Engine pages and API: endpoints (admins), generation started from a page, the run page."""

import re
from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from annotate.engine.generation import DEFAULT_TEMPLATE
from annotate.engine.models import CallStatus, Endpoint, EngineRun, RunStatus
from annotate.engine.services import (
    engine_background_wait,
    engine_run_create,
    engine_run_execute,
    engine_run_stop,
)
from annotate.engine.services.generation import (
    generating_system_get_or_create,
    generation_run_create,
)
from annotate.models import Benchmark, Instruction, Response, System
from annotate.templatetags.money import usd_at_most
from tests.annotate.engine.conftest import (
    ENDPOINT_FORM,
    again_total,
    dollar_a_thousand,
    endpoint_with_unset_key,
    make_endpoint,
    make_instructions,
)
from tests.factories import BenchmarkFactory, ResponseFactory, SystemFactory


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def researcher_client(client, researcher):
    client.force_login(researcher)
    return client


@pytest.mark.django_db
def test_only_admins_see_and_create_endpoints(admin_client, researcher_client, admin_user):
    assert researcher_client.get(reverse("engine:endpoint-list")).status_code == 403
    researcher_client.logout()
    admin_client.force_login(admin_user)
    response = admin_client.post(reverse("engine:endpoint-new"), ENDPOINT_FORM)
    assert response.status_code == 302
    endpoint = Endpoint.objects.get(name="local-vllm")
    assert endpoint.stop == ["END", "###"] and endpoint.max_tokens is None
    assert admin_client.get(reverse("engine:endpoint-list")).content.count(b"local-vllm") >= 1


@pytest.mark.django_db
def test_a_key_variable_outside_the_allow_list_is_refused_on_the_page(admin_client):
    form = {**ENDPOINT_FORM, "api_key_env": "DJANGO_SECRET_KEY"}
    response = admin_client.post(reverse("engine:endpoint-new"), form)
    assert response.status_code == 400 and b"not an allowed API key variable" in response.content
    assert not Endpoint.objects.exists()


@pytest.mark.django_db
def test_test_connection_shows_the_answer_or_the_exact_error(admin_client, stub):
    endpoint = make_endpoint(stub.base_url)
    stub.replies.append("ready")
    url = reverse("engine:endpoint-test", args=[endpoint.pk])
    page = admin_client.post(url, follow=True)
    assert b"ready" in page.content and stub.requests[0]["max_tokens"] == 8
    stub.fail_next(404, message="model llama does not exist")
    page = admin_client.post(url, follow=True)
    assert b"model llama does not exist" in page.content


@pytest.mark.django_db
def test_test_connection_to_the_offline_fake_reads_as_success(admin_client):
    """The fake answers past the test's 8 tokens, so the call ends truncated: a connection that
    works must still read as one, not as "Truncated"."""
    endpoint = make_endpoint("", name="fake")
    page = admin_client.post(reverse("engine:endpoint-test", args=[endpoint.pk]), follow=True)
    html = page.content.decode()
    assert "Connected: the endpoint answered (reply cut at 8 tokens, as the test asks for)." in html
    assert "Truncated" not in html and 'id="endpoint-test-verdict" class="error"' not in html


@pytest.mark.django_db
def test_a_failed_test_connection_reads_as_a_failure(admin_client, stub):
    endpoint = make_endpoint(stub.base_url)
    stub.fail_next(404, message="model llama does not exist")
    page = admin_client.post(reverse("engine:endpoint-test", args=[endpoint.pk]), follow=True)
    html = page.content.decode()
    assert 'id="endpoint-test-verdict" class="error">Failed: the endpoint gave no answer' in html


@pytest.mark.django_db
def test_test_connection_counts_on_the_model_call_rate(admin_client, stub, worker_rates):
    """Each test is a real call, perhaps a paid one: on the user's model call rate; past it 429
    with Retry-After, nothing sent, and the way back to the endpoint."""
    worker_rates(model_calls="1/hour")
    endpoint = make_endpoint(stub.base_url)
    stub.replies.extend(["ready", "ready"])
    url = reverse("engine:endpoint-test", args=[endpoint.pk])
    assert admin_client.post(url).status_code == 302
    refused = admin_client.post(url)
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    html = refused.content.decode()
    assert "Too many model calls from your account (at most 1/hour)" in html
    assert "Nothing was sent." in html
    assert reverse("engine:endpoint-edit", args=[endpoint.pk]) in html
    assert len(stub.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_a_generation_started_from_the_page_runs_in_the_background(researcher_client):
    make_instructions(4)
    endpoint = make_endpoint("", name="fake")
    form = {"endpoint": endpoint.pk, "system": "fake-gen", "template": "generation_infobench_v1",
            "seed": "0", "start": "1"}  # fmt: skip
    form["benchmark"] = Benchmark.objects.get().pk
    response = researcher_client.post(reverse("engine:generation-new"), form)
    assert response.status_code == 302
    engine_background_wait(30)  # before reading: SQLite's shared in-memory test database
    run = EngineRun.objects.get()
    assert response["Location"] == reverse("engine:run-detail", args=[run.pk])
    assert run.status == RunStatus.DONE and run.units_done == 4
    assert Response.objects.filter(system__name="fake-gen").count() == 4
    progress = researcher_client.get(reverse("engine:run-progress", args=[run.pk])).json()
    assert (progress["units_done"], progress["units_total"], progress["active"]) == (4, 4, False)
    page = researcher_client.get(reverse("engine:run-detail", args=[run.pk]))
    assert (
        b"run_progress.js" in page.content and b'4</span> / <span id="run-total">4' in page.content
    )


@pytest.mark.django_db
def test_researchers_cannot_spend_money_and_estimates_send_nothing(researcher_client, stub):
    make_instructions(2)
    paid = make_endpoint(stub.base_url, name="paid")
    form = {"endpoint": paid.pk, "benchmark": Benchmark.objects.get().pk, "system": "g",
            "template": "generation_infobench_v1", "seed": "0", "start": "1"}  # fmt: skip
    response = researcher_client.post(reverse("engine:generation-new"), form)
    assert response.status_code == 403 and b"only an admin" in response.content
    assert "only an admin" in str(response.context["form"].errors["endpoint"])  # beside it
    assert not EngineRun.objects.exists() and stub.requests == []


@pytest.mark.django_db
def test_a_researcher_is_told_a_paid_endpoint_is_an_admins_before_its_missing_key(
    researcher_client, monkeypatch
):
    """A paid endpoint whose key variable is unset: the researcher was told to set
    OPENAI_API_KEY (the variable's name, and a chore that would only end in the refusal)."""
    make_instructions(1)
    paid = endpoint_with_unset_key(monkeypatch, name="paid-no-key")
    form = {"endpoint": paid.pk, "benchmark": Benchmark.objects.get().pk, "system": "g",
            "template": "generation_infobench_v1", "seed": "0", "start": "1"}  # fmt: skip
    response = researcher_client.post(reverse("engine:generation-new"), form)
    assert response.status_code == 403 and b"only an admin" in response.content
    assert b"OPENAI_API_KEY" not in response.content
    assert not EngineRun.objects.exists()


@pytest.mark.django_db
def test_an_estimate_on_the_page_sends_nothing_and_keeps_no_run(admin_client, stub):
    make_instructions(3)
    paid = make_endpoint(stub.base_url, name="paid", max_tokens=10)
    form = {"endpoint": paid.pk, "benchmark": Benchmark.objects.get().pk, "system": "g",
            "template": "generation_infobench_v1", "seed": "0", "estimate": "1"}  # fmt: skip
    response = admin_client.post(reverse("engine:generation-new"), form)
    assert response.status_code == 200 and b"3 responses to generate" in response.content
    assert not EngineRun.objects.exists() and stub.requests == []


@pytest.mark.django_db
@pytest.mark.parametrize("button", ["start", "estimate"])
def test_a_negative_cap_is_refused_beside_its_field(admin_client, stub, button):
    make_instructions(1)
    paid = make_endpoint(stub.base_url, name="paid")
    form = {"endpoint": paid.pk, "benchmark": Benchmark.objects.get().pk, "system": "g",
            "template": "generation_infobench_v1", "seed": "0", "spending_cap_usd": "-1",
            button: "1"}  # fmt: skip
    response = admin_client.post(reverse("engine:generation-new"), form)
    assert response.status_code == 400 and list(response.context["form"].errors) == [
        "spending_cap_usd"
    ]
    assert "The spending cap cannot be negative" in _field_row(
        response.content.decode(), "spending_cap_usd"
    )
    assert not EngineRun.objects.exists() and stub.requests == []


@pytest.mark.django_db
def test_a_system_that_cannot_generate_is_refused_once_beside_its_field(admin_client):
    make_instructions(1)
    imported = ResponseFactory(instruction=Instruction.objects.get(), system__name="imported")
    form = {"endpoint": make_endpoint("", name="fake").pk, "benchmark": Benchmark.objects.get().pk,
            "system": imported.system.name, "template": "generation_infobench_v1", "seed": "0",
            "estimate": "1"}  # fmt: skip
    response = admin_client.post(reverse("engine:generation-new"), form)
    assert response.status_code == 400
    assert "has imported responses" in " ".join(response.context["form"].errors["system"])
    assert response.content.decode().count("has imported responses") == 1
    assert not EngineRun.objects.exists()


@pytest.mark.django_db
def test_the_generation_page_says_which_endpoints_cost_money(researcher_client):
    make_endpoint("", name="free-one")
    make_endpoint("http://127.0.0.1:9/v1", name="paid-one")
    page = researcher_client.get(reverse("engine:generation-new")).content.decode()
    assert "free-one (offline fake: no bill, researchers may use it)" in page
    assert "paid-one (paid API: admins only)" in page


@pytest.mark.django_db
def test_stop_from_the_page_and_the_api(admin_client):
    endpoint = make_endpoint("", name="fake")
    run = EngineRun.objects.create(kind="generation", endpoint=endpoint, params={})
    admin_client.post(reverse("engine:run-stop", args=[run.pk]))
    run.refresh_from_db()
    assert run.stop_requested and run.status == RunStatus.CANCELLED
    data = admin_client.get(reverse("api-engine-run", args=[run.pk])).json()
    assert data["status"] == "cancelled" and data["active"] is False


@pytest.mark.django_db
@pytest.mark.parametrize("status", [RunStatus.DONE, RunStatus.FAILED, RunStatus.CANCELLED])
def test_stopping_a_run_that_has_ended_is_refused_and_changes_nothing(admin_client, status):
    endpoint = make_endpoint("", name="fake")
    params = {"template": "generation_infobench_v1", "system_ids": [], "instruction_ids": []}
    run = EngineRun.objects.create(
        kind="generation", endpoint=endpoint, params=params, status=status, error="as it was"
    )
    shown = {RunStatus.DONE: "done", RunStatus.FAILED: "failed", RunStatus.CANCELLED: "stopped"}
    message = f"Run {run.pk} has ended ({shown[status]}): there is nothing to stop."

    api = admin_client.post(reverse("api-engine-run-stop", args=[run.pk]))
    assert api.status_code == 409 and api.json() == {"detail": message}
    page = admin_client.post(reverse("engine:run-stop", args=[run.pk]), follow=True)
    assert page.redirect_chain == [(reverse("engine:run-detail", args=[run.pk]), 302)]
    assert [str(m) for m in page.context["messages"]] == [message]

    run.refresh_from_db()
    assert (run.status, run.stop_requested, run.error) == (status, False, "as it was")


@pytest.mark.django_db
def test_a_generation_with_nothing_left_is_refused_by_the_api_and_the_page(admin_client):
    make_instructions(2)
    endpoint = make_endpoint("", name="fake")
    system = generating_system_get_or_create(name="done-sys", endpoint=endpoint)
    for instruction in Instruction.objects.all():
        ResponseFactory(instruction=instruction, system=system, generation_key="earlier")
    message = (
        "Nothing to do: the 2 responses of done-sys to bench (all) are there already; "
        "no run was made."
    )
    api = admin_client.post(
        reverse("api-engine-generation-runs"),
        {"benchmark": "bench", "system": "done-sys", "endpoint": "fake"},
        content_type="application/json",
    )
    assert api.status_code == 409 and api.json() == {"detail": message}
    form = {"endpoint": endpoint.pk, "benchmark": Benchmark.objects.get().pk,
            "system": "done-sys", "template": "generation_infobench_v1", "seed": "0",
            "start": "1"}  # fmt: skip
    page = admin_client.post(reverse("engine:generation-new"), form)
    assert page.status_code == 409
    assert list(page.context["form"].non_field_errors()) == [message]
    assert not EngineRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_api_starts_a_generation_run_and_reports_its_progress(admin_client, stub):
    make_instructions(2)
    make_endpoint(stub.base_url, name="api-ep")
    body = {"benchmark": "bench", "system": "api-sys", "endpoint": "api-ep", "dry_run": True}
    estimate = admin_client.post(
        reverse("api-engine-generation-runs"), body, content_type="application/json"
    )
    assert estimate.status_code == 200 and estimate.json()["estimate"]["calls"] == 2
    # Nothing was kept: no run to name or follow.
    assert {key: estimate.json()[key] for key in ("run_id", "url", "progress_url")} == {
        "run_id": None,
        "url": None,
        "progress_url": None,
    }
    body["dry_run"] = False
    started = admin_client.post(
        reverse("api-engine-generation-runs"), body, content_type="application/json"
    )
    assert started.status_code == 202
    engine_background_wait(30)
    data = admin_client.get(started.json()["progress_url"]).json()
    assert data["status"] == "done" and data["units_done"] == 2 and data["calls"] == 2
    assert len(stub.requests) == 2
    assert all(c.status == CallStatus.OK for c in EngineRun.objects.get().engine_calls.all())
    # Resuming a done run (nothing left) is refused, and changes nothing: not its cap, not its
    # status (it showed "pending" for a moment and took the cap).
    run = EngineRun.objects.get()
    again = admin_client.post(
        reverse("api-engine-run-resume", args=[run.pk]), {"spending_cap_usd": "20"},
        content_type="application/json",
    )  # fmt: skip
    assert again.status_code == 409
    assert again.json()["detail"] == f"Run {run.pk} is done: nothing left to resume."
    engine_background_wait(30)
    run.refresh_from_db()
    assert run.status == "done" and run.spending_cap_usd is None and len(stub.requests) == 2


@pytest.mark.django_db
def test_the_api_refuses_a_negative_seed_as_the_page_does(researcher_client):
    make_instructions(2)
    make_endpoint("", name="fake")
    body = {"benchmark": "bench", "system": "api-sys", "endpoint": "fake", "sample": 1,
            "seed": -5, "dry_run": True}  # fmt: skip
    refused = researcher_client.post(
        reverse("api-engine-generation-runs"), body, content_type="application/json"
    )
    assert refused.status_code == 400 and list(refused.json()) == ["seed"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "answer"),
    [
        (
            {"benchmark": "nope"},
            {"detail": "Field 'benchmark': no benchmark named 'nope'.", "field": "benchmark"},
        ),
        (
            {"endpoint": "nope"},
            {"detail": "Field 'endpoint': no endpoint named 'nope'.", "field": "endpoint"},
        ),
    ],
)
def test_the_api_names_the_field_of_what_it_does_not_find(researcher_client, change, answer):
    make_instructions(2)
    make_endpoint("", name="fake")
    body = {"benchmark": "bench", "system": "api-sys", "endpoint": "fake", "dry_run": True}
    refused = researcher_client.post(
        reverse("api-engine-generation-runs"), {**body, **change}, content_type="application/json"
    )
    assert refused.status_code == 404 and refused.json() == answer
    assert not System.objects.filter(name="api-sys").exists()


@pytest.mark.django_db
def test_the_api_refuses_a_researchers_dry_run_on_a_paid_endpoint_and_keeps_nothing(
    researcher_client, stub
):
    """An estimate on a paid endpoint is refused as the run is: only an admin may use one. Its
    system is not made either."""
    from django.apps import apps

    make_instructions(2)
    dollar_a_thousand(stub, concurrency=1, name="paid")
    body = {"benchmark": "bench", "system": "api-sys", "endpoint": "paid", "dry_run": True}
    before = {model._meta.label: model.objects.count() for model in apps.get_models()}

    dry = researcher_client.post(
        reverse("api-engine-generation-runs"), body, content_type="application/json"
    )

    assert dry.status_code == 403 and "only an admin" in dry.json()["detail"]
    assert {model._meta.label: model.objects.count() for model in apps.get_models()} == before
    assert stub.requests == []


@pytest.mark.django_db
def test_the_runs_page_links_the_endpoints_for_admins_only(client, researcher, admin_user):
    """Researchers have the page in their menu, and its "Endpoints (admins)" link was a 403."""
    endpoints = reverse("engine:endpoint-list")
    client.force_login(researcher)
    assert endpoints not in client.get(reverse("engine:run-list")).text
    client.force_login(admin_user)
    page = client.get(reverse("engine:run-list")).text
    assert f'Generate responses</a> · <a href="{endpoints}">Endpoints</a></p>' in page
    assert client.get(endpoints).status_code == 200


@pytest.mark.django_db
def test_the_endpoint_form_lists_the_key_variables_it_accepts(admin_client, settings):
    settings.ENGINE_API_KEY_ENVS = ["OPENAI_API_KEY", "GROQ_API_KEY"]
    page = admin_client.get(reverse("engine:endpoint-new")).content.decode()
    help_text = page[page.index('id="id_api_key_env_helptext"') :].split("</div>")[0]
    assert "OPENAI_API_KEY, GROQ_API_KEY" in help_text


@pytest.mark.django_db
def test_annotators_see_no_run(client, annotator_user):
    client.force_login(annotator_user)
    endpoint = make_endpoint("", name="fake")
    run = EngineRun.objects.create(kind="generation", endpoint=endpoint, params={})
    assert client.get(reverse("engine:run-detail", args=[run.pk])).status_code == 403
    assert client.get(reverse("engine:run-progress", args=[run.pk])).status_code == 403
    assert client.get(reverse("api-engine-run", args=[run.pk])).status_code == 404  # the API


@pytest.mark.django_db
def test_an_admin_edits_an_endpoint_on_its_page(admin_client):
    endpoint = make_endpoint("", name="old-name")
    url = reverse("engine:endpoint-edit", args=[endpoint.pk])
    form = {**ENDPOINT_FORM, "name": "new-name", "base_url": "", "concurrency": "3", "stop": ""}
    assert admin_client.post(url, form).status_code == 302
    endpoint.refresh_from_db()
    assert (endpoint.name, endpoint.concurrency, endpoint.stop) == ("new-name", 3, [])
    bad = admin_client.post(url, {**form, "base_url": "ftp://x"})
    assert bad.status_code == 400 and b"not an http(s) address" in bad.content


@pytest.mark.django_db
def test_the_endpoint_form_shows_help_and_the_error_beside_its_field(admin_client):
    page = admin_client.post(
        reverse("engine:endpoint-new"), {**ENDPOINT_FORM, "api_key_env": "DJANGO_SECRET_KEY"}
    ).content.decode()
    assert 'class="site-form"' in page and "Blank: the offline fake model" in page
    # The service's refusal sits in the key variable's row, not above the form.
    row = page[page.index('for="id_api_key_env"') :]
    row = row[: row.index('class="form-row')]
    assert "not an allowed API key variable" in row
    assert page.count("not an allowed API key variable") == 1


@pytest.mark.django_db
def test_stopping_a_run_is_styled_as_destructive_and_confirmed(admin_client):
    run = EngineRun.objects.create(
        kind="generation", endpoint=make_endpoint("", name="fake"), params={}
    )
    page = admin_client.get(reverse("engine:run-detail", args=[run.pk])).content.decode()
    button = page[page.index('id="run-stop"') :].split(">", 1)[0]
    assert 'class="danger"' in button and "data-confirm=" in button


def _field_row(page: str, field: str) -> str:
    """The form row of one field: its label, input, help and errors."""
    row = page[page.index(f'for="id_{field}"') :]
    return row[: row.index('class="form-row') if 'class="form-row' in row else len(row)]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("timeout_seconds", "-1", "Must be more than 0."),
        ("temperature", "2.5", "less than or equal to 2."),
        ("top_p", "1.5", "less than or equal to 1."),
        ("concurrency", "0", "Must be at least 1."),
        ("requests_per_minute", "0", "Must be at least 1."),
        ("base_url", "https://api.openai.com/v1/chat/completions", "should end before"),
    ],
)
def test_the_endpoint_form_refuses_values_out_of_range_beside_the_field(
    admin_client, field, value, message
):
    endpoint = make_endpoint("http://127.0.0.1:9/v1", name="kept")
    url = reverse("engine:endpoint-edit", args=[endpoint.pk])
    for target in (url, reverse("engine:endpoint-new")):
        response = admin_client.post(target, {**ENDPOINT_FORM, field: value})
        page = response.content.decode()
        assert response.status_code == 400 and message in _field_row(page, field)
        assert page.count(message) == 1 and "Constraint" not in page
    assert list(Endpoint.objects.values_list("name", flat=True)) == ["kept"]
    assert str(getattr(Endpoint.objects.get(), field)) != value


@pytest.mark.django_db
def test_the_base_url_refusal_says_where_it_should_end(admin_client):
    form = {**ENDPOINT_FORM, "base_url": "https://api.openai.com/v1/chat/completions"}
    page = admin_client.post(reverse("engine:endpoint-new"), form).content.decode()
    assert (
        "The base URL should end before /chat/completions (e.g. https://api.openai.com/v1)"
        in _field_row(page, "base_url")
    )


@pytest.mark.django_db
def test_a_name_differing_only_in_capitals_is_refused_beside_the_name(admin_client):
    make_endpoint("", name="stub-paid")
    response = admin_client.post(
        reverse("engine:endpoint-new"), {**ENDPOINT_FORM, "name": "STUB-PAID"}
    )
    assert response.status_code == 400
    assert "names that differ only in capitals" in _field_row(response.content.decode(), "name")
    assert list(Endpoint.objects.values_list("name", flat=True)) == ["stub-paid"]


@pytest.mark.django_db
def test_a_name_taken_exactly_says_which_endpoint_has_it_and_links_to_it(admin_client):
    """Django's own check answered "Endpoint with this Name already exists." and the admin was
    left to find that endpoint: the form now says so and links to it, changing nothing."""
    taken = make_endpoint("", name="local-vllm", model="first")
    response = admin_client.post(reverse("engine:endpoint-new"), ENDPOINT_FORM)

    assert response.status_code == 400
    row = _field_row(response.content.decode(), "name")
    page = reverse("engine:endpoint-edit", args=[taken.pk])
    assert "an endpoint named &#x27;local-vllm&#x27; exists already" in row
    assert f'<a href="{page}" id="endpoint-name-taken">Open endpoint local-vllm</a>' in row
    assert "with this Name already exists" not in response.content.decode()
    assert list(Endpoint.objects.values_list("name", "model")) == [("local-vllm", "first")]
    # Renaming another endpoint to it is refused the same way.
    other = make_endpoint("", name="other")
    response = admin_client.post(
        reverse("engine:endpoint-edit", args=[other.pk]), {**ENDPOINT_FORM, "base_url": ""}
    )
    assert response.status_code == 400
    assert "Open endpoint local-vllm" in _field_row(response.content.decode(), "name")
    assert Endpoint.objects.get(pk=other.pk).name == "other"


@pytest.mark.django_db
def test_the_api_creates_an_endpoint_and_refuses_a_taken_name_with_its_field(
    admin_client, researcher
):
    url = reverse("api-engine-endpoints")
    body = {"name": "api-vllm", "model": "llama", "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "", "requests_per_minute": 100, "tokens_per_minute": 10000}  # fmt: skip
    made = admin_client.post(url, body, content_type="application/json")
    assert made.status_code == 201
    endpoint = Endpoint.objects.get(name="api-vllm")
    page = reverse("engine:endpoint-edit", args=[endpoint.pk])
    assert made.json() == {"endpoint_id": endpoint.pk, "name": "api-vllm", "url": page}

    again = admin_client.post(url, {**body, "model": "other"}, content_type="application/json")
    assert again.status_code == 400
    answer = again.json()
    assert (answer["field"], answer["endpoint_id"], answer["url"]) == ("name", endpoint.pk, page)
    assert "an endpoint named 'api-vllm' exists already" in answer["detail"]
    assert page in answer["detail"]
    capitals = admin_client.post(url, {**body, "name": "API-VLLM"}, content_type="application/json")
    assert capitals.status_code == 400 and capitals.json()["endpoint_id"] == endpoint.pk
    assert "differ only in capitals" in capitals.json()["detail"]
    assert list(Endpoint.objects.values_list("name", "model")) == [("api-vllm", "llama")]
    # Another field refused by the service is named too; only admins make endpoints.
    bad = admin_client.post(
        url, {**body, "name": "x", "temperature": 3}, content_type="application/json"
    )
    assert bad.status_code == 400 and bad.json()["field"] == "temperature"
    admin_client.force_login(researcher)
    refused = admin_client.post(url, {**body, "name": "r"}, content_type="application/json")
    assert refused.status_code == 403
    assert Endpoint.objects.count() == 1


@pytest.fixture
def paid_run_of_an_admin(admin_user, stub):
    endpoint = make_endpoint(stub.base_url, name="paid", price_prompt_per_1k="1")
    _, instructions = make_instructions(2)
    params = {"instruction_ids": [i.pk for i in instructions], "template": DEFAULT_TEMPLATE,
              "system_ids": [SystemFactory(name="gen-paid").pk]}  # fmt: skip
    return EngineRun.objects.create(
        kind="generation", endpoint=endpoint, params=params, created_by=admin_user
    )


@pytest.mark.django_db
def test_a_researcher_sees_no_stop_or_run_again_on_a_paid_run(
    client, researcher, admin_user, paid_run_of_an_admin
):
    url = reverse("engine:run-detail", args=[paid_run_of_an_admin.pk])
    client.force_login(researcher)
    page = client.get(url).content.decode()
    assert 'id="run-stop"' not in page and "Run again" not in page
    assert "only an admin may stop this run or run it again" in page
    client.force_login(admin_user)
    page = client.get(url).content.decode()
    assert 'id="run-stop"' in page and "Run again" in page


@pytest.mark.django_db
def test_a_researchers_stop_or_restart_of_a_paid_run_is_refused_on_a_page(
    researcher_client, paid_run_of_an_admin, stub
):
    run = paid_run_of_an_admin
    stop = researcher_client.post(reverse("engine:run-stop", args=[run.pk]))
    assert stop.status_code == 403 and stop["Content-Type"].startswith("text/html")
    page = stop.content.decode()
    assert 'class="site-header"' in page and "only an admin may stop a run on it" in page
    assert reverse("engine:run-detail", args=[run.pk]) in page  # the way back
    again = researcher_client.post(reverse("engine:run-resume", args=[run.pk]))
    assert again.status_code == 403 and 'class="site-header"' in again.content.decode()
    assert "only an admin may start a run on it" in again.content.decode()
    api = researcher_client.post(reverse("api-engine-run-stop", args=[run.pk]))
    assert api.status_code == 403 and "only an admin may stop a run" in api.json()["detail"]
    run.refresh_from_db()
    assert not run.stop_requested and run.status == RunStatus.PENDING and stub.requests == []


@pytest.mark.django_db
def test_progress_says_processed_and_done_apart(researcher_client):
    endpoint = make_endpoint("", name="fake")
    run = EngineRun.objects.create(
        kind="generation", endpoint=endpoint, params={}, status=RunStatus.RUNNING,
        units_total=8, units_done=2, units_failed=4,
    )  # fmt: skip
    run.units.create(key="gen:i1", status="failed", error="model refused: too long")
    for url in (
        reverse("engine:run-progress", args=[run.pk]),
        reverse("api-engine-run", args=[run.pk]),
    ):
        data = researcher_client.get(url).json()
        assert (data["percent_processed"], data["percent_done"], data["percent"]) == (75, 25, 75)
    assert researcher_client.get(reverse("engine:run-progress", args=[run.pk])).json()[
        "errors"
    ] == [{"unit": "gen:i1", "label": "gen:i1", "error": "model refused: too long"}]
    page = researcher_client.get(reverse("engine:run-detail", args=[run.pk])).content.decode()
    assert 'id="run-percent-processed">75<' in page and 'id="run-percent-done">25<' in page


@pytest.mark.django_db
def test_a_failed_unit_is_named_by_its_instruction_and_system(researcher_client):
    from annotate.engine.generation import unit_key
    from annotate.models import System

    _, instructions = make_instructions(2)
    endpoint = make_endpoint("", name="fake")
    system = System.objects.create(name="gen-<b>", generation_endpoint=endpoint)
    key = unit_key(instructions[1].pk, system.pk, "0123456789abcdef")
    run = EngineRun.objects.create(kind="generation", endpoint=endpoint, params={},
                                   status=RunStatus.FAILED, units_total=2, units_failed=1)  # fmt: skip
    run.units.create(key=key, status="failed", error="HTTP 500")

    data = researcher_client.get(reverse("engine:run-progress", args=[run.pk])).json()
    assert data["errors"] == [{"unit": key, "label": "task_2 · gen-<b>", "error": "HTTP 500"}]
    page = researcher_client.get(reverse("engine:run-detail", args=[run.pk])).content.decode()
    errors = page[page.index('id="run-error-list"') :]
    assert "task_2 · gen-&lt;b&gt;</span>: HTTP 500" in errors


@pytest.mark.django_db
def test_run_again_takes_a_higher_cap_after_a_cap_stop_and_refuses_one_below_the_spending(
    client, researcher, admin_user, paid_run_of_an_admin, django_capture_on_commit_callbacks
):
    from decimal import Decimal

    run = paid_run_of_an_admin
    EngineRun.objects.filter(pk=run.pk).update(
        status=RunStatus.CANCELLED, spending_cap_usd=Decimal("1"), cost_usd=Decimal("0.9")
    )
    url = reverse("engine:run-resume", args=[run.pk])
    client.force_login(admin_user)
    page = client.get(reverse("engine:run-detail", args=[run.pk])).content.decode()
    assert 'name="spending_cap_usd"' in page and 'value="1.000000"' in page  # its own cap
    confirm = {"confirm_total": again_total(page)}  # a paid endpoint: its cost, confirmed
    below = client.post(url, {"spending_cap_usd": "0.5"})
    assert below.status_code == 400 and "has spent $0.9 already" in below.content.decode()
    # Named as the page names it, not by the internal field name.
    assert "Spending cap (USD): The run has spent $0.9 already" in below.content.decode()
    assert "spending_cap_usd&#x27;" not in below.content.decode()
    negative = client.post(url, {"spending_cap_usd": "-1"})
    assert negative.status_code == 400 and "cannot be negative" in negative.content.decode()
    client.force_login(researcher)  # a paid endpoint's cap is an admin's, as its start
    assert client.post(url, {"spending_cap_usd": "5"}).status_code == 403
    run.refresh_from_db()
    assert (run.spending_cap_usd, run.status) == (Decimal("1"), RunStatus.CANCELLED)
    client.force_login(admin_user)
    with django_capture_on_commit_callbacks(execute=False) as started:
        raised = client.post(url, {"spending_cap_usd": "5", **confirm})
    assert raised.status_code == 302 and len(started) == 1
    run.refresh_from_db()
    assert (run.spending_cap_usd, run.status) == (Decimal("5"), RunStatus.PENDING)
    # Its start waits for a worker: a second Run again is refused and keeps the cap.
    again = client.post(url, {"spending_cap_usd": "7", **confirm})
    assert again.status_code == 400 and "is starting already" in again.content.decode()
    run.refresh_from_db()
    assert run.spending_cap_usd == Decimal("5")
    engine_run_stop(run=run)  # stopped before it started
    client.post(url, confirm)  # no cap field (an older page): the cap stays as it is
    run.refresh_from_db()
    assert (run.spending_cap_usd, run.status) == (Decimal("5"), RunStatus.PENDING)
    engine_run_stop(run=run)
    client.post(url, {"spending_cap_usd": "", **confirm})  # cleared on the page: no cap
    run.refresh_from_db()
    assert run.spending_cap_usd is None


@pytest.mark.django_db
def test_the_resume_api_sets_the_cap_the_run_goes_on_with(client, admin_user, researcher, stub):
    from decimal import Decimal

    endpoint = make_endpoint(stub.base_url, name="paid")
    run = EngineRun.objects.create(
        kind="generation", endpoint=endpoint, params={}, status=RunStatus.CANCELLED,
        spending_cap_usd=Decimal("1"),
    )  # fmt: skip
    url = reverse("api-engine-run-resume", args=[run.pk])
    client.force_login(researcher)
    assert client.post(url, {"spending_cap_usd": "9"}, "application/json").status_code == 403
    client.force_login(admin_user)
    negative = client.post(url, {"spending_cap_usd": "-2"}, "application/json")
    assert negative.status_code == 400 and "cannot be negative" in str(negative.json())
    run.refresh_from_db()
    assert run.spending_cap_usd == Decimal("1")
    EngineRun.objects.filter(pk=run.pk).update(cost_usd=Decimal("0.5"))
    below = client.post(url, {"spending_cap_usd": "0.1"}, "application/json")
    assert below.status_code == 400 and below.json()["field"] == "spending_cap_usd"
    assert "has spent $0.5 already; a cap of $0.1 is below it" in below.json()["detail"]
    answer = client.post(url, {"spending_cap_usd": "9"}, "application/json")
    assert answer.status_code == 202 and answer.json()["spending_cap_usd"] == "9.000000"
    client.post(url, {}, "application/json")  # left out: unchanged
    run.refresh_from_db()
    assert run.spending_cap_usd == Decimal("9")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("cap", "message"),
    [
        ("lots", "Spending cap (USD): Enter a number."),
        ("1000000", "Spending cap (USD): Ensure that there are no more than 6 digits before"),
    ],
)
def test_run_again_names_the_cap_field_when_it_refuses_a_cap(
    admin_client, paid_run_of_an_admin, cap, message
):
    run = paid_run_of_an_admin
    EngineRun.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED)
    page = admin_client.post(reverse("engine:run-resume", args=[run.pk]), {"spending_cap_usd": cap})
    assert page.status_code == 400 and message in page.content.decode()
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.spending_cap_usd is None


@pytest.mark.django_db
def test_run_again_on_a_done_run_says_nothing_is_left_and_changes_nothing(researcher_client):
    from annotate.engine.services import engine_run_execute

    benchmark, _ = make_instructions(2)
    endpoint = make_endpoint("", name="fake")
    system = generating_system_get_or_create(name="gen-a", endpoint=endpoint)
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
    run = engine_run_execute(run_id=run.pk)
    assert run.status == RunStatus.DONE

    url = reverse("engine:run-resume", args=[run.pk])
    page = researcher_client.post(url, {"spending_cap_usd": "20"}, follow=True)
    # Back on the run's page with a note (not an error page: nothing failed).
    assert page.redirect_chain == [(reverse("engine:run-detail", args=[run.pk]), 302)]
    assert f"Run {run.pk} is done: nothing left to resume." in page.content.decode()
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.spending_cap_usd is None


@pytest.mark.django_db
def test_a_started_run_says_it_prepares_its_units_instead_of_0_of_0(researcher_client):
    from annotate.engine.services import engine_run_execute

    benchmark, _ = make_instructions(2)
    endpoint = make_endpoint("", name="fake")
    system = generating_system_get_or_create(name="gen-a", endpoint=endpoint)
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
    page_url = reverse("engine:run-detail", args=[run.pk])
    for status in (RunStatus.PENDING, RunStatus.RUNNING):  # asked, then taken by a worker
        EngineRun.objects.filter(pk=run.pk).update(status=status, heartbeat=timezone.now())
        for url in (
            reverse("engine:run-progress", args=[run.pk]),
            reverse("api-engine-run", args=[run.pk]),
        ):
            assert researcher_client.get(url).json()["preparing"] is True
        page = researcher_client.get(page_url).content.decode()
        assert '<span id="run-preparing">Preparing units…</span>' in page
        assert '<span id="run-counts" hidden>' in page  # no "0 / 0"
        listed = researcher_client.get(reverse("engine:run-list")).content.decode()
        assert "<td>Preparing units…</td>" in listed and "<td>0 / 0</td>" not in listed

    EngineRun.objects.filter(pk=run.pk).update(status=RunStatus.PENDING)
    engine_run_execute(run_id=run.pk)

    data = researcher_client.get(reverse("engine:run-progress", args=[run.pk])).json()
    assert (data["preparing"], data["units_done"], data["units_total"]) == (False, 2, 2)
    page = researcher_client.get(page_url).content.decode()
    assert '<span id="run-preparing" hidden>' in page and '<span id="run-counts">' in page
    assert 'id="run-done">2</span> / <span id="run-total">2<' in page
    assert "<td>2 / 2</td>" in researcher_client.get(reverse("engine:run-list")).content.decode()


@pytest.mark.django_db
def test_a_generation_run_page_links_where_its_responses_are_read(researcher_client):
    from annotate.engine.services import engine_run_execute

    benchmark, instructions = make_instructions(2)
    endpoint = make_endpoint("", name="fake")
    system = generating_system_get_or_create(name="gen-a", endpoint=endpoint)
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
    engine_run_execute(run_id=run.pk)

    page = researcher_client.get(reverse("engine:run-detail", args=[run.pk])).content.decode()
    benchmark_url = reverse("annotate:benchmark-detail", args=[benchmark.pk])
    assert f'<a href="{benchmark_url}" id="run-results">See the results</a>' in page
    listed = researcher_client.get(benchmark_url).content.decode()
    instruction_url = reverse(
        "annotate:instruction-detail", args=[benchmark.pk, instructions[0].pk]
    )
    assert instruction_url in listed  # each instruction links to its responses
    response = Response.objects.get(system=system, instruction=instructions[0])
    shown = researcher_client.get(instruction_url).content.decode()
    assert "gen-a" in shown and response.text in shown

    benchmark.delete()  # nothing left to read: no link to a missing page
    page = researcher_client.get(reverse("engine:run-detail", args=[run.pk])).content.decode()
    assert 'id="run-results"' not in page


@pytest.mark.django_db
def test_a_new_endpoint_left_without_limits_gets_the_defaults_of_what_it_calls(admin_client):
    """The page filled in 500 requests a minute for every new endpoint: an offline fake made
    there was held to ~8 calls a second (4,800 prompts took ten minutes), while the same fake
    made with endpoint_create had no limit. Blank limits now take the service's defaults; an
    edit shows and keeps the stored ones."""
    page = admin_client.get(reverse("engine:endpoint-new")).content.decode()
    assert 'name="requests_per_minute"' in page and 'name="requests_per_minute" value=' not in page
    assert "no limit for the offline fake" in page
    blank = {**ENDPOINT_FORM, "requests_per_minute": "", "tokens_per_minute": ""}
    admin_client.post(reverse("engine:endpoint-new"), {**blank, "name": "fake", "base_url": ""})
    admin_client.post(reverse("engine:endpoint-new"), {**blank, "name": "api"})
    admin_client.post(
        reverse("engine:endpoint-new"),
        {**blank, "name": "slow-fake", "base_url": "", "requests_per_minute": "60"},
    )
    limits = dict(Endpoint.objects.values_list("name", "requests_per_minute").order_by("name"))
    assert limits == {"api": 500, "fake": 1_000_000, "slow-fake": 60}
    edit = reverse("engine:endpoint-edit", args=[Endpoint.objects.get(name="slow-fake").pk])
    assert 'name="requests_per_minute" value="60"' in admin_client.get(edit).content.decode()
    refused = admin_client.post(edit, {**blank, "name": "slow-fake", "base_url": ""})
    assert refused.status_code == 400  # an existing endpoint's limits are not left blank
    assert Endpoint.objects.get(name="slow-fake").requests_per_minute == 60


def _done_generation_run(instructions: int = 2, name: str = "gen-a", replace: bool = False):
    from annotate.engine.services import engine_run_execute

    benchmark, _ = make_instructions(instructions, benchmark=BenchmarkFactory(name=f"b-{name}"))
    endpoint = make_endpoint("", name=f"fake-{name}")
    system = generating_system_get_or_create(name=name, endpoint=endpoint)
    run = generation_run_create(
        benchmark=benchmark, systems=[system], endpoint=endpoint, replace=replace
    )
    run = engine_run_execute(run_id=run.pk)
    assert run.status == RunStatus.DONE
    return run


@pytest.mark.django_db
def test_a_done_run_with_nothing_left_says_so_instead_of_offering_run_again(researcher_client):
    """Run again on a done run with nothing left only came back with "nothing left": the page
    says so in its place, and offers it again once the run has work (its endpoint edited: the
    responses it replaces are made again)."""
    run = _done_generation_run(replace=True)
    page_url = reverse("engine:run-detail", args=[run.pk])
    progress_url = reverse("engine:run-progress", args=[run.pk])

    page = researcher_client.get(page_url).content.decode()
    assert 'id="run-resume-form" hidden>' in page
    assert '<p id="run-nothing-left">Every unit of this run is done' in page
    assert researcher_client.get(progress_url).json()["work_left"] is False

    Endpoint.objects.filter(pk=run.endpoint_id).update(temperature=0.7)  # new units to make
    page = researcher_client.get(page_url).content.decode()
    assert 'id="run-resume-form">' in page and '<p id="run-nothing-left" hidden>' in page
    assert researcher_client.get(progress_url).json()["work_left"] is True


@pytest.mark.django_db
def test_a_failed_or_running_run_keeps_run_again_and_no_nothing_left_note(researcher_client):
    endpoint = make_endpoint("", name="fake")
    failed = EngineRun.objects.create(
        kind="generation", endpoint=endpoint, params={}, status=RunStatus.FAILED,
        units_total=2, units_failed=1,
    )  # fmt: skip
    page = researcher_client.get(reverse("engine:run-detail", args=[failed.pk])).content.decode()
    assert 'id="run-resume-form">' in page and '<p id="run-nothing-left" hidden>' in page
    progress = researcher_client.get(reverse("engine:run-progress", args=[failed.pk])).json()
    assert progress["work_left"] is True

    EngineRun.objects.filter(pk=failed.pk).update(
        status=RunStatus.RUNNING, heartbeat=timezone.now()
    )
    page = researcher_client.get(reverse("engine:run-detail", args=[failed.pk])).content.decode()
    assert 'id="run-resume-form" hidden>' in page and '<p id="run-nothing-left" hidden>' in page


@pytest.mark.django_db
def test_the_run_list_and_a_run_page_cost_the_same_queries_however_many_runs_and_units(
    researcher_client,
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    first = _done_generation_run(2, name="gen-a")
    counts = {}
    for label in ("one run", "four runs"):
        with CaptureQueriesContext(connection) as listed:
            assert researcher_client.get(reverse("engine:run-list")).status_code == 200
        with CaptureQueriesContext(connection) as shown:
            page = researcher_client.get(reverse("engine:run-detail", args=[first.pk]))
            assert page.status_code == 200
        counts[label] = (len(listed.captured_queries), len(shown.captured_queries))
        if label == "one run":
            for name in ("gen-b", "gen-c", "gen-d"):
                _done_generation_run(6, name=name)
    last = EngineRun.objects.order_by("-pk").first()
    with CaptureQueriesContext(connection) as shown_big:
        researcher_client.get(reverse("engine:run-detail", args=[last.pk]))
    assert counts["one run"] == counts["four runs"]
    assert len(shown_big.captured_queries) == counts["one run"][1]  # 6 units, not 2


@pytest.mark.django_db
def test_the_run_page_shows_a_message_row_only_when_there_is_a_message(admin_client):
    """A run without an error showed "Message" over an empty cell."""
    run = EngineRun.objects.create(
        kind="generation", endpoint=make_endpoint("", name="fake"), status=RunStatus.DONE,
        params={"template": "generation_infobench_v1", "system_ids": [], "instruction_ids": []},
        running_seconds=9.0,
    )  # fmt: skip
    url = reverse("engine:run-detail", args=[run.pk])
    page = admin_client.get(url).content.decode()
    assert '<dt id="run-error-label" hidden>Message</dt><dd id="run-error" hidden></dd>' in page
    assert '<span id="run-elapsed">9.0</span> s running' in page
    EngineRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, error="rate limited")
    page = admin_client.get(url).content.decode()
    assert '<dt id="run-error-label">Message</dt><dd id="run-error">rate limited</dd>' in page


@pytest.mark.django_db
def test_saving_an_endpoint_says_so(admin_client):
    """The form came back as it was sent, with no word that anything was saved."""
    created = admin_client.post(reverse("engine:endpoint-new"), ENDPOINT_FORM, follow=True)
    assert "Endpoint local-vllm created." in created.content.decode()
    endpoint = Endpoint.objects.get(name="local-vllm")
    saved = admin_client.post(
        reverse("engine:endpoint-edit", args=[endpoint.pk]),
        {**ENDPOINT_FORM, "concurrency": "2"},
        follow=True,
    )
    assert "Endpoint local-vllm saved." in saved.content.decode()
    assert "created." not in saved.content.decode()


@pytest.fixture
def price_edited_as_it_starts(monkeypatch):
    """Edit the endpoint's prompt price after the page checked the confirmed total and before
    the run's start (as another admin's edit committed in between would)."""
    reverse("engine:generation-new")  # the URLs first: the views import as the app does
    from annotate.engine import views

    start = views._generation_start

    def edited_then_start(request, data):
        Endpoint.objects.filter(pk=data["endpoint"].pk).update(price_prompt_per_1k="9")
        return start(request, data)

    monkeypatch.setattr(views, "_generation_start", edited_then_start)


@pytest.mark.django_db
def test_a_price_edited_between_the_check_and_the_start_starts_nothing_and_asks_anew(
    admin_client, stub, price_edited_as_it_starts, django_capture_on_commit_callbacks
):
    make_instructions(3)
    paid = make_endpoint(stub.base_url, name="paid", max_tokens=10, price_prompt_per_1k="1")
    form = {"endpoint": paid.pk, "benchmark": Benchmark.objects.get().pk, "system": "g",
            "template": "generation_infobench_v1", "seed": "0"}  # fmt: skip
    url = reverse("engine:generation-new")
    asked = admin_client.post(url, form).context["confirm"]
    with django_capture_on_commit_callbacks(execute=False) as started:
        refused = admin_client.post(url, {**form, asked.field: asked.value})
    assert refused.status_code == 409 and started == []
    assert not EngineRun.objects.exists() and stub.requests == []
    confirm = refused.context["confirm"]
    assert confirm.stale == asked.total and confirm.total > asked.total  # the new price's
    assert f"it is now {usd_at_most(confirm.total)}" in refused.text


@pytest.mark.django_db
def test_an_offline_fake_given_an_address_on_its_page_must_be_paced(admin_client):
    """The form wrote the new address on the endpoint it validated, so the service compared the
    address with itself and a fake's 1,000,000 requests a minute went to a paid API unpaced."""
    from annotate.engine.services import endpoint_create

    fake = endpoint_create(name="fake", model="m")
    assert fake.requests_per_minute == 1_000_000
    form = {**ENDPOINT_FORM, "name": "fake", "requests_per_minute": "1000000",
            "tokens_per_minute": "1000000000"}  # fmt: skip
    response = admin_client.post(reverse("engine:endpoint-edit", args=[fake.pk]), form)
    assert response.status_code == 400
    row = _field_row(response.content.decode(), "requests_per_minute")
    assert "is the offline fake&#x27;s &#x27;no limit&#x27;; an endpoint that calls" in row
    assert Endpoint.objects.get(pk=fake.pk).base_url == ""


@pytest.mark.django_db(transaction=True)
def test_after_run_again_the_page_and_the_api_count_what_its_earlier_start_did(admin_client, stub):
    """After Run again the page read "(0 done before this run)" beside units the run's first
    start had done: a rerun counts as skipped only what other runs did. The units done by its
    earlier starts are now counted apart, on the page and in the API."""
    endpoint = make_endpoint(stub.base_url, concurrency=1)  # a server of one's own: $0
    benchmark, instructions = make_instructions(4)
    system = generating_system_get_or_create(name="gen-again", endpoint=endpoint)
    other = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint,
                                  instruction_ids=[instructions[0].external_id])  # fmt: skip
    engine_run_execute(run_id=other.pk)  # task_1 done by another run
    run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
    stub.fail_next(400, message="bad request")
    run = engine_run_execute(run_id=run.pk)  # task_1 skipped, two done, one failed
    assert (run.status, run.units_skipped, run.units_done, run.units_failed) == (
        RunStatus.FAILED, 1, 3, 1,
    )  # fmt: skip
    page = admin_client.get(reverse("engine:run-detail", args=[run.pk])).content.decode()
    assert (
        '<span id="run-skipped">1</span> done before this run<span id="run-earlier" hidden>' in page
    )

    response = admin_client.post(reverse("engine:run-resume", args=[run.pk]))
    assert response.status_code == 302
    engine_background_wait(30)

    page = admin_client.get(reverse("engine:run-detail", args=[run.pk])).content.decode()
    assert '<dd id="run-status">Done</dd>' in page
    assert (
        '<span id="run-skipped">1</span> done before this run<span id="run-earlier">, '
        '<span id="run-done-earlier">2</span> by its earlier starts</span>)'
    ) in page
    data = admin_client.get(reverse("api-engine-run", args=[run.pk])).json()
    assert (data["status"], data["units_done"], data["units_total"]) == ("done", 4, 4)
    assert (data["units_skipped"], data["units_done_earlier"]) == (1, 2)
    polled = admin_client.get(reverse("engine:run-progress", args=[run.pk])).json()
    assert (polled["units_skipped"], polled["units_done_earlier"]) == (1, 2)
    assert len(stub.requests) == 1 + 3 + 1  # the other run's, the first start's, the rerun's


@pytest.mark.django_db
def test_the_run_pages_show_money_in_dollars_and_cents(researcher_client):
    """The run list, the run page and the JSON it polls show amounts through the money filter
    (annotate/templatetags/money.py), as the rest of the app does: cents, thousands grouped, a
    cost under a cent by its first two significant digits ("$0.00012"); never the six stored
    decimals."""
    from decimal import Decimal

    run = EngineRun.objects.create(
        kind="generation", endpoint=make_endpoint("", name="fake"), params={},
        status=RunStatus.CANCELLED, cost_usd=Decimal("1234.567891"),
        possibly_billed_usd=Decimal("0.000123"), spending_cap_usd=Decimal("2000"),
    )  # fmt: skip
    listed = researcher_client.get(reverse("engine:run-list")).content.decode()
    assert "<td>$1,234.57</td>" in listed and "1234.567891" not in listed
    page = researcher_client.get(reverse("engine:run-detail", args=[run.pk])).content.decode()
    # The offline fake bills nobody: its prices say what the calls would have cost.
    assert (
        '<span id="run-cost">$1,234.57</span> at its prices, billed to nobody (the offline fake: '
        'what these calls would have cost), and <span id="run-possibly-billed">$0.00012</span>'
        " for failed attempts" in page
    )
    assert "possibly billed" not in page and "</span> billed" not in page
    assert "(cap $2,000.00, counting both)" in page
    summary = page[page.index('id="run-progress"') : page.index("</dl>")]
    assert "567891" not in summary and "0.000123" not in summary and "2000.0" not in summary
    polled = researcher_client.get(reverse("engine:run-progress", args=[run.pk])).json()
    assert (polled["cost_shown"], polled["possibly_billed_shown"]) == ("$1,234.57", "$0.00012")
    assert polled["cost_usd"] == "1234.567891"  # the exact amounts stay for scripts
    EngineRun.objects.filter(pk=run.pk).update(cost_usd=0, possibly_billed_usd=0)
    page = researcher_client.get(reverse("engine:run-detail", args=[run.pk])).content.decode()
    assert '<span id="run-cost">$0.00</span>' in page  # nothing spent: "$0.00", not a tiny amount
    # A cap is an upper bound: rounded up, as the estimates, never shown below what it allows.
    EngineRun.objects.filter(pk=run.pk).update(spending_cap_usd=Decimal("0.674"))
    page = researcher_client.get(reverse("engine:run-detail", args=[run.pk])).content.decode()
    assert "(cap $0.68, counting both)" in page


@pytest.mark.parametrize("off_by", [timedelta(days=1), -timedelta(days=1)], ids=["ahead", "behind"])
def test_the_time_so_far_of_a_running_run_is_told_by_the_database_clock(
    researcher_client, monkeypatch, off_by
):
    # The run's start was stamped by the database's clock, 90 s ago; the web host's clock is a
    # day off it. The page and the JSON it polls say 90 s, not a day and 90 s (or none).
    run = EngineRun.objects.create(
        kind="generation", endpoint=make_endpoint("", name="fake"), status=RunStatus.RUNNING,
        running_seconds=10, started_at=timezone.now(),
    )  # fmt: skip
    EngineRun.objects.filter(pk=run.pk).update(
        running_since=Now() - timedelta(seconds=90), heartbeat=Now()
    )
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + off_by)

    polled = researcher_client.get(reverse("engine:run-progress", args=[run.pk])).json()
    assert polled["status"] == RunStatus.RUNNING
    assert 100 <= polled["elapsed_seconds"] < 100 + 3600  # its earlier 10 s, and 90 s now
    page = researcher_client.get(reverse("engine:run-detail", args=[run.pk])).text
    shown = float(re.search(r'<span id="run-elapsed">([\d.]+)</span>', page).group(1))
    assert 100 <= shown < 100 + 3600


def test_a_run_whose_results_were_not_all_recorded_is_shown_failed_everywhere(
    researcher_client, echo_protocol, monkeypatch, stub
):
    # Its calls all ended, but its protocol's on_finish raised: the list, the page and the API
    # say failed, with what went wrong, not done.
    from tests.annotate.engine import echo

    def on_finish_fails(self, run):
        raise LookupError("its judge run was deleted")

    monkeypatch.setattr(echo.EchoProtocol, "on_finish", on_finish_fails)
    run = engine_run_create(
        kind="echo", endpoint=make_endpoint(stub.base_url), params={"items": ["a"]}
    )
    engine_run_execute(run_id=run.pk)

    listing = researcher_client.get(reverse("engine:run-list")).text
    row = re.search(rf'<tr><td><a href="[^"]*/{run.pk}/">.*?</tr>', listing, flags=re.S).group(0)
    assert "<td>Failed</td>" in row and "Done" not in row
    page = researcher_client.get(reverse("engine:run-detail", args=[run.pk])).text
    assert '<dd id="run-status">Failed</dd>' in page
    assert "LookupError: its judge run was deleted" in page
    api = researcher_client.get(reverse("api-engine-run", args=[run.pk])).json()
    assert api["status"] == RunStatus.FAILED and "recording its results" in api["error"]


def test_the_estimate_and_its_start_button_show_the_worst_case_rounded_up():
    """A worst case of $0.674120 read "at most $0.67" and "Start for $0.67" (half up): a cap
    set from it stopped the run. Both round up; the button still sends the exact total."""
    from decimal import Decimal

    from django.template.loader import render_to_string

    from annotate.engine.pages import StartConfirmation
    from annotate.engine.services import RunEstimate

    total = Decimal("0.674120")
    estimate = RunEstimate(
        units=3, units_done_before=0, calls=3, prompt_tokens=37, completion_tokens=150,
        cost_usd=total,
    )  # fmt: skip
    confirm = StartConfirmation(total, "confirm_total", asked=True, stale=Decimal("0.671"))
    context = {"estimate": estimate, "confirm": confirm, "units": "responses to generate"}
    shown = render_to_string("engine/run_estimate.html", context)
    assert "completion tokens: at most $0.68.</p>" in shown
    assert "since you confirmed $0.68: it is now $0.68 (exactly $0.671 then, $0.674120 now)" in (
        shown
    )
    button = render_to_string("engine/run_start_button.html", {"confirm": confirm})
    assert 'value="0.674120" id="start-run">Start for $0.68</button>' in button
