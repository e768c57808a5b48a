"""Gold labels stay gold: a new web account counts nowhere until a researcher decides its kind,
practice answers never become labels, and a project may override an annotator's kind."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from annotate.errors import AnnotatorKindError
from annotate.models import (
    Annotator,
    AnnotatorKind,
    Assignment,
    Benchmark,
    Label,
    Project,
)
from annotate.roles import ANNOTATOR
from annotate.selectors.identities import OPERATOR
from annotate.services.annotators import annotator_kind_set, annotator_project_kind_set
from annotate.services.assignments import annotator_for_user, assignment_claim_next
from annotate.services.demo import DEMO_PROJECTS
from annotate.services.demo_data import DEMO_BENCHMARK
from annotate.services.exports import labels_export
from annotate.services.submissions import assignment_submit, expected_fields
from annotate.verbalizer.demo import STUDY as DEMO_STUDY
from annotate.verbalizer.models import HumanStudy
from evaluation.services.reports import EXPERT_MAJORITY, report_build
from tests.factories import UserFactory, project_with_tasks

pytestmark = pytest.mark.django_db


def _demo():
    call_command("load_demo", allow_production=True, stdout=io.StringIO())
    return Benchmark.objects.get(name=DEMO_BENCHMARK)


def _do_every_task(user, project, value="no"):
    """Claim and submit every task of the project as the user, answering `value` everywhere."""
    annotator = annotator_for_user(user=user)
    done = 0
    while True:
        try:
            assignment = assignment_claim_next(
                annotator=annotator, project=project, now=timezone.now()
            )
        except Exception:  # NoWorkError: nothing left
            return done
        questions = assignment.task.instruction.questions.count()
        fields = expected_fields(
            phase="labels",
            responses=len(assignment.display_order),
            question_positions=list(range(1, questions + 1)),
        )
        assignment_submit(
            assignment_id=assignment.id,
            annotator=annotator,
            answers={name: value for name in fields},
            now=timezone.now(),
        )
        done += 1


def _expert_numbers(report):
    majority = [
        (row["system"], row["subset"], row["drfr"])
        for row in report["leaderboard"]
        if row["source"] == EXPERT_MAJORITY
    ]
    kappa = [
        (row["protocol"], row["subset"], row["annotators"], row["fleiss_kappa"])
        for row in report["agreement"]
        if row["group"] == "expert"
    ]
    return majority, kappa


def test_a_new_account_clicking_through_the_demo_changes_no_expert_number():
    benchmark = _demo()
    before = _expert_numbers(report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10))
    project = Project.objects.get(name=DEMO_PROJECTS[0][0])
    newcomer = UserFactory(username="newcomer", roles=[ANNOTATOR])

    assert _do_every_task(newcomer, project) == benchmark.instructions.count()
    annotator = Annotator.objects.get(user=newcomer)
    assert annotator.kind == AnnotatorKind.UNDECIDED
    assert Label.objects.filter(annotator=annotator).exists()  # kept, just not counted
    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)
    assert _expert_numbers(report) == before
    assert all(row["source"] != annotator.name for row in report["leaderboard"])
    exported = io.StringIO()
    labels_export(benchmark_name=benchmark.name, output=exported, file_format="csv")
    assert "newcomer" not in exported.getvalue()

    # Once the researcher says the newcomer is an expert, the same labels count as expert gold.
    annotator_kind_set(annotator=annotator, kind=AnnotatorKind.EXPERT, now=timezone.now())
    after = _expert_numbers(report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10))
    assert after != before
    assert any(entry[2] == 3 for entry in after[1])  # kappa over three experts now


def test_practice_answers_are_kept_on_the_assignment_but_never_become_labels():
    project = project_with_tasks(instructions=2, systems=2, questions=2)
    project.practice = True
    project.save()
    user = UserFactory(roles=[ANNOTATOR])
    annotator_kind_set(
        annotator=annotator_for_user(user=user), kind=AnnotatorKind.EXPERT, now=timezone.now()
    )

    assert _do_every_task(user, project, value="yes") == 2
    assert not Label.objects.exists()
    submitted = Assignment.objects.filter(annotator__user=user, submitted_at__isnull=False)
    assert submitted.count() == 2
    assert all(set(a.submission["labels"].values()) == {"yes"} for a in submitted)
    report = report_build(scope=OPERATOR, benchmark=project.benchmark, n_resamples=10)
    assert report["leaderboard"] == []


def test_a_project_override_decides_the_kind_of_its_annotators_in_the_benchmark():
    project = project_with_tasks(instructions=1, systems=2, questions=2)
    user = UserFactory(username="worker", roles=[ANNOTATOR])
    _do_every_task(user, project, value="yes")
    annotator = Annotator.objects.get(user=user)
    assert (
        report_build(scope=OPERATOR, benchmark=project.benchmark, n_resamples=10)["leaderboard"]
        == []
    )

    annotator_project_kind_set(project=project, annotator=annotator, kind=AnnotatorKind.CROWD)
    sources = {
        row["source"]
        for row in report_build(scope=OPERATOR, benchmark=project.benchmark)["leaderboard"]
    }
    assert sources == {"crowd-majority"}

    annotator_project_kind_set(project=project, annotator=annotator, kind="")
    assert (
        report_build(scope=OPERATOR, benchmark=project.benchmark, n_resamples=10)["leaderboard"]
        == []
    )


def test_two_projects_on_one_benchmark_cannot_give_one_annotator_two_kinds():
    project = project_with_tasks(instructions=1, systems=2, questions=1)
    other = Project.objects.create(name="second", benchmark=project.benchmark)
    annotator = annotator_for_user(user=UserFactory(roles=[ANNOTATOR]))
    annotator_project_kind_set(project=project, annotator=annotator, kind=AnnotatorKind.CROWD)

    with pytest.raises(AnnotatorKindError, match="already crowd worker in project"):
        annotator_project_kind_set(project=other, annotator=annotator, kind=AnnotatorKind.EXPERT)
    annotator_project_kind_set(project=other, annotator=annotator, kind=AnnotatorKind.CROWD)


def test_an_llm_judge_kind_cannot_be_changed_by_hand():
    judge = Annotator.objects.create(name="gpt-judge", kind=AnnotatorKind.LLM)
    with pytest.raises(AnnotatorKindError, match="LLM judge"):
        annotator_kind_set(annotator=judge, kind=AnnotatorKind.EXPERT, now=timezone.now())


def test_the_demo_researcher_decides_cara_after_she_answers_a_label_word_prompt(client):
    """The demo's logins tell the researcher to decide cara's kind and tell cara her label-word
    tasks are open: answering one must not take that decision away from the researcher."""
    _demo()
    study = HumanStudy.objects.get(name=DEMO_STUDY)
    client.force_login(User.objects.get(username="cara"))
    prompt = study.prompts.order_by("pk").first()
    answered = client.post(
        reverse("verbalizer:work-answer", args=[study.pk]),
        {"prompt": prompt.pk, "key": "1", "seconds": "3"},
    )
    assert answered.status_code == 302
    cara = Annotator.objects.get(user__username="cara")
    assert cara.kind == AnnotatorKind.UNDECIDED

    client.force_login(User.objects.get(username="researcher"))
    decided = client.post(
        reverse("annotators:kind", args=[cara.pk]), {"kind": AnnotatorKind.EXPERT}, follow=True
    )
    cara.refresh_from_db()
    assert cara.kind == AnnotatorKind.EXPERT, [str(m) for m in decided.context["messages"]]
