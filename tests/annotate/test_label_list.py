"""The label list of a benchmark (/benchmarks/<id>/labels/): filters, counting, names, queries.

The benchmark: task_1 (easy, Email, two questions) and task_2 (hard, Poetry, one question), each
answered by alpha and beta. Labels (12):

  expert-1 (imported)          every question of every response: YES, but task_2 beta NO  (6)
  judge (llm, imported)        task_1 alpha Q1 UNKNOWN                                    (1)
  mturk:AWORKER (crowd; an expert in the project), approved:  task_1 alpha Q1, Q2 YES    (2)
  selfhosted:REJECTED (crowd), rejected assignment:            task_1 beta Q1 NO          (1)
  web-user (kind not decided), submitted:                      task_2 alpha Q1 YES        (1)
  selfhosted:BLOCKED (crowd, blocked), submitted:              task_2 beta Q1 YES         (1)

Counted: 6 + 1 + 2 = 9; not counted: rejected, kind not decided, worker blocked.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.models import WorkerBlock
from annotate.models import (
    AnnotatorKind,
    AssignmentStatus,
    LabelValue,
    ProjectAnnotatorKind,
    Subset,
)
from annotate.roles import RESEARCHER
from tests.factories import (
    AnnotatorFactory,
    AssignmentFactory,
    BatchFactory,
    BenchmarkFactory,
    InstructionFactory,
    LabelFactory,
    ProjectFactory,
    QuestionFactory,
    ResponseFactory,
    SystemFactory,
    TaskFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db
YES, NO, UNKNOWN = LabelValue.YES, LabelValue.NO, LabelValue.UNKNOWN


@pytest.fixture
def site():
    benchmark = BenchmarkFactory(name="listed")
    alpha, beta = SystemFactory(name="alpha"), SystemFactory(name="beta")
    i1 = InstructionFactory(
        benchmark=benchmark,
        external_id="task_1",
        position=1,
        subset=Subset.EASY,
        category="Email",
        text="Write an email.",
    )
    i2 = InstructionFactory(
        benchmark=benchmark,
        external_id="task_2",
        position=2,
        subset=Subset.HARD,
        category="Poetry",
        text="Write a poem.",
    )
    q1 = [QuestionFactory(instruction=i1, position=p) for p in (1, 2)]
    q2 = [QuestionFactory(instruction=i2, position=1)]
    r = {
        (i, s.name): ResponseFactory(instruction=inst, system=s)
        for i, inst in ((1, i1), (2, i2))
        for s in (alpha, beta)
    }
    expert = AnnotatorFactory(name="expert-1", kind=AnnotatorKind.EXPERT)
    for (i, system), response in r.items():
        for question in q1 if i == 1 else q2:
            value = NO if (i, system) == (2, "beta") else YES
            LabelFactory(question=question, response=response, annotator=expert, value=value)
    judge = AnnotatorFactory(name="judge", kind=AnnotatorKind.LLM)
    LabelFactory(question=q1[0], response=r[1, "alpha"], annotator=judge, value=UNKNOWN)

    attached = UserFactory(username="attached", roles=[RESEARCHER])
    project = ProjectFactory(benchmark=benchmark)
    project.researchers.add(attached)
    batch = BatchFactory(project=project)
    tasks = {
        1: TaskFactory(batch=batch, instruction=i1),
        2: TaskFactory(batch=batch, instruction=i2),
    }

    def worked(name, kind, status, i, labels, worker_id="", platform=""):
        annotator = AnnotatorFactory(name=name, kind=kind, worker_id=worker_id, platform=platform)
        assignment = AssignmentFactory(
            task=tasks[i], annotator=annotator, status=status, submitted_at=timezone.now()
        )
        for question, system, value in labels:
            LabelFactory(
                question=question,
                response=r[i, system],
                annotator=annotator,
                value=value,
                assignment=assignment,
            )
        return annotator

    approved = AssignmentStatus.APPROVED
    worker = worked(
        "mturk:AWORKER",
        AnnotatorKind.CROWD,
        approved,
        1,
        [(q1[0], "alpha", YES), (q1[1], "alpha", YES)],
        worker_id="AWORKER",
        platform="selfhosted",
    )
    ProjectAnnotatorKind.objects.create(
        project=project, annotator=worker, kind=AnnotatorKind.EXPERT
    )
    worked(
        "selfhosted:REJECTED",
        AnnotatorKind.CROWD,
        AssignmentStatus.REJECTED,
        1,
        [(q1[0], "beta", NO)],
        worker_id="REJECTED",
        platform="selfhosted",
    )
    worked(
        "web-user", AnnotatorKind.UNDECIDED, AssignmentStatus.SUBMITTED, 2, [(q2[0], "alpha", YES)]
    )
    blocked = worked(
        "selfhosted:BLOCKED",
        AnnotatorKind.CROWD,
        AssignmentStatus.SUBMITTED,
        2,
        [(q2[0], "beta", YES)],
        worker_id="BLOCKED",
        platform="selfhosted",
    )
    WorkerBlock.objects.create(annotator=blocked, reason="spam")
    return {"benchmark": benchmark, "worker": worker, "attached": attached, "i1": i1}


def _page(client, site, **query):
    response = client.get(reverse("annotate:label-list", args=[site["benchmark"].pk]), query)
    assert response.status_code == 200
    return response


def _count(client, site, **query) -> int:
    return _page(client, site, **query).context["page"].paginator.count


@pytest.fixture
def as_researcher(client, researcher):
    client.force_login(researcher)
    return client


def test_every_filter_narrows_to_the_hand_counted_labels(as_researcher, site):
    c = as_researcher
    assert _count(c, site) == 12
    # Kinds as this benchmark resolves them: the crowd worker is an expert in its project.
    assert _count(c, site, kind="expert") == 8
    assert _count(c, site, kind="crowd") == 2
    assert _count(c, site, kind="llm") == 1
    assert _count(c, site, kind="undecided") == 1
    assert _count(c, site, value=str(NO)) == 2
    assert _count(c, site, subset="hard") == 4
    assert _count(c, site, domain="poe") == 4
    assert _count(c, site, q="email") == 8
    assert _count(c, site, q="TASK_2") == 4
    assert (
        _count(
            c,
            site,
            system=site["benchmark"]
            .instructions.first()
            .responses.get(system__name="beta")
            .system_id,
        )
        == 5
    )
    assert _count(c, site, annotator=site["worker"].pk) == 2
    assert _count(c, site, instruction=site["i1"].pk) == 8
    assert _count(c, site, subset="easy", kind="expert", value=str(YES)) == 6


def test_counted_or_not_follows_the_one_counting_rule_and_says_why(as_researcher, site):
    assert _count(as_researcher, site, counted="yes") == 9
    rows = _page(as_researcher, site, counted="no").context["rows"]
    assert sorted((row.label.annotator.name, row.why_not) for row in rows) == [
        ("selfhosted:BLOCKED", "worker blocked"),
        ("selfhosted:REJECTED", "rejected"),
        ("web-user", "annotator's kind not decided"),
    ]
    assert not any(row.counted for row in rows)


def test_a_researcher_not_on_the_project_never_sees_a_worker_id(client, researcher, site):
    client.force_login(researcher)
    text = _page(client, site).content.decode()
    for worker_id in ("AWORKER", "REJECTED", "BLOCKED"):
        assert worker_id not in text
    assert f"crowd-worker-{site['worker'].pk}" in text  # in the rows and the annotator choices
    client.force_login(site["attached"])
    assert "mturk:AWORKER" in _page(client, site).content.decode()


def test_pages_keep_the_filters(as_researcher, site, monkeypatch):
    monkeypatch.setattr("annotate.views.PAGE_SIZE", 3)
    page = _page(as_researcher, site, kind="expert", page="2")
    assert [row.label.value for row in page.context["rows"]] == [YES, YES, YES]
    assert page.context["page"].paginator.num_pages == 3  # 8 expert labels, 3 a page
    assert "kind=expert&amp;page=3" in page.content.decode()


def test_annotators_get_the_403_page(client, annotator_user, site):
    client.force_login(annotator_user)
    response = client.get(reverse("annotate:label-list", args=[site["benchmark"].pk]))
    assert response.status_code == 403
    assert "This page is not for your role" in response.content.decode()


def test_the_benchmark_and_instruction_pages_link_to_it(as_researcher, site):
    benchmark = site["benchmark"]
    url = reverse("annotate:label-list", args=[benchmark.pk])
    detail = as_researcher.get(reverse("annotate:benchmark-detail", args=[benchmark.pk]))
    assert f'href="{url}"' in detail.content.decode()
    instruction = as_researcher.get(
        reverse("annotate:instruction-detail", args=[benchmark.pk, site["i1"].pk])
    )
    assert f'href="{url}?instruction={site["i1"].pk}"' in instruction.content.decode()


def test_the_query_count_does_not_grow_with_the_data(
    as_researcher, site, django_assert_max_num_queries
):
    query = {"kind": "expert", "counted": "no", "q": "task"}
    counts = []
    for more in (True, False):
        with CaptureQueriesContext(connection) as queries:
            _page(as_researcher, site, **query)
            _page(as_researcher, site)
        counts.append(len(queries))
        if more:  # more annotators and labels for the second round
            task = site["benchmark"].instructions.first()
            for n in range(5):
                annotator = AnnotatorFactory(name=f"more-{n}", kind=AnnotatorKind.EXPERT)
                for response in task.responses.all():
                    for question in task.questions.all():
                        LabelFactory(question=question, response=response, annotator=annotator)
    assert counts[0] == counts[1], counts
    with django_assert_max_num_queries(13):
        _page(as_researcher, site, **query)
