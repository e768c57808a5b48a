"""The verbalizer's API: items imported as the Verbalizer page and import_classification do,
and a system's run started as the set page starts it, with the engine's rules on who spends."""

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotate.engine.models import EngineRun
from annotate.verbalizer.models import ClassificationDataset, ClassificationItem, SystemRun
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.engine.conftest import make_endpoint
from tests.annotate.verbalizer.helpers import fill

pytestmark = pytest.mark.django_db

ITEMS_URL = "/api/verbalizer/items/"
GOOD_CSV = "text,label,id\nsunny day,good,a\nlost it,bad,b\nfine,good,c\n"


def api_as(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


@pytest.fixture
def mine(db):
    return ClassificationDataset.objects.create(
        name="mine", family="sentiment", positive_name="good", negative_name="bad"
    )


def post_items(user, text: str, *, dataset="mine", fmt="csv", name="items.csv"):
    upload = SimpleUploadedFile(name, text.encode(), content_type="text/csv")
    data = {"dataset": dataset, "format": fmt, "upload": upload}
    return api_as(user).post(ITEMS_URL, data, format="multipart")


def items_of(name: str) -> list[tuple]:
    return list(
        ClassificationItem.objects.filter(dataset__name=name)
        .order_by("position")
        .values_list("position", "external_id", "text", "is_positive")
    )


def test_a_researcher_imports_items_as_the_command_does(researcher, mine, tmp_path):
    answer = post_items(researcher, GOOD_CSV)
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "file": "items.csv",
        "dataset": "mine",
        "created": 3,
        "positive": 2,
        "message": "Imported 3 items into mine from items.csv (2 positive, 1 negative).",
    }
    path = tmp_path / "items.csv"
    path.write_text(GOOD_CSV)
    call_command(
        "import_classification", str(path), "--dataset", "by-command", "--format", "csv",
        "--labels", "good,bad", "--family", "sentiment",
    )  # fmt: skip
    assert items_of("mine") == items_of("by-command") and len(items_of("mine")) == 3


def test_a_bad_file_is_400_naming_line_and_field_and_writes_nothing(researcher, mine):
    answer = post_items(researcher, "text,label\nsunny day,good\nlost it,meh\n,bad\n")
    assert answer.status_code == 400
    refusal = answer.json()
    assert refusal["file"] == "items.csv"
    assert [(e["line"], e["field"]) for e in refusal["errors"]] == [(3, "label"), (4, "text")]
    assert refusal["detail"].endswith("Nothing was written.")
    assert not ClassificationItem.objects.exists()


def test_an_unknown_dataset_or_format_is_400_naming_it(researcher, mine):
    unknown = post_items(researcher, GOOD_CSV, dataset="nope")
    assert unknown.status_code == 400 and unknown.json()["field"] == "dataset"
    assert post_items(researcher, GOOD_CSV, fmt="xls").json().keys() == {"format"}
    assert not ClassificationItem.objects.exists()


def test_items_others_get_404_and_anonymous_401(annotator_user, mine):
    assert post_items(annotator_user, GOOD_CSV).status_code == 404
    assert post_items(None, GOOD_CSV).status_code == 401
    assert not ClassificationItem.objects.exists()


@pytest.fixture
def two_items(db):
    fill("SST-2", [True, False])
    return evaluation_set_create(
        name="s", datasets=["SST-2"], items=2, seed=1, mappings="golden,flipped-golden"
    ).evaluation_set


def runs_url(evaluation_set) -> str:
    return reverse("api-verbalizer-runs", args=[evaluation_set.pk])


def test_a_researcher_starts_a_run_on_the_free_endpoint_as_the_set_page_does(
    client, researcher, two_items, django_capture_on_commit_callbacks
):
    make_endpoint("", name="offline")
    body = {"system": "m", "endpoint": "offline", "modes": ["direct"], "model_size_b": 7}
    with django_capture_on_commit_callbacks(execute=False) as started:
        answer = api_as(researcher).post(runs_url(two_items), body, format="json")
    assert answer.status_code == 202 and len(started) == 1  # starts once it is committed
    system_run = SystemRun.objects.get()
    assert answer.json() == {
        "run_id": system_run.pk,
        "engine_run_id": system_run.engine_run_id,
        "url": reverse("engine:run-detail", args=[system_run.engine_run_id]),
        "progress_url": reverse("api-engine-run", args=[system_run.engine_run_id]),
        "report_url": reverse("api-verbalizer-report", args=[two_items.pk]),
        "estimate": None,
    }
    client.force_login(researcher)
    form = {"run-system": "m", "run-endpoint": "offline", "run-modes": ["direct"]}
    client.post(f"/verbalizer/sets/{two_items.pk}/", {**form, "run-model_size_b": "7"})
    by_api, by_page = SystemRun.objects.order_by("pk")
    fields = ("system_id", "endpoint_name", "modes", "model_size_b", "created_by_id")
    assert [getattr(by_api, f) for f in fields] == [getattr(by_page, f) for f in fields]
    assert (by_api.engine_run.kind, by_api.engine_run.status) == ("verbalizer", "pending")


