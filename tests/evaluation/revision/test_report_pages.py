import pytest
from django.urls import reverse

from tests.evaluation.revision.sample import sample_study

pytestmark = pytest.mark.django_db


def test_researcher_sees_the_report_page_downloads_figures_and_api(client, researcher, tmp_path):
    study = sample_study(tmp_path)
    client.force_login(researcher)
    page = client.get(reverse("revision-reports:report", args=[study.pk])).content.decode()
    assert "Table 2: sessions per system" in page and "1.500" in page
    api = client.get(reverse("api-revision-report", args=[study.pk])).json()
    assert api["table2"][1] == pytest.approx(
        {
            "system": "llama",
            "sessions": 1,
            "turns": 3,
            "edited": 1,
            "turns_per_session": 3.0,
            "information_seeking": 2 / 3,
            "stylistic": 1 / 3,
        }
    )
    csv = client.get(reverse("revision-reports:download", args=[study.pk, "csv"]))
    assert csv["Content-Type"] == "text/csv" and b"# table5" in csv.content
    for fmt, magic in (("svg", b"<svg"), ("png", b"\x89PNG"), ("pdf", b"%PDF")):
        figure = client.get(reverse("revision-reports:figure", args=[study.pk, "ratings", fmt]))
        assert figure.status_code == 200 and magic in figure.content[:200]
    positions = client.get(reverse("revision-reports:figure", args=[study.pk, "positions", "svg"]))
    assert positions.status_code == 200


def test_annotators_cannot_read_reports(client, annotator_user, tmp_path):
    study = sample_study(tmp_path)
    client.force_login(annotator_user)
    assert client.get(reverse("revision-reports:report", args=[study.pk])).status_code == 403
    assert client.get(reverse("api-revision-report", args=[study.pk])).status_code == 404
