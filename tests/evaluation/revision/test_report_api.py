"""The revision report's downloads through the API: the page's bytes, the same access rules."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotate.revision.models import Study
from annotate.revision.services.imports import sessions_import
from tests.evaluation.revision.sample import sample_study

pytestmark = pytest.mark.django_db


def api_as(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.mark.parametrize(
    ("fmt", "content_type", "extension"),
    [
        ("json", "application/json", "json"),
        ("csv", "text/csv", "csv"),
        ("latex", "application/x-tex", "tex"),
        ("md", "text/markdown", "md"),
    ],
)
def test_a_researcher_downloads_what_the_page_and_the_command_give(
    client, researcher, tmp_path, fmt, content_type, extension
):
    study = sample_study(tmp_path)
    url = reverse("api-revision-report-download", args=[study.pk, fmt])
    # A script asking for the file's own type gets it (DRF's negotiation answered 406).
    answer = api_as(researcher).get(url, HTTP_ACCEPT=content_type)
    assert answer.status_code == 200 and answer["Content-Type"] == content_type
    assert answer["Content-Disposition"] == (
        f'attachment; filename="revision-{study.pk}.{extension}"'
    )
    client.force_login(researcher)
    page = client.get(reverse("revision-reports:download", args=[study.pk, fmt]))
    assert answer.content == page.content
    printed = StringIO()
    call_command("revision_report", "--study", study.name, "--format", fmt, stdout=printed)
    assert answer.content.decode().strip() == printed.getvalue().strip()


def test_annotators_get_404_anonymous_401_and_an_unknown_study_or_format_404(
    researcher, annotator_user, tmp_path
):
    study = sample_study(tmp_path)
    url = reverse("api-revision-report-download", args=[study.pk, "csv"])
    assert api_as(annotator_user).get(url).status_code == 404
    anonymous = api_as().get(url)
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Token"
    missing = reverse("api-revision-report-download", args=[study.pk + 1, "csv"])
    assert api_as(researcher).get(missing).status_code == 404
    wrong = api_as(researcher).get(reverse("api-revision-report-download", args=[study.pk, "x"]))
    assert wrong.status_code == 404 and wrong["Content-Type"] == "application/json"


@pytest.mark.parametrize("figure", ["ratings", "positions"])
@pytest.mark.parametrize(
    ("image_format", "content_type"),
    [("svg", "image/svg+xml"), ("png", "image/png"), ("pdf", "application/pdf")],
)
def test_a_researcher_gets_the_report_pages_figures(
    client, researcher, tmp_path, figure, image_format, content_type
):
    study = sample_study(tmp_path)
    url = reverse("api-revision-figure", args=[study.pk, figure, image_format])
    answer = api_as(researcher).get(url, HTTP_ACCEPT=content_type)
    assert answer.status_code == 200 and answer["Content-Type"] == content_type
    client.force_login(researcher)
    page = client.get(reverse("revision-reports:figure", args=[study.pk, figure, image_format]))
    assert page.status_code == 200 and answer.content == page.content
    # The SVG carries system names from imported files: opened on its own it runs nothing.
    policy = answer["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy


def test_figures_are_404_to_annotators_401_anonymous_and_404_unknown(
    researcher, annotator_user, tmp_path
):
    study = sample_study(tmp_path)
    url = reverse("api-revision-figure", args=[study.pk, "ratings", "png"])
    assert api_as(annotator_user).get(url).status_code == 404
    anonymous = api_as().get(url)
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Token"
    for args in ([study.pk + 1, "ratings", "png"], [study.pk, "table2", "png"],
                 [study.pk, "ratings", "gif"]):  # fmt: skip
        wrong = api_as(researcher).get(reverse("api-revision-figure", args=args))
        assert wrong.status_code == 404 and wrong["Content-Type"] == "application/json"


def test_no_positions_figure_while_no_turn_has_an_instruction_type(client, researcher, tmp_path):
    """Published KIWI lines need no `instruction_type`: a study of such turns alone has rating
    bars but no type share at any position, and the positions figure was served as empty axes."""
    line = {
        "original_question": "Q?",
        "model_name": "gpt-4",
        "initial_answer": "a0",
        "interaction": [
            {"instruction": "Shorter.", "answer_1": "a1", "answer_2": "", "rating": "good",
             "comment": "ok"},
            {"instruction": "Cite.", "answer_1": "a2", "answer_2": "", "rating": "bad",
             "comment": "no"},
        ],
    }  # fmt: skip
    path = tmp_path / "untyped.jsonl"
    path.write_text(json.dumps(line) + "\n")
    sessions_import(path=str(path), study_name="untyped")
    study = Study.objects.get(name="untyped")
    ratings = api_as(researcher).get(
        reverse("api-revision-figure", args=[study.pk, "ratings", "svg"])
    )
    assert ratings.status_code == 200
    positions = reverse("api-revision-figure", args=[study.pk, "positions", "svg"])
    assert api_as(researcher).get(positions).status_code == 404
    client.force_login(researcher)
    page = client.get(reverse("revision-reports:report", args=[study.pk])).content.decode()
    assert 'id="figure-ratings"' in page and 'id="figure-positions"' not in page
