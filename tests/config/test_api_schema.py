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
        ("/api/annotate/projects/{project_id}/progress/", "200", "assignments_unconfirmed"),
        ("/api/annotate/projects/{project_id}/progress/", "200", "assignments_blocked"),
        ("/api/revision/studies/{study_id}/judge-runs/", "202", "report_url"),
        ("/api/revision/studies/{study_id}/reratings/", "201", "reratings"),
        ("/api/crowd/publications/{publication_id}/resume/", "202", "status"),
        ("/api/crowd/workers/{annotator_id}/notify/", "200", "not_sent"),
        ("/api/crowd/workers/{annotator_id}/unblock/", "200", None),
    ],
)
def test_each_operation_answers_with_its_own_fields(schema, path, status, field):
    operation = schema["paths"][path].get("post") or schema["paths"][path]["get"]
    if field is None:  # no component of another operation's: not the notify's fields
        assert "$ref" not in operation["responses"][status]["content"]["application/json"]["schema"]
        return
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
        ("/api/crowd/publications/{publication_id}/resume/", "202"),
        ("/api/crowd/publications/{publication_id}/resume/", "400"),  # total not the quote
        ("/api/crowd/publications/{publication_id}/resume/", "409"),  # its publish runs
        ("/api/crowd/workers/{annotator_id}/notify/", "409"),  # a web account: nothing sent
        ("/api/engine/generation-runs/", "202"),  # a run started
        ("/api/engine/generation-runs/", "200"),  # a dry run's estimate
        ("/api/annotate/imports/", "200"),  # a small file, imported in the request
        ("/api/annotate/imports/", "202"),  # a large one, queued
        ("/api/annotate/imports/", "400"),  # each wrong line, nothing written
        ("/api/revision/session-imports/", "400"),
        ("/api/revision/question-imports/", "201"),
        ("/api/revision/question-imports/", "400"),
        ("/api/revision/question-imports/", "403"),  # a paid endpoint, not an admin
        ("/api/verbalizer/items/", "400"),
        ("/api/verbalizer/sets/{set_id}/runs/", "202"),
        ("/api/verbalizer/sets/{set_id}/runs/", "200"),
        ("/api/verbalizer/sets/{set_id}/runs/", "403"),
        # over the user's run start limit (RUN_START_RATE)
        ("/api/engine/generation-runs/", "429"),
        ("/api/engine/runs/{engine_run_id}/resume/", "429"),
        ("/api/judge/runs/", "429"),
        ("/api/revision/studies/{study_id}/judge-runs/", "429"),
        ("/api/verbalizer/sets/{set_id}/runs/", "429"),
    ],
)
def test_each_operation_documents_the_status_it_answers(schema, path, status):
    """A script written from the docs checks for the status the view really answers."""
    assert status in schema["paths"][path]["post"]["responses"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/reports/{benchmark_id}/figures/{name}.{image_format}",
        "/api/revision/studies/{study_id}/figures/{figure}.{image_format}",
        "/api/verbalizer/sets/{set_id}/figures/{figure_name}.{image_format}",
    ],
)
def test_each_figure_download_documents_its_rate_limit(schema, path):
    assert "FIGURE_RATE" in schema["paths"][path]["get"]["responses"]["429"]["description"]


def test_the_api_token_scheme_is_documented(schema):
    scheme = schema["components"]["securitySchemes"]["knoxApiToken"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "Authorization")
    assert "Token" in scheme["description"]
    progress = schema["paths"]["/api/judge/runs/{run_id}/progress/"]["get"]
    assert {"knoxApiToken": []} in progress["security"]


@pytest.mark.parametrize(
    ("path", "content_types"),
    [
        (
            "/api/revision/studies/{study_id}/report.{fmt}",
            {"application/json", "text/csv", "application/x-tex", "text/markdown"},
        ),
        (
            "/api/verbalizer/sets/{set_id}/report.{fmt}",
            {"application/json", "text/csv", "application/x-tex", "text/markdown"},
        ),
    ],
)
def test_report_downloads_document_each_file_type_and_the_formats(schema, path, content_types):
    operation = schema["paths"][path]["get"]
    assert set(operation["responses"]["200"]["content"]) == content_types
    fmt = next(p for p in operation["parameters"] if p["name"] == "fmt")
    assert set(fmt["schema"]["enum"]) == {"json", "csv", "latex", "md"}


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/annotate/imports/", "upload"),
        ("/api/revision/session-imports/", "file"),
        ("/api/revision/question-imports/", "file"),
        ("/api/verbalizer/items/", "upload"),
    ],
)
def test_imports_take_a_multipart_file_and_document_each_wrong_line(schema, path, field):
    operation = schema["paths"][path]["post"]
    body = operation["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"]
    properties = schema["components"]["schemas"][body.rsplit("/", 1)[1]]["properties"]
    assert properties[field]["format"] == "binary"
    refusal = _schema_of(schema, operation["responses"]["400"])["properties"]
    assert {"detail", "file", "errors"} <= set(refusal)


@pytest.mark.parametrize(
    ("path", "figure_parameter", "figures"),
    [
        ("/api/revision/studies/{study_id}/figures/{figure}.{image_format}", "figure",
         {"ratings", "positions"}),
        ("/api/verbalizer/sets/{set_id}/figures/{figure_name}.{image_format}", "figure_name",
         {"groups", "mappings", "flipped", "flipped_by_dataset"}),
    ],
)  # fmt: skip
def test_figure_downloads_document_each_image_type_and_the_figures(
    schema, path, figure_parameter, figures
):
    operation = schema["paths"][path]["get"]
    content = operation["responses"]["200"]["content"]
    assert set(content) == {"image/svg+xml", "image/png", "application/pdf"}
    assert content["image/png"]["schema"]["format"] == "binary"
    parameters = {p["name"]: p["schema"].get("enum") for p in operation["parameters"]}
    assert set(parameters[figure_parameter]) == figures
    assert set(parameters["image_format"]) == {"svg", "png", "pdf"}
    assert "404" in operation["responses"]


def test_the_human_answers_download_documents_its_csv(schema):
    operation = schema["paths"]["/api/verbalizer/sets/{set_id}/human-answers.csv"]["get"]
    assert set(operation["responses"]["200"]["content"]) == {"text/csv"}
    assert "404" in operation["responses"]


def test_block_takes_a_reason_and_notify_a_subject_and_message(schema):
    """Block and unblock listed notify's subject and message, which they ignore."""
    block = schema["paths"]["/api/crowd/workers/{annotator_id}/block/"]["post"]["requestBody"]
    notify = schema["paths"]["/api/crowd/workers/{annotator_id}/notify/"]["post"]["requestBody"]
    assert set(_schema_of(schema, block)["properties"]) == {"reason"}
    assert set(_schema_of(schema, notify)["properties"]) == {"subject", "message"}