def test_a_dry_run_answers_the_estimate_and_keeps_nothing(researcher, two_items):
    make_endpoint("", name="offline")
    before = row_counts()
    body = {"system": "m", "endpoint": "offline", "dry_run": True}
    answer = api_as(researcher).post(runs_url(two_items), body, format="json")
    assert answer.status_code == 200 and row_counts() == before
    assert answer.json()["run_id"] is None and answer.json()["estimate"]["units"] == 4


def test_only_admins_spend_money_and_a_missing_key_is_refused_naming_the_endpoint(
    researcher, admin_user, two_items, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    make_endpoint("http://127.0.0.1:9/v1", name="paid", api_key_env="OPENAI_API_KEY")
    before = row_counts()
    body = {"system": "m", "endpoint": "paid"}
    for extra in ({}, {"dry_run": True}):
        refused = api_as(researcher).post(runs_url(two_items), {**body, **extra}, format="json")
        assert refused.status_code == 403 and "only an admin" in refused.json()["detail"]
    no_key = api_as(admin_user).post(runs_url(two_items), body, format="json")
    assert no_key.status_code == 400 and no_key.json()["field"] == "endpoint"
    assert "OPENAI_API_KEY" in no_key.json()["detail"]
    assert row_counts() == before
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    started = api_as(admin_user).post(runs_url(two_items), body, format="json")
    assert started.status_code == 202 and EngineRun.objects.get().endpoint.name == "paid"


def test_a_run_refused_as_asked_names_the_field(researcher, two_items):
    make_endpoint("", name="offline")
    two_modes = api_as(researcher).post(
        runs_url(two_items), {"system": "m", "endpoint": "offline", "modes": ["cot"]}, format="json"
    )
    assert two_modes.status_code == 400 and two_modes.json()["field"] == "modes"
    unknown = api_as(researcher).post(runs_url(two_items), {"system": "m", "endpoint": "x"})
    assert unknown.status_code == 400 and unknown.json()["field"] == "endpoint"
    assert not SystemRun.objects.exists()


def test_runs_others_get_404_and_anonymous_401(annotator_user, researcher, two_items):
    make_endpoint("", name="offline")
    body = {"system": "m", "endpoint": "offline"}
    assert api_as(annotator_user).post(runs_url(two_items), body).status_code == 404
    assert api_as().post(runs_url(two_items), body).status_code == 401
    missing = reverse("api-verbalizer-runs", args=[two_items.pk + 1])
    assert api_as(researcher).post(missing, body).status_code == 404
    assert not SystemRun.objects.exists()


@pytest.mark.parametrize("way", ["page", "api"])
def test_a_start_over_the_users_run_start_limit_is_refused_and_makes_nothing(
    client, researcher, two_items, worker_rates, way
):
    """RUN_START_RATE holds for verbalizer runs: the refused start keeps no run and no system;
    the set page keeps the run form as sent, the API answers 429 with Retry-After."""
    worker_rates(run_starts="1/hour")
    make_endpoint("", name="offline")
    body = {"system": "m", "endpoint": "offline", "modes": ["direct"]}
    assert api_as(researcher).post(runs_url(two_items), body, format="json").status_code == 202
    client.force_login(researcher)
    before = row_counts()

    if way == "page":
        form = {"run-system": "typed-system", "run-endpoint": "offline", "run-modes": ["direct"]}
        refused = client.post(f"/verbalizer/sets/{two_items.pk}/", form)
        assert 'value="typed-system"' in refused.text
    else:
        refused = api_as(researcher).post(
            runs_url(two_items), {**body, "system": "typed-system"}, format="json"
        )
        assert refused.json()["detail"].endswith("and try again. Nothing was started.")

    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert "Too many run starts from your account (at most 1/hour)" in refused.text
    assert row_counts() == before
