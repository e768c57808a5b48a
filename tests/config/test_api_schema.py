"""The OpenAPI schema (drf-spectacular, /api/docs/): generated without a warning, each
operation described by its own components."""

import pytest
import yaml
from django.core.management import call_command


@pytest.fixture(scope="module")
def schema(tmp_path_factory):
    path = tmp_path_factory.mktemp("schema") / "schema.yaml"
    # --fail-on-warn raises on any warning or error, two serializers named alike included
    # ("Encountered 2 components with identical names"), which make one operation show
    # another's fields.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(path))
    return yaml.safe_load(path.read_text())


def _schema_of(schema, ref_holder: dict) -> dict:
    ref = ref_holder["content"]["application/json"]["schema"]["$ref"]
    return schema["components"]["schemas"][ref.rsplit("/", 1)[1]]


@pytest.mark.parametrize(
    ("path", "status", "field"),
    [
        ("/api/engine/generation-runs/", "200", "progress_url"),
        ("/api/reports/{benchmark_id}/", "200", "leaderboard"),
        ("/api/revision/studies/{study_id}/judge-runs/", "202", "report_url"),
        ("/api/revision/studies/{study_id}/reratings/", "201", "reratings"),
    ],
)
def test_each_operation_answers_with_its_own_fields(schema, path, status, field):
    operation = schema["paths"][path].get("post") or schema["paths"][path]["get"]
    assert field in _schema_of(schema, operation["responses"][status])["properties"]


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/engine/generation-runs/", "system"),
        ("/api/revision/studies/{study_id}/judge-runs/", "task"),
        ("/api/revision/studies/{study_id}/reratings/", "annotators"),
    ],
)
def test_each_operation_takes_its_own_fields(schema, path, field):
    body = schema["paths"][path]["post"]["requestBody"]
    assert field in _schema_of(schema, body)["properties"]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/annotate/projects/", "201"),
        ("/api/annotate/projects/{project_id}/batches/", "201"),
        ("/api/annotate/projects/{project_id}/claim/", "201"),  # a task claimed now
        ("/api/annotate/projects/{project_id}/claim/", "200"),  # the live claim held already
        ("/api/engine/runs/{engine_run_id}/stop/", "409"),  # the run has ended
        ("/api/engine/runs/{engine_run_id}/resume/", "409"),  # done, nothing left
        ("/api/engine/generation-runs/", "409"),  # nothing left to generate
        ("/api/crowd/batches/{batch_id}/publish/", "201"),
        ("/api/crowd/publications/{publication_id}/sync/", "202"),
        ("/api/engine/generation-runs/", "202"),  # a run started
        ("/api/engine/generation-runs/", "200"),  # a dry run's estimate
    ],
)
def test_each_operation_documents_the_status_it_answers(schema, path, status):
    """A script written from the docs checks for the status the view really answers."""
    assert status in schema["paths"][path]["post"]["responses"]


def test_the_api_token_scheme_is_documented(schema):
    scheme = schema["components"]["securitySchemes"]["knoxApiToken"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "Authorization")
    assert "Token" in scheme["description"]
    progress = schema["paths"]["/api/judge/runs/{run_id}/progress/"]["get"]
    assert {"knoxApiToken": []} in progress["security"]
