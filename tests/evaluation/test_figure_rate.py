"""Figure downloads are limited per user (FIGURE_RATE, scope "figures"): every report's figures,
the pages' images and the APIs on one counter, 429 with Retry-After over it."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from tests.evaluation.revision.sample import sample_study
from tests.evaluation.verbalizer import conftest as verbalizer_fixtures

pytestmark = pytest.mark.django_db

small_set = verbalizer_fixtures.small_set  # the verbalizer's sample set, a fixture here too


def infobench(request):
    return request.getfixturevalue("bench").pk, "reports:figure", "api-report-figure", "leaderboard"


def revision(request):
    study = sample_study(request.getfixturevalue("tmp_path"))
    return study.pk, "revision-reports:figure", "api-revision-figure", "ratings"


def verbalizer(request):
    return (
        request.getfixturevalue("small_set").pk,
        "verbalizer-reports:figure",
        "api-verbalizer-figure",
        "groups",
    )


@pytest.mark.parametrize("report", [infobench, revision, verbalizer])
@pytest.mark.parametrize("refused_by", ["page", "api"])
def test_figures_over_the_users_rate_are_429_on_the_pages_and_the_api_alike(
    request, client, researcher, worker_rates, report, refused_by
):
    owner, page_name, api_name, figure = report(request)
    now = worker_rates(figures="2/hour")
    client.force_login(researcher)
    api = APIClient()
    api.force_authenticate(researcher)
    page_url = reverse(page_name, args=[owner, figure, "svg"])
    api_url = reverse(api_name, args=[owner, figure, "svg"])
    assert client.get(page_url).status_code == 200
    assert api.get(api_url, HTTP_ACCEPT="image/svg+xml").status_code == 200
    refused = client.get(page_url) if refused_by == "page" else api.get(api_url)
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    said = "Too many figure downloads from your account (at most 2/hour). Please wait"
    assert said in (refused.text if refused_by == "page" else refused.json()["detail"])
    now[0] += 3601  # an hour later the user may download again
    assert client.get(page_url).status_code == 200


def test_another_users_figures_are_not_counted_against_yours(
    client, researcher, admin_user, worker_rates, bench
):
    worker_rates(figures="1/hour")
    url = reverse("reports:figure", args=[bench.pk, "leaderboard", "svg"])
    client.force_login(admin_user)
    assert client.get(url).status_code == 200 and client.get(url).status_code == 429
    client.force_login(researcher)
    assert client.get(url).status_code == 200


def test_the_default_rate_leaves_a_report_page_a_hundred_loads_an_hour(client, researcher, bench):
    """The report page with the most figures (InFoBench's) reloaded every minute or so, its
    options changed, never meets FIGURE_RATE's default."""
    from config.settings import base

    count, period = base.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["figures"].split("/")
    client.force_login(researcher)
    page = client.get(reverse("reports:detail", args=[bench.pk])).text
    images = page.count('<img src="/reports/')
    assert images >= 3 and period == "hour" and int(count) >= 100 * images
