"""KIWI sessions imported through the API: the upload page's and import_sessions' import."""

import json
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotate.revision.models import RevisionSession, Study, Turn
from annotate.revision.services.exports import sessions_export_jsonl
from tests.annotate.revision.test_imports import SESSION_A, SESSION_B, write_jsonl

pytestmark = pytest.mark.django_db

URL = "/api/revision/session-imports/"


def api_as(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def post(user, rows, *, study="kiwi", name="sessions.jsonl"):
    text = "".join(json.dumps(row) + "\n" for row in rows)
    upload = SimpleUploadedFile(name, text.encode(), content_type="application/jsonl")
    return api_as(user).post(URL, {"study": study, "file": upload}, format="multipart")


def exported(study: Study) -> str:
    output = StringIO()
    sessions_export_jsonl(study=study, output=output)
    return output.getvalue()


def test_a_researcher_imports_sessions_as_the_command_does(researcher, tmp_path):
    answer = post(researcher, [SESSION_A, SESSION_B])
    assert answer.status_code == 200, answer.content
    study = Study.objects.get(name="kiwi")
    assert answer.json() == {
        "study_id": study.pk,
        "file": "sessions.jsonl",
        "rows": 2,
        "created": 2,
        "unchanged": 0,
        "skipped": 0,
        "message": "Imported 2 sessions from sessions.jsonl.",
        "report_url": reverse("api-revision-report", args=[study.pk]),
    }
    call_command(
        "import_sessions", write_jsonl(tmp_path / "s.jsonl", [SESSION_A, SESSION_B]),
        "--study", "by-command",
    )  # fmt: skip
    assert exported(study) == exported(Study.objects.get(name="by-command"))
    again = post(researcher, [SESSION_A, SESSION_B]).json()
    assert (again["created"], again["unchanged"]) == (0, 2)


def test_a_session_repeated_in_the_file_is_counted_as_skipped(researcher):
    """rows was 3 with created 2 and unchanged 0: a script could not tell where the third went."""
    answer = post(researcher, [SESSION_A, SESSION_B, SESSION_A]).json()
    assert (answer["rows"], answer["created"], answer["unchanged"], answer["skipped"]) == (
        3, 2, 0, 1,
    )  # fmt: skip
    assert "(line 3 repeats line 1)" in answer["message"]


def test_a_bad_file_is_400_naming_line_and_field_and_writes_nothing(researcher):
    bad = json.loads(json.dumps(SESSION_A))
    bad["interaction"][1]["rating"] = "great"
    del bad["model_name"]
    worse = {**SESSION_B, "interaction": "none"}
    answer = post(researcher, [SESSION_B, bad, worse])
    assert answer.status_code == 400
    refusal = answer.json()
    assert refusal["file"] == "sessions.jsonl"
    assert [(e["line"], e["field"]) for e in refusal["errors"]] == [
        (2, "model_name"),
        (3, "interaction"),
    ]
    assert refusal["detail"].endswith("Nothing was written.")
    assert not Study.objects.exists() and not RevisionSession.objects.exists()
    assert not Turn.objects.exists()


def test_an_answer_2_over_its_limit_is_400_naming_line_field_and_limit(researcher):
    from annotate.revision.models import EDITED_ANSWER_MAX_CHARS

    bad = json.loads(json.dumps(SESSION_A))
    bad["interaction"][0]["answer_2"] = "x" * (EDITED_ANSWER_MAX_CHARS + 1)
    answer = post(researcher, [SESSION_B, bad])
    assert answer.status_code == 400
    [error] = answer.json()["errors"]
    assert (error["line"], error["field"]) == (2, "interaction[0].answer_2")
    assert f"at most {EDITED_ANSWER_MAX_CHARS:,} are taken" in answer.json()["detail"]
    assert not Study.objects.exists() and not Turn.objects.exists()


def test_a_missing_study_name_or_file_is_400_naming_it(researcher):
    blank = post(researcher, [SESSION_B], study="  ")
    assert blank.status_code == 400 and "study" in blank.json()
    no_file = api_as(researcher).post(URL, {"study": "kiwi"}, format="multipart")
    assert no_file.status_code == 400 and "file" in no_file.json()
    assert not Study.objects.exists()


def test_others_get_404_and_anonymous_401_writing_nothing(annotator_user):
    assert post(annotator_user, [SESSION_B]).status_code == 404
    assert post(None, [SESSION_B]).status_code == 401
    assert not Study.objects.exists()
