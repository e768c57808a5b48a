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
