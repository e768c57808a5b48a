"""The verbalizer report's downloads through the API: the page's bytes, the same access rules."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

PAGE_URLS = {
    "rows": "verbalizer-reports:download",
    "agreement": "verbalizer-reports:agreement-download",
    "slices": "verbalizer-reports:slices-download",
}


def api_as(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.mark.parametrize("table", ["rows", "agreement", "slices"])
@pytest.mark.parametrize(
    ("fmt", "content_type"),
    [("json", "application/json"), ("csv", "text/csv"), ("latex", "application/x-tex")],
)
def test_a_researcher_downloads_what_the_page_and_the_command_give(
    client, researcher, with_humans, table, fmt, content_type
):
    url = reverse("api-verbalizer-report-download", args=[with_humans.pk, fmt])
    query = {} if table == "rows" else {"table": table}
    answer = api_as(researcher).get(url, query, HTTP_ACCEPT=content_type)
    assert answer.status_code == 200 and answer["Content-Type"] == content_type
    client.force_login(researcher)
    page = client.get(reverse(PAGE_URLS[table], args=[with_humans.pk, fmt]))
    assert answer.content == page.content
    assert answer["Content-Disposition"] == page["Content-Disposition"]
    printed = StringIO()
    call_command(
        "verbalizer_report", "--set", with_humans.name, "--format", fmt, "--table", table,
        stdout=printed,
    )  # fmt: skip
    assert answer.content.decode() == printed.getvalue()


def test_markdown_of_the_rows_is_the_page_download(client, researcher, small_set):
    answer = api_as(researcher).get(
        reverse("api-verbalizer-report-download", args=[small_set.pk, "md"])
    )
    client.force_login(researcher)
    page = client.get(reverse("verbalizer-reports:download", args=[small_set.pk, "md"]))
    assert answer["Content-Type"] == "text/markdown" and answer.content == page.content
    assert b"m1" in answer.content


def test_others_get_404_anonymous_401_and_an_unknown_table_400_naming_it(
    researcher, annotator_user, small_set
):
    url = reverse("api-verbalizer-report-download", args=[small_set.pk, "csv"])
    assert api_as(annotator_user).get(url).status_code == 404
    assert api_as().get(url).status_code == 401
    missing = reverse("api-verbalizer-report-download", args=[small_set.pk + 1, "csv"])
    assert api_as(researcher).get(missing).status_code == 404
    bad_format = reverse("api-verbalizer-report-download", args=[small_set.pk, "xls"])
    assert api_as(researcher).get(bad_format).status_code == 404
    bad_table = api_as(researcher).get(url, {"table": "groups"})
    assert bad_table.status_code == 400 and bad_table.json()["field"] == "table"


def _content(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


@pytest.mark.parametrize("role", ["researcher", "admin_user"])
def test_the_human_answers_csv_is_the_page_download_for_the_reader(
    client, request, with_humans, role
):
    """Crowd workers are named as the reader may see them: the page's file for the same user."""
    user = request.getfixturevalue(role)
    url = reverse("api-verbalizer-human-answers", args=[with_humans.pk])
    answer = api_as(user).get(url, HTTP_ACCEPT="text/csv")
    assert answer.status_code == 200 and answer["Content-Type"] == "text/csv; charset=utf-8"
    client.force_login(user)
    page = client.get(reverse("verbalizer-reports:human-answers", args=[with_humans.pk]))
    assert answer["Content-Disposition"] == page["Content-Disposition"]
    text = _content(answer)
    assert text == _content(page) and len(text.decode().splitlines()) == 7  # header, 6 answers


@pytest.mark.parametrize("figure", ["groups", "flipped"])
@pytest.mark.parametrize(
    ("image_format", "content_type"),
    [("svg", "image/svg+xml"), ("png", "image/png"), ("pdf", "application/pdf")],
)
def test_a_researcher_gets_the_report_pages_figures(
    client, researcher, with_humans, figure, image_format, content_type
):
    url = reverse("api-verbalizer-figure", args=[with_humans.pk, figure, image_format])
    answer = api_as(researcher).get(url, HTTP_ACCEPT=content_type)
    assert answer.status_code == 200 and answer["Content-Type"] == content_type
    client.force_login(researcher)
    page = client.get(
        reverse("verbalizer-reports:figure", args=[with_humans.pk, figure, image_format])
    )
    assert page.status_code == 200 and answer.content == page.content
    policy = answer["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy


def test_human_answers_and_figures_are_404_to_others_and_401_anonymous(
    researcher, annotator_user, small_set
):
    urls = [
        reverse("api-verbalizer-human-answers", args=[small_set.pk]),
        reverse("api-verbalizer-figure", args=[small_set.pk, "groups", "svg"]),
    ]
    for url in urls:
        assert api_as(annotator_user).get(url).status_code == 404
        anonymous = api_as().get(url)
        assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Token"
    missing = [
        reverse("api-verbalizer-human-answers", args=[small_set.pk + 1]),
        reverse("api-verbalizer-figure", args=[small_set.pk + 1, "groups", "svg"]),
        reverse("api-verbalizer-figure", args=[small_set.pk, "table1", "svg"]),
        reverse("api-verbalizer-figure", args=[small_set.pk, "groups", "gif"]),
    ]
    for url in missing:
        wrong = api_as(researcher).get(url)
        assert wrong.status_code == 404 and wrong["Content-Type"] == "application/json"
