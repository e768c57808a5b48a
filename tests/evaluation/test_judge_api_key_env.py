"""A judge configuration may read its API key only from an allow-listed environment variable:
naming DJANGO_SECRET_KEY would send the site's secret as a bearer token to any URL."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from annotate.engine.models import Endpoint
from annotate.models import Annotator
from annotate.secrets import ApiKeyEnvError, api_key_env_validate
from evaluation.errors import JudgeConfigError, JudgeRunError
from evaluation.models import JudgeConfig, JudgeRun
from evaluation.revision.judges import judge_run_prepare
from evaluation.services.judge_configs import judge_config_create
from tests.annotate.engine.conftest import ENDPOINT_FORM, endpoint_with_unset_key, unset_key_message
from tests.evaluation.judge_helpers import make_benchmark, make_judge
from tests.evaluation.openai_stub import StubOpenAI
from tests.evaluation.revision.sample import sample_study

pytestmark = pytest.mark.django_db


@override_settings(ENGINE_API_KEY_ENVS=["OPENAI_API_KEY", "AZURE_OPENAI_API_KEY"])
def test_only_allow_listed_names_or_blank_pass_the_validator():
    assert api_key_env_validate(" OPENAI_API_KEY ") == "OPENAI_API_KEY"
    assert api_key_env_validate("") == ""
    for name in ("DJANGO_SECRET_KEY", "AWS_SECRET_ACCESS_KEY", "DATABASE_URL", "openai_api_key"):
        with pytest.raises(ApiKeyEnvError, match="AZURE_OPENAI_API_KEY"):
            api_key_env_validate(name)


def test_the_command_refuses_a_judge_that_names_the_secret_key():
    with pytest.raises(CommandError, match="'DJANGO_SECRET_KEY' is not an allowed API key"):
        call_command("judge_config", "thief", "--api-key-env", "DJANGO_SECRET_KEY")
    assert not JudgeConfig.objects.filter(name="thief").exists()
    assert not Annotator.objects.filter(name="thief").exists()


def test_the_endpoints_page_refuses_a_judge_endpoint_that_names_the_secret_key(client, admin_user):
    # A judge's key variable is its engine endpoint's, edited on the endpoints page.
    client.force_login(admin_user)
    page = client.post(
        "/engine/endpoints/new/",
        {**ENDPOINT_FORM, "name": "thief", "api_key_env": "DJANGO_SECRET_KEY"},
    )
    assert page.status_code == 400
    assert "is not an allowed API key variable" in page.text
    assert not Endpoint.objects.filter(name="thief").exists()


def test_a_stored_judge_naming_the_secret_key_sends_nothing(monkeypatch, settings):
    monkeypatch.setenv("DJANGO_SECRET_KEY", settings.SECRET_KEY)
    benchmark, _, _ = make_benchmark(questions_per_instruction=(1,))
    with StubOpenAI() as stub:
        judge = make_judge(stub.base_url)
        Endpoint.objects.filter(pk=judge.endpoint_id).update(api_key_env="DJANGO_SECRET_KEY")
        with pytest.raises(CommandError, match="not an allowed API key variable"):
            call_command("judge", config=judge.name, benchmark=benchmark.name)
    assert stub.authorizations == []


def test_the_service_names_the_setting_in_its_refusal():
    with pytest.raises(JudgeConfigError, match="ENGINE_API_KEY_ENVS"):
        make_judge("http://127.0.0.1:9/v1", api_key_env="SECRET_THING")


# --- A key variable that is not set: refused before any run is made ----------------------------

MISSING = unset_key_message("keyed-judge")


@pytest.fixture
def keyed_endpoint(monkeypatch):
    return endpoint_with_unset_key(monkeypatch, name="keyed-judge")


@pytest.fixture
def keyed_judge(keyed_endpoint):
    """A judge on an address (nothing listens there) whose key variable is not set."""
    return judge_config_create(name="keyed-judge", endpoint=keyed_endpoint)


def _row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


def test_the_judge_command_refuses_before_making_a_run(keyed_judge, capsys):
    benchmark, _, _ = make_benchmark(questions_per_instruction=(1,))
    before = _row_counts()
    with pytest.raises(CommandError, match=MISSING):
        call_command("judge", config=keyed_judge.name, benchmark=benchmark.name)
    assert "Created judge run" not in capsys.readouterr().out
    assert _row_counts() == before  # no judge run, no engine run, no conversation


def test_the_judge_commands_dry_run_needs_no_key(keyed_judge, capsys):
    benchmark, _, _ = make_benchmark(questions_per_instruction=(1,))
    call_command("judge", config=keyed_judge.name, benchmark=benchmark.name, dry_run=True)
    assert "1 conversations to judge" in capsys.readouterr().out
    assert not JudgeRun.objects.exists()


def test_the_judge_page_refuses_on_the_form(client, admin_user, keyed_judge):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    client.force_login(admin_user)
    form = {"config": keyed_judge.pk, "benchmark": benchmark.pk,
            "systems": [s.pk for s in systems], "seed": 0}  # fmt: skip
    before = _row_counts()
    page = client.post(reverse("judge:run-new"), form)
    assert page.status_code == 400
    assert MISSING in " ".join(page.context["form"].non_field_errors())
    assert _row_counts() == before


def test_the_judge_api_refuses_with_400_naming_the_judge_field(client, admin_user, keyed_judge):
    benchmark, systems, _ = make_benchmark(questions_per_instruction=(1,))
    client.force_login(admin_user)
    body = {"judge": keyed_judge.name, "benchmark": benchmark.name,
            "systems": [s.name for s in systems]}  # fmt: skip
    before = _row_counts()
    refused = client.post(reverse("api-judge-runs"), body, content_type="application/json")
    assert refused.status_code == 400
    assert refused.json()["field"] == "judge" and MISSING in refused.json()["detail"]
    assert _row_counts() == before


def test_the_kiwi_judge_refuses_before_making_a_run(keyed_endpoint, tmp_path):
    study = sample_study(tmp_path)
    before = _row_counts()
    with pytest.raises(JudgeRunError, match=MISSING) as refused:
        judge_run_prepare(
            study=study, task="rating-judge", endpoint=keyed_endpoint, user=None, mode="zero-shot",
            now=timezone.now(),
        )  # fmt: skip
    assert refused.value.field == "endpoint"
    assert _row_counts() == before
