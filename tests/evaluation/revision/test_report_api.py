"""The revision report's downloads through the API: the page's bytes, the same access rules."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

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
