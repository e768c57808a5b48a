"""A study's questions uploaded through the API: the upload page's and import_study's import."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from annotate.engine.services.endpoints import endpoint_create
from annotate.revision.models import Document, Passage, Study, StudyQuestion, StudySystem
from tests.annotate.revision.test_imports import STUDY_LINE

pytestmark = pytest.mark.django_db

URL = "/api/revision/question-imports/"
OTHER_LINE = {"question": "Why?", "documents": [{"title": "C", "text": "One.\n\nTwo."}]}


def api_as(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def jsonl(rows) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def post(user, rows, *, study="kiwi", systems=(), name="questions.jsonl"):
    upload = SimpleUploadedFile(name, jsonl(rows), content_type="application/jsonl")
    fields = {"study": study, "file": upload}
    if systems:
        fields["systems"] = list(systems)
    return api_as(user).post(URL, fields, format="multipart")


def stored(study: Study) -> dict:
    """What an upload wrote to the study, without its ids."""
    return {
        "systems": list(
            study.systems.order_by("position").values_list("name", "endpoint_name", "live")
        ),
        "questions": list(
            StudyQuestion.objects.filter(study=study)
            .order_by("position")
            .values_list("position", "text", "extra")
        ),
        "documents": list(
            Document.objects.filter(question__study=study)
            .order_by("question__position", "position")
            .values_list("question__position", "position", "title", "text", "extra")
        ),
        "passages": list(
            Passage.objects.filter(question__study=study)
            .order_by("pk")
            .values_list("document__title", "position", "text")
        ),
    }


def test_a_researcher_uploads_what_the_upload_page_writes(client, researcher):
    endpoint_create(name="endpoint-b", model="m")  # the offline fake: free, a researcher's to use
    answer = post(researcher, [STUDY_LINE, OTHER_LINE], systems=["a", "b=endpoint-b"])
    assert answer.status_code == 201, answer.content
    study = Study.objects.get(name="kiwi")
    assert answer.json() == {
        "study_id": study.pk,
        "url": reverse("revision-reports:report", args=[study.pk]),
        "report_url": reverse("api-revision-report", args=[study.pk]),
        "file": "questions.jsonl",
        "rows": 2,
        "created": 2,
        "unchanged": 0,
        "message": "Imported 2 questions from questions.jsonl. System a added (endpoint: the "
        "offline fake model). System b added (endpoint: endpoint-b).",
    }
    client.force_login(researcher)
    page = client.post(
        reverse("revision:upload"),
        {
            "study": "by-page",
            "kind": "questions",
            "systems": "a, b=endpoint-b",
            "file": SimpleUploadedFile("questions.jsonl", jsonl([STUDY_LINE, OTHER_LINE])),
        },
    )
    assert page.status_code == 302
    by_page = stored(Study.objects.get(name="by-page"))
    assert stored(study) == by_page and len(by_page["passages"]) == 5
    # The page's comma-separated Systems are taken too; a question stored already is kept.
    again = post(researcher, [STUDY_LINE], systems=["a, b=endpoint-b"])
    assert again.status_code == 201
    assert (again.json()["created"], again.json()["unchanged"]) == (0, 1)
    assert stored(study) == by_page


def test_a_bad_file_is_400_naming_line_and_field_and_writes_nothing(researcher):
    no_documents = {"question": "Empty?", "documents": []}
    untitled = {"question": "Q?", "documents": [{"text": "x"}]}
    answer = post(researcher, [STUDY_LINE, no_documents, untitled], systems=["a"])
    assert answer.status_code == 400
    refusal = answer.json()
    assert refusal["file"] == "questions.jsonl"
    assert [(e["line"], e["field"]) for e in refusal["errors"]] == [
        (2, "documents"),
        (3, "documents[0].title"),
    ]
    assert refusal["detail"].endswith("Nothing was written.")
    assert "- line 2, field 'documents': must be a non-empty list" in refusal["detail"]
    assert not Study.objects.exists() and not StudyQuestion.objects.exists()
    assert not StudySystem.objects.exists() and not Document.objects.exists()


def test_a_system_refused_is_named_by_its_field_and_writes_nothing(researcher):
    unknown = post(researcher, [STUDY_LINE], systems=["a=nope"])
    assert unknown.status_code == 400
    assert unknown.json()["field"] == "systems"
    assert unknown.json()["detail"].startswith("systems: 'a=nope': no engine endpoint named")
    endpoint_create(name="paid", model="m", base_url="https://llm.example.org/v1")
    paid = post(researcher, [STUDY_LINE], systems=["a=paid"])
    assert paid.status_code == 403 and paid.json()["field"] == "systems"
    assert "only an admin" in paid.json()["detail"]
    assert not Study.objects.exists() and not StudyQuestion.objects.exists()


def test_an_admin_gives_a_system_a_paid_endpoint(admin_user):
    endpoint_create(name="paid", model="m", base_url="https://llm.example.org/v1")
    assert post(admin_user, [STUDY_LINE], systems=["a=paid"]).status_code == 201
    assert Study.objects.get(name="kiwi").systems.get().endpoint_name == "paid"


def test_a_missing_study_name_or_file_is_400_naming_it(researcher):
    blank = post(researcher, [STUDY_LINE], study="  ")
    assert blank.status_code == 400 and "study" in blank.json()
    no_file = api_as(researcher).post(URL, {"study": "kiwi"}, format="multipart")
    assert no_file.status_code == 400 and "file" in no_file.json()
    assert not Study.objects.exists()


def test_others_get_404_and_anonymous_401_writing_nothing(annotator_user):
    assert post(annotator_user, [STUDY_LINE]).status_code == 404
    anonymous = post(None, [STUDY_LINE])
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Token"
    assert not Study.objects.exists()


def test_uploads_count_against_the_upload_pages_rate(researcher, worker_rates):
    worker_rates(uploads="1/hour")
    assert post(researcher, [STUDY_LINE], study="s1").status_code == 201
    refused = post(researcher, [OTHER_LINE], study="s2")
    assert refused.status_code == 429 and "Retry-After" in refused
    assert not Study.objects.filter(name="s2").exists()
