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
    assert client.get(reverse("annotate:benchmark-detail", args=[benchmark.id])).status_code == 403


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


def test_the_instruction_page_shows_labels_as_a_matrix(client, researcher):
    from annotate.models import AnnotatorKind, LabelValue

    label = LabelFactory(value=LabelValue.NO)
    other = LabelFactory(
        question=label.question,
        response=label.response,
        value=LabelValue.YES,
        annotator__kind=AnnotatorKind.UNDECIDED,
    )
    client.force_login(researcher)
    instruction = label.question.instruction
    page = client.get(
        reverse("annotate:instruction-detail", args=[instruction.benchmark_id, instruction.id])
    )
    matrix = page.context["matrix"]
    assert matrix.systems == [label.response.system.name]
    assert matrix.annotators == sorted([label.annotator.name, other.annotator.name])
    cells = dict(zip(matrix.annotators, matrix.rows[0][1], strict=True))
    assert cells == {label.annotator.name: "NO", other.annotator.name: "YES"}
    assert 'class="cell label-no"' in page.text and 'class="cell label-yes"' in page.text
    assert "(not decided)" in page.text


def test_benchmark_lists_search_filter_and_paginate(client, researcher):
    from annotate.filters import PAGE_SIZE
    from tests.factories import BenchmarkFactory, InstructionFactory

    benchmark = BenchmarkFactory(name="Needle bench")
    BenchmarkFactory(name="Other")
    for n in range(PAGE_SIZE + 3):
        InstructionFactory(
            benchmark=benchmark, external_id=f"task_{n}", subset="hard" if n % 2 else "easy"
        )
    client.force_login(researcher)
    found = client.get(reverse("annotate:benchmark-list"), {"q": "needle"})
    assert [b.name for b in found.context["benchmarks"]] == ["Needle bench"]

    url = reverse("annotate:benchmark-detail", args=[benchmark.id])
    first = client.get(url)
    assert len(first.context["instructions"]) == PAGE_SIZE
    assert "Page 1 of 2" in first.text
    second = client.get(url, {"page": 2})
    assert len(second.context["instructions"]) == 3
    hard = client.get(url, {"subset": "hard", "q": "task_1"})
    ids = {i.external_id for i in hard.context["instructions"]}
    assert ids and all(i.startswith("task_1") for i in ids)
    assert all(i.subset == "hard" for i in hard.context["instructions"])
    assert "page=2" not in hard.text  # one page of hard task_1x
