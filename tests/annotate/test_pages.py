import pytest
from django.urls import reverse

from tests.factories import LabelFactory

pytestmark = pytest.mark.django_db


def test_researcher_sees_benchmark_and_labels(client, researcher):
    label = LabelFactory()
    benchmark = label.question.instruction.benchmark
    client.force_login(researcher)
    page = client.get(reverse("annotate:benchmark-detail", args=[benchmark.id]))
    assert page.status_code == 200
    assert label.question.instruction.external_id in page.text
    detail = client.get(
        reverse("annotate:instruction-detail", args=[benchmark.id, label.question.instruction.id])
    )
    assert label.annotator.name in detail.text
    assert label.question.text in detail.text


def test_annotator_cannot_browse_benchmarks(client, annotator_user):
    label = LabelFactory()
    client.force_login(annotator_user)
    benchmark = label.question.instruction.benchmark
    assert client.get(reverse("annotate:benchmark-detail", args=[benchmark.id])).status_code == 404


def test_anonymous_is_sent_to_login(client):
    page = client.get(reverse("annotate:benchmark-list"))
    assert page.status_code == 302 and reverse("login") in page["Location"]


def test_response_html_is_shown_as_text(client, researcher):
    label = LabelFactory(response__text="<script>alert(1)</script><img src=x onerror=alert(2)>")
    client.force_login(researcher)
    benchmark = label.question.instruction.benchmark
    page = client.get(
        reverse("annotate:instruction-detail", args=[benchmark.id, label.question.instruction.id])
    )
    assert "<script>alert(1)" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text


def test_home_links_each_role_to_its_work(client, admin_user, researcher, annotator_user):
    client.force_login(annotator_user)
    page = client.get(reverse("home")).text
    assert reverse("work:dashboard") in page and reverse("annotate:import-list") not in page
    client.force_login(researcher)
    page = client.get(reverse("home")).text
    assert reverse("annotate:import-list") in page and reverse("judge:run-list") in page
    assert reverse("crowd:publication-list") not in page
    client.force_login(admin_user)
    assert reverse("crowd:publication-list") in client.get(reverse("home")).text
