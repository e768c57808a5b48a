"""A run on an endpoint whose API key variable is not set in this process is refused before
anything is made (the command, the generation page and API, a restart), naming the endpoint and
the variable; the offline fake and estimates need no key."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotate.engine.errors import EngineRunError
from annotate.engine.models import EngineRun, RunStatus
from annotate.engine.services import (
    engine_run_create,
    engine_run_reopen,
    engine_run_start,
)
from annotate.models import Benchmark
from tests.annotate.engine.conftest import (
    endpoint_with_unset_key,
    make_endpoint,
    make_instructions,
    unset_key_message,
)

pytestmark = pytest.mark.django_db

MESSAGE = unset_key_message("keyed")


@pytest.fixture
def keyed(monkeypatch):
    return endpoint_with_unset_key(monkeypatch, name="keyed")


def _row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


def _generate_arguments(*extra: str) -> list[str]:
    return ["--benchmark", "bench", "--system", "gen", "--endpoint", "keyed", *extra]


def test_the_service_refuses_to_make_the_run_naming_endpoint_and_variable(keyed):
    with pytest.raises(EngineRunError, match=MESSAGE) as refused:
        engine_run_create(kind="generation", endpoint=keyed, params={})
    assert refused.value.field == "endpoint"
    assert not EngineRun.objects.exists()


def test_with_the_key_set_the_run_is_made(keyed, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert engine_run_create(kind="generation", endpoint=keyed, params={}).status == "pending"


def test_the_offline_fake_needs_no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake = make_endpoint("", name="fake", api_key_env="OPENAI_API_KEY")
    assert engine_run_create(kind="generation", endpoint=fake, params={}).pk


def test_a_run_whose_key_went_away_is_not_started_again_and_stays_as_it_was(keyed, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    run = engine_run_create(kind="generation", endpoint=keyed, params={})
    EngineRun.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED, error="Stopped.")
    run.refresh_from_db()
    monkeypatch.delenv("OPENAI_API_KEY")
    for start in (engine_run_reopen, engine_run_start):
        with pytest.raises(EngineRunError, match=MESSAGE):
            start(run=run)
        run.refresh_from_db()
        assert (run.status, run.error) == (RunStatus.CANCELLED, "Stopped.")


def test_the_generate_command_refuses_with_exit_1_and_makes_nothing(keyed, capsys):
    make_instructions(2)
    before = _row_counts()
    with pytest.raises(CommandError, match=MESSAGE):
        call_command("generate", *_generate_arguments())
    assert _row_counts() == before  # no run, and not the system it would have bound either
    assert capsys.readouterr().out == ""


def test_a_dry_run_needs_no_key(keyed, capsys):
    make_instructions(2)
    call_command("generate", *_generate_arguments("--dry-run"))
    assert "2 responses to generate" in capsys.readouterr().out
    assert not EngineRun.objects.exists()


def test_the_generation_page_refuses_beside_the_endpoint(admin_client, keyed):
    make_instructions(2)
    form = {"endpoint": keyed.pk, "benchmark": Benchmark.objects.get().pk, "system": "gen",
            "template": "generation_infobench_v1", "seed": "0", "start": "1"}  # fmt: skip
    before = _row_counts()
    response = admin_client.post(reverse("engine:generation-new"), form)
    assert response.status_code == 400
    assert MESSAGE in " ".join(response.context["form"].errors["endpoint"])
    assert _row_counts() == before


def test_the_generation_api_refuses_with_400_and_the_field(admin_client, keyed):
    make_instructions(2)
    before = _row_counts()
    refused = admin_client.post(
        reverse("api-engine-generation-runs"),
        {"benchmark": "bench", "system": "gen", "endpoint": "keyed"},
        content_type="application/json",
    )
    assert refused.status_code == 400
    assert refused.json()["field"] == "endpoint" and MESSAGE in refused.json()["detail"]
    assert _row_counts() == before
