"""Imports through the API (POST /api/annotate/imports/): the Import page's import, answered
at once for a small file and queued (202, a status URL) for a large one."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotate.models import Annotator, DirectScore, ImportJob, Label
from tests.factories import benchmark_with_responses

pytestmark = pytest.mark.django_db

URL = "/api/annotate/imports/"


def api_as(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def csv_file(lines: list[str], name: str = "labels.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, ("\n".join(lines) + "\n").encode(), content_type="text/csv")


@pytest.fixture
def bench():
    benchmark, systems = benchmark_with_responses(instructions=2, systems=1, questions=2)
    instructions = list(benchmark.instructions.order_by("position"))
    return benchmark, systems[0], instructions


def label_lines(bench, *rows: tuple[int, int, str]) -> list[str]:
    """A long label CSV: (instruction index, question index, label) per row, annotator ann."""
    _, system, instructions = bench
    return ["instruction_id,system,annotator,question_index,label"] + [
        f"{instructions[i].external_id},{system.name},ann,{q},{value}" for i, q, value in rows
    ]


def post_labels(user, bench, lines, **fields):
    data = {
        "kind": "labels",
        "benchmark_name": bench[0].name,
        "annotator_kind": "expert",
        "upload": csv_file(lines),
        **fields,
    }
    return api_as(user).post(URL, data, format="multipart")


def stored_labels() -> list[tuple]:
    return sorted(
        Label.objects.values_list(
            "response__instruction__external_id",
            "question__position",
            "annotator__name",
            "annotator__kind",
            "value",
        )
    )


def test_a_small_file_is_imported_in_the_request_as_the_command_imports_it(
    researcher, bench, tmp_path
):
    lines = label_lines(bench, (0, 1, "YES"), (0, 2, "NO"), (1, 1, "UNKNOWN"))
    answer = post_labels(researcher, bench, lines)
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "file": "labels.csv",
        "rows": 3,
        "created": 3,
        "unchanged": 0,
        "message": "Imported 3 labels from labels.csv.",
    }
    through_api = stored_labels()
    external = [i.external_id for i in bench[2]]
    assert through_api == [
        (external[0], 1, "ann", "expert", 1),
        (external[0], 2, "ann", "expert", 0),
        (external[1], 1, "ann", "expert", 2),
    ]
    # The command reading the same file stores the same rows: here, nothing more.
    path = tmp_path / "labels.csv"
    path.write_text("\n".join(lines) + "\n")
    call_command("import_labels", str(path), "--benchmark", bench[0].name, "--kind", "expert")
    assert stored_labels() == through_api
    again = post_labels(researcher, bench, lines).json()
    assert (again["created"], again["unchanged"]) == (0, 3)
    assert not ImportJob.objects.exists()  # done in the request: no job to follow


def test_a_bad_file_is_400_naming_each_line_and_field_and_writes_nothing(researcher, bench):
    lines = label_lines(bench, (0, 1, "YES"), (0, 2, "maybe"), (1, 9, "NO"), (1, 1, "NO"))
    lines[3] = lines[3].replace(",9,", ",x,")
    answer = post_labels(researcher, bench, lines)
    assert answer.status_code == 400
    refusal = answer.json()
    assert refusal["file"] == "labels.csv"
    assert [(e["line"], e["field"]) for e in refusal["errors"]] == [
        (3, "label"),
        (4, "question_index"),
    ]
    assert refusal["detail"].startswith("labels.csv: 2 wrong lines:\n- line 3, field 'label'")
    assert refusal["detail"].endswith("Nothing was written.")
    assert "/tmp" not in answer.content.decode()  # the server's temporary path is never told
    assert not Label.objects.exists() and not Annotator.objects.exists()
    assert not ImportJob.objects.exists()


def test_a_form_problem_names_the_input_and_stores_nothing(researcher, bench):
    jsonl = SimpleUploadedFile("labels.jsonl", b'{"id": "x", "eval": [true]}\n')
    answer = post_labels(researcher, bench, [], upload=jsonl)
    assert answer.status_code == 400
    assert answer.json()["field"] == "system_name"
    unknown = post_labels(researcher, bench, [], kind="votes")
    assert unknown.status_code == 400 and "kind" in unknown.json()
    assert not Label.objects.exists() and not ImportJob.objects.exists()


def test_scores_are_imported_as_the_page_imports_them(researcher, bench):
    _, system, instructions = bench
    lines = ["instruction_id,system,annotator,score"] + [
        f"{instruction.external_id},{system.name},ann,{score}"
        for instruction, score in zip(instructions, (4, 2), strict=True)
    ]
    answer = post_labels(researcher, bench, lines, kind="scores", upload=csv_file(lines, "s.csv"))
    assert answer.status_code == 200 and answer.json()["created"] == 2
    assert sorted(DirectScore.objects.values_list("score", flat=True)) == [2, 4]


def test_others_get_404_and_anonymous_401_writing_nothing(annotator_user, bench):
    lines = label_lines(bench, (0, 1, "YES"))
    assert post_labels(annotator_user, bench, lines).status_code == 404
    anonymous = post_labels(None, bench, lines)
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Token"
    assert not Label.objects.exists() and not ImportJob.objects.exists()


def test_a_large_file_is_queued_202_with_a_status_url_that_says_how_it_ended(
    researcher, annotator_user, bench, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.MEDIA_ROOT = tmp_path
    settings.API_IMPORT_INLINE_BYTES = 10
    with django_capture_on_commit_callbacks(execute=True):
        queued = post_labels(researcher, bench, label_lines(bench, (0, 1, "YES"), (1, 2, "NO")))
    assert queued.status_code == 202, queued.content
    job = ImportJob.objects.get()
    assert queued.json()["status_url"] == f"/api/annotate/imports/{job.pk}/"
    assert queued.json()["url"] == reverse("annotate:import-detail", args=[job.pk])
    done = api_as(researcher).get(queued.json()["status_url"]).json()
    assert (done["status"], done["active"], done["rows"], done["created"]) == ("done", False, 2, 2)
    assert done["message"] == "Imported 2 labels from labels.csv."
    assert Label.objects.count() == 2
    assert api_as(annotator_user).get(queued.json()["status_url"]).status_code == 404
    assert api_as().get(queued.json()["status_url"]).status_code == 401

    with django_capture_on_commit_callbacks(execute=True):
        bad = post_labels(researcher, bench, label_lines(bench, (0, 2, "maybe")))
    failed = api_as(researcher).get(bad.json()["status_url"]).json()
    assert failed["status"] == "failed"
    assert "labels.csv, line 2, field 'label'" in failed["message"]
    assert Label.objects.count() == 2


def test_api_uploads_count_against_the_upload_pages_limit(researcher, bench, worker_rates):
    worker_rates(uploads="1/minute")
    lines = label_lines(bench, (0, 1, "YES"))
    assert post_labels(researcher, bench, lines).status_code == 200
    refused = post_labels(researcher, bench, lines)
    assert refused.status_code == 429 and "Retry-After" in refused
