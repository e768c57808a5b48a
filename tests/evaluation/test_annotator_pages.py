"""The annotators page: researchers see who did what, how well they agree, and decide kinds."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.models import WorkerBlock
from annotate.models import (
    Annotator,
    AnnotatorKind,
    Label,
    LabelValue,
    ProjectAnnotatorKind,
    Question,
    Response,
)
from annotate.revision.models import RerateStatus, Rerating, Study, Turn
from annotate.revision.services.sessions import session_assign
from annotate.roles import ADMIN, ANNOTATOR, RESEARCHER
from annotate.selectors.annotator_kinds import annotator_kinds_effective
from annotate.selectors.identities import crowd_pseudonym
from annotate.services.assignments import annotator_for_user, assignment_claim_next
from annotate.services.projects import InstructionSelection, project_create
from annotate.services.submissions import assignment_submit, expected_fields
from annotate.verbalizer.models import EvaluationSet, HumanAnswer, HumanStudy
from annotate.verbalizer.services.humans import human_answer_submit, human_study_create
from annotate.verbalizer.services.sets import evaluation_set_create
from evaluation.revision.reports import revision_report_build
from evaluation.selectors.annotator_overview import annotators_kind_locked
from tests.annotate.revision.conftest import instruct, make_live_study
from tests.annotate.verbalizer.helpers import fill
from tests.evaluation.revision.sample import sample_study
from tests.factories import UserFactory, project_with_tasks

pytestmark = pytest.mark.django_db


def _submit_all(user, project, value):
    annotator = annotator_for_user(user=user)
    assignment = assignment_claim_next(annotator=annotator, project=project, now=timezone.now())
    positions = list(range(1, assignment.task.instruction.questions.count() + 1))
    fields = expected_fields(
        phase="labels", responses=len(assignment.display_order), question_positions=positions
    )
    assignment_submit(
        assignment_id=assignment.id,
        annotator=annotator,
        answers={name: value for name in fields},
        active_seconds=30,
        now=timezone.now(),
    )
    return annotator


@pytest.fixture
def worked_project(researcher):
    project = project_with_tasks(instructions=1, systems=2, questions=2)
    project.researchers.add(researcher)
    experts = [_submit_all(UserFactory(roles=[ANNOTATOR]), project, "yes") for _ in range(2)]
    for expert in experts:
        expert.kind = AnnotatorKind.EXPERT
        expert.save()
    newcomer = _submit_all(UserFactory(username="newbie", roles=[ANNOTATOR]), project, "no")
    return project, newcomer


def test_the_page_shows_work_and_agreement_of_an_undecided_newcomer(
    client, researcher, worked_project
):
    project, newcomer = worked_project
    client.force_login(researcher)
    page = client.get(reverse("annotators:list"))
    assert page.status_code == 200
    row = next(r for r in page.context["rows"] if r.annotator == newcomer)
    assert row.project == project and row.tasks_done == 1
    assert 0 < row.seconds_per_task <= 30  # active time is capped at the time since the claim
    assert row.agreement_majority == 0.0  # said NO where both experts said YES
    # 4 labels, each paired with the two experts' YES: 0 of 8 pairs equal.
    assert row.agreement_others == 0.0
    expert_row = next(r for r in page.context["rows"] if r.annotator.kind == AnnotatorKind.EXPERT)
    # Each expert: the other expert's majority is YES (4 of 4); pairs: 4 equal of 8.
    assert expert_row.agreement_majority == 1.0 and expert_row.agreement_others == 0.5
    assert "not decided yet" in page.text and "newbie" in page.text


def test_agreement_at_an_exact_half_percent_rounds_up_as_the_reports_do(client, researcher):
    # 1 instruction × 2 systems × 4 questions: 8 labels each. Both experts say YES to all; the
    # newcomer YES to the first only. Newcomer: 1 of 8 equal to the expert majority = 12.5 %,
    # and 2 of 16 pairs with the experts = 12.5 %: shown 13 %, as a report rounds (Python's
    # round and {% widthratio %} round halves to even: 12 %). Each expert: 8 of 8 = 100 %;
    # pairs 8 (the other expert) + 1 (the newcomer) of 16 = 56.25 % → 56 %.
    project = project_with_tasks(instructions=1, systems=2, questions=4)
    project.researchers.add(researcher)
    for _ in range(2):
        expert = _submit_all(UserFactory(roles=[ANNOTATOR]), project, "yes")
        expert.kind = AnnotatorKind.EXPERT
        expert.save()
    newcomer = _submit_all(UserFactory(roles=[ANNOTATOR]), project, "no")
    first = Label.objects.filter(annotator=newcomer).order_by("response_id", "question__position")
    Label.objects.filter(pk=first.first().pk).update(value=LabelValue.YES)
    client.force_login(researcher)
    page = client.get(reverse("annotators:list"))
    row = next(r for r in page.context["rows"] if r.annotator == newcomer)
    assert row.agreement_majority == row.agreement_others == 0.125
    cells = re.findall(r"<td>(\d+)%</td>", page.text)
    assert sorted(cells) == ["100", "100", "13", "13", "56", "56"]


def test_an_llm_judges_labels_do_not_move_agreement_with_the_others(
    client, researcher, worked_project
):
    project, newcomer = worked_project
    judge = Annotator.objects.create(name="judge", kind=AnnotatorKind.LLM)
    for label in Label.objects.filter(annotator=newcomer):
        Label.objects.create(
            question=label.question, response=label.response, annotator=judge, value=LabelValue.YES
        )
    client.force_login(researcher)
    page = client.get(reverse("annotators:list"))
    expert_row = next(r for r in page.context["rows"] if r.annotator.kind == AnnotatorKind.EXPERT)
    # Still the other expert's YES (equal) and the newcomer's NO on each of 4 labels: 4 of 8;
    # counting the judge's YES too it would be 8 of 12.
    assert expert_row.agreement_others == 0.5
    row = next(r for r in page.context["rows"] if r.annotator == newcomer)
    assert row.agreement_others == 0.0
    assert "LLM judges' labels are not counted" in page.text


def test_a_blocked_worker_is_marked_with_the_reason_until_unblocked(
    client, researcher, worked_project
):
    _, newcomer = worked_project
    block = WorkerBlock.objects.create(annotator=newcomer, reason="copied answers")
    client.force_login(researcher)
    page = client.get(reverse("annotators:list"))
    blocked = [r.annotator for r in page.context["rows"] if r.block]
    assert blocked == [newcomer]
    row = page.text.split('data-annotator="newbie"')[1].split("</th>")[0]
    assert ">blocked</strong>" in row and "copied answers" in row
    assert "1 row below belongs to blocked workers" in page.text

    block.active = False  # unblocked
    block.save()
    page = client.get(reverse("annotators:list"))
    assert not any(r.block for r in page.context["rows"])
    assert ">blocked</strong>" not in page.text and "blocked workers" not in page.text


def test_an_admin_unblocks_a_web_account_made_an_expert_from_the_annotators_page(
    client, admin_user, worked_project
):
    """The newcomer was blocked while counted as a crowd worker, then made an expert: no
    publication's review page lists an in-house expert, and the unblock refused them as "no
    crowd worker", so their work counted in no result for good."""
    _, newcomer = worked_project
    newcomer.kind = AnnotatorKind.EXPERT
    newcomer.save()
    WorkerBlock.objects.create(annotator=newcomer, reason="copied answers")
    client.force_login(admin_user)
    page = client.get(reverse("annotators:list"))
    row = page.text.split('data-annotator="newbie"')[1].split("</th>")[0]
    action = reverse("crowd:worker-action", args=[newcomer.pk])
    assert f'action="{action}"' in row and 'value="unblock"' in row

    answer = client.post(action, {"action": "unblock"}, HTTP_REFERER=reverse("annotators:list"))

    assert answer.status_code == 302
    assert not WorkerBlock.objects.get(annotator=newcomer).active
    page = client.get(answer["Location"])
    assert "Worker unblocked" in page.text and ">blocked</strong>" not in page.text


def test_a_researcher_sees_no_unblock_button(client, researcher, worked_project):
    _, newcomer = worked_project
    WorkerBlock.objects.create(annotator=newcomer, reason="copied answers")
    client.force_login(researcher)
    page = client.get(reverse("annotators:list"))
    assert ">blocked</strong>" in page.text and 'value="unblock"' not in page.text
    assert "unblocked on a publication's review page (by an admin)" in page.text


def test_a_researcher_decides_the_kind_and_a_project_override(client, researcher, worked_project):
    project, newcomer = worked_project
    client.force_login(researcher)
    url = reverse("annotators:kind", args=[newcomer.pk])
    answer = client.post(url, {"kind": "crowd", "filter_kind": "undecided"})
    assert answer.status_code == 302 and answer["Location"].endswith("?kind=undecided")
    newcomer.refresh_from_db()
    assert newcomer.kind == AnnotatorKind.CROWD and newcomer.kind_changed_at is not None

    client.post(url, {"kind": "expert", "project": project.pk})
    assert ProjectAnnotatorKind.objects.get(annotator=newcomer, project=project).kind == "expert"
    client.post(url, {"kind": "", "project": project.pk})
    assert not ProjectAnnotatorKind.objects.exists()

    refused = client.post(url, {"kind": "llm"}, follow=True)
    assert "kind must be one of" in refused.text
    newcomer.refresh_from_db()
    assert newcomer.kind == AnnotatorKind.CROWD
    # A project that is no id is refused, not taken for "every project" (the own kind).
    refused = client.post(url, {"kind": "expert", "project": "4x"}, follow=True)
    assert "project: expected a project id, found &#x27;4x&#x27;; nothing was changed." in (
        refused.text
    )
    newcomer.refresh_from_db()
    assert newcomer.kind == AnnotatorKind.CROWD and not ProjectAnnotatorKind.objects.exists()


def test_a_researcher_changes_an_own_kind_only_when_all_the_work_is_in_their_projects(
    client, researcher, admin_user, worked_project
):
    """Kinds decide every report's expert and crowd majorities: a researcher of one project
    could set the own kind of someone who also worked in another project, and so move the
    numbers of a project they are not on."""
    project, newcomer = worked_project
    elsewhere = project_with_tasks(instructions=1, systems=2, questions=2)  # not theirs
    _submit_all(newcomer.user, elsewhere, "yes")
    client.force_login(researcher)
    url = reverse("annotators:kind", args=[newcomer.pk])
    page = client.get(reverse("annotators:list"))
    assert next(r for r in page.context["rows"] if r.annotator == newcomer).kind_locked
    html = page.text.split('data-annotator="newbie"')[1].split("</tr>")[0]
    assert 'id="kind-' not in html and "an admin changes this" in html  # no own-kind form
    assert 'id="pkind-' in html  # the project's form stays
    refused = client.post(url, {"kind": "expert"}, follow=True)
    assert "only an admin can change their kind" in refused.text
    newcomer.refresh_from_db()
    assert newcomer.kind == AnnotatorKind.UNDECIDED
    # The override in the researcher's own project still works.
    client.post(url, {"kind": "expert", "project": project.pk})
    assert ProjectAnnotatorKind.objects.get(annotator=newcomer, project=project).kind == "expert"
    # An expert who worked only in the researcher's project stays theirs to decide.
    expert = Annotator.objects.filter(kind=AnnotatorKind.EXPERT).first()
    assert not next(r for r in page.context["rows"] if r.annotator == expert).kind_locked
    client.post(reverse("annotators:kind", args=[expert.pk]), {"kind": "crowd"})
    expert.refresh_from_db()
    assert expert.kind == AnnotatorKind.CROWD
    # Once on the other project too, the newcomer is theirs to decide as well.
    elsewhere.researchers.add(researcher)
    client.post(url, {"kind": "crowd"})
    newcomer.refresh_from_db()
    assert newcomer.kind == AnnotatorKind.CROWD
    # An admin always may.
    elsewhere.researchers.remove(researcher)
    client.force_login(admin_user)
    client.post(url, {"kind": "expert"})
    newcomer.refresh_from_db()
    assert newcomer.kind == AnnotatorKind.EXPERT
    page = client.get(reverse("annotators:list"))
    assert not any(r.kind_locked for r in page.context["rows"])


def test_a_project_override_on_a_shared_benchmark_is_refused_for_work_outside_the_project(
    client, researcher, worked_project
):
    """A project's kind counts in its benchmark's whole report (annotator_kinds_effective): the
    override in the researcher's own project set the kind of a worker of another researcher's
    project on the same benchmark, and so moved that project's numbers, which the own kind's
    lock refuses. Nothing changes; an admin still may."""
    project, _ = worked_project
    theirs = project_create(
        name="Another researcher's project",
        benchmark=project.benchmark,
        systems=list(project.systems.all()),
        selection=InstructionSelection(),
    )
    outsider = _submit_all(UserFactory(username="outsider", roles=[ANNOTATOR]), theirs, "yes")
    client.force_login(researcher)
    url = reverse("annotators:kind", args=[outsider.pk])
    refused = client.post(url, {"kind": "expert", "project": project.pk}, follow=True)
    assert "only an admin can" in refused.text
    assert not ProjectAnnotatorKind.objects.filter(annotator=outsider).exists()
    kinds = annotator_kinds_effective(benchmark_id=project.benchmark_id)
    assert kinds[outsider.pk] == AnnotatorKind.UNDECIDED
    client.force_login(UserFactory(username="boss", roles=[ADMIN]))
    client.post(url, {"kind": "expert", "project": project.pk})
    assert ProjectAnnotatorKind.objects.get(annotator=outsider).kind == AnnotatorKind.EXPERT


def test_imported_labels_on_another_projects_benchmark_lock_the_own_kind(
    researcher, worked_project
):
    """Imported labels (no assignment) count in their benchmark's reports, whoever's it is."""
    project, _ = worked_project
    elsewhere = project_with_tasks(instructions=1, systems=1, questions=1)
    imported = {}
    for where in (project, elsewhere):
        response = Response.objects.filter(instruction__benchmark=where.benchmark).first()
        question = Question.objects.filter(instruction=response.instruction).first()
        imported[where] = Annotator.objects.create(
            name=f"imported-{where.pk}", kind=AnnotatorKind.EXPERT
        )
        Label.objects.create(
            question=question,
            response=response,
            annotator=imported[where],
            value=LabelValue.YES,
        )
    ids = [a.pk for a in imported.values()]
    assert annotators_kind_locked(user=researcher, annotator_ids=ids) == {imported[elsewhere].pk}
    # A benchmark shared with a project the researcher is not on is not theirs alone.
    shared = project_with_tasks(instructions=1, systems=1, questions=1)
    shared.benchmark = project.benchmark
    shared.save()
    assert annotators_kind_locked(user=researcher, annotator_ids=ids) == set(ids)


def test_annotators_cannot_open_the_page_or_change_kinds(client, worked_project):
    _, newcomer = worked_project
    client.force_login(newcomer.user)
    assert client.get(reverse("annotators:list")).status_code == 403
    assert (
        client.post(reverse("annotators:kind", args=[newcomer.pk]), {"kind": "expert"}).status_code
        == 403
    )
    newcomer.refresh_from_db()
    assert newcomer.kind == AnnotatorKind.UNDECIDED
    assert Label.objects.filter(annotator=newcomer, value=LabelValue.NO).count() == 4
    assert Annotator.objects.count() == 3


def _verbalizer_and_kiwi_work(user, *, name, tmp_path, settings, capture):
    """The user answers two prompts of verbalizer study `name` and does a KIWI session with
    one turn in study "live" (made on first use), and nothing in any InFoBench project."""
    if not EvaluationSet.objects.filter(name="verbal").exists():
        fill("Reviews", [True, False])
        evaluation_set = evaluation_set_create(
            name="verbal", datasets=["Reviews"], items=2, seed=1, mappings="golden"
        ).evaluation_set
        make_live_study(tmp_path, settings)
    evaluation_set = EvaluationSet.objects.get(name="verbal")
    study = HumanStudy.objects.filter(name=name).first() or human_study_create(
        evaluation_set=evaluation_set, name=name
    )
    annotator = annotator_for_user(user=user)
    for prompt in study.prompts.order_by("pk")[:2]:
        human_answer_submit(study=study, prompt_id=prompt.pk, annotator=annotator, key=1, seconds=3)
    with capture(execute=True):
        session = session_assign(
            study=Study.objects.get(name="live"), user=user, now=timezone.now()
        )
    instruct(capture, session, user, "Shorter.")
    return annotator, study


def test_verbalizer_answers_and_kiwi_sessions_are_shown_and_wait_for_a_kind(
    client, researcher, tmp_path, settings, django_capture_on_commit_callbacks
):
    """Someone who only answered verbalizer prompts and steered KIWI sessions was listed as
    "no task in your projects", so a researcher decided their kind without seeing that work,
    and their answers counted nowhere until then."""
    user = UserFactory(username="verbal-only", roles=[ANNOTATOR])
    annotator, study = _verbalizer_and_kiwi_work(
        user,
        name="flip",
        tmp_path=tmp_path,
        settings=settings,
        capture=django_capture_on_commit_callbacks,
    )
    client.force_login(researcher)
    page = client.get(reverse("annotators:list"))
    row = next(r for r in page.context["rows"] if r.annotator == annotator)
    assert row.project is None
    assert [(s.name, s.answers, s.waiting) for s in row.human_studies] == [("flip", 2, 2)]
    assert [(s.name, s.sessions, s.turns) for s in row.revision_studies] == [("live", 1, 1)]
    html = page.text.split('data-annotator="verbal-only"')[1].split("</tr>")[0]
    set_url = reverse("verbalizer:set-detail", args=[study.evaluation_set_id])
    report_url = reverse("revision-reports:report", args=[Study.objects.get().pk])
    assert f'<a href="{set_url}">flip</a>: 2 answers' in html
    assert "(2 wait for a kind decision)" in html
    assert f'<a href="{report_url}">live</a>: 1 session (0 finished), 1 turn' in html
    assert "no task in your projects" not in html
    assert "2 verbalizer answers below wait for a kind decision" in page.text

    # Their answers are in a study someone else made: only an admin decides their kind.
    url = reverse("annotators:kind", args=[annotator.pk])
    refused = client.post(url, {"kind": "expert"}, follow=True)
    assert "only an admin can change their kind" in refused.text
    study.created_by = researcher  # now the researcher's own study
    study.save()
    client.post(url, {"kind": "expert"})
    page = client.get(reverse("annotators:list"))
    row = next(r for r in page.context["rows"] if r.annotator == annotator)
    assert [(s.answers, s.waiting) for s in row.human_studies] == [(2, 0)]  # they count now
    assert "wait for a kind decision" not in page.text


def test_the_annotators_page_runs_a_fixed_number_of_queries(
    client, researcher, worked_project, tmp_path, settings, django_capture_on_commit_callbacks
):
    """However many people answered verbalizer prompts or did KIWI sessions."""
    capture = django_capture_on_commit_callbacks
    first = UserFactory(username="first", roles=[ANNOTATOR])
    _verbalizer_and_kiwi_work(
        first, name="s1", tmp_path=tmp_path, settings=settings, capture=capture
    )
    client.force_login(researcher)
    client.get(reverse("annotators:list"))  # the session and role reads warmed
    with CaptureQueriesContext(connection) as one:
        assert client.get(reverse("annotators:list")).status_code == 200
    for n, name in enumerate(["s2", "s2"]):  # two more people, one more study
        user = UserFactory(username=f"more-{n}", roles=[ANNOTATOR])
        _verbalizer_and_kiwi_work(
            user, name=name, tmp_path=tmp_path, settings=settings, capture=capture
        )
    with CaptureQueriesContext(connection) as three:
        page = client.get(reverse("annotators:list"))
    assert sum(1 for r in page.context["rows"] if r.human_studies and r.revision_studies) == 3
    assert len(three) == len(one), [q["sql"][:120] for q in three.captured_queries]


def test_a_crowd_worker_who_only_answered_a_human_study_is_named_as_the_viewer_may(client):
    """Their answers are shown to every researcher; their platform id only to whom the
    study is theirs (annotate.selectors.identities), the others see the pseudonym."""
    fill("Reviews", [True, False])
    maker = UserFactory(username="maker", roles=[RESEARCHER])
    evaluation_set = evaluation_set_create(
        name="verbal", datasets=["Reviews"], items=2, seed=1, mappings="golden", created_by=maker
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="crowd study")
    worker = Annotator.objects.create(
        name="mturk:AVERBALSECRET",
        kind=AnnotatorKind.CROWD,
        platform="mturk",
        worker_id="AVERBALSECRET",
    )
    prompt = study.prompts.first()
    HumanAnswer.objects.create(study=study, prompt=prompt, annotator=worker, word="positive")
    client.force_login(UserFactory(username="outsider", roles=[RESEARCHER]))
    page = client.get(reverse("annotators:list"))
    assert "AVERBALSECRET" not in page.text
    html = page.text.split(f'data-annotator="{crowd_pseudonym(worker.pk)}"')[1].split("</tr>")[0]
    assert ">crowd study</a>: 1 answer" in html
    client.force_login(maker)
    assert 'data-annotator="mturk:AVERBALSECRET"' in client.get(reverse("annotators:list")).text


def test_a_worker_hidden_by_pseudonym_is_said_to_be_not_by_a_different_rule(client):
    """A worker who answered the maker's study is named by platform id; one who took its HIT
    and never answered (a worker record, no work) by pseudonym: the page says why, so the two
    do not read as two naming rules."""
    fill("Reviews", [True, False])
    maker = UserFactory(username="maker", roles=[RESEARCHER])
    evaluation_set = evaluation_set_create(
        name="verbal", datasets=["Reviews"], items=2, seed=1, mappings="golden", created_by=maker
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="crowd study")
    answered, silent = (
        Annotator.objects.create(
            name=f"fake:{worker_id}", kind=AnnotatorKind.CROWD, platform="fake",
            worker_id=worker_id,
        )
        for worker_id in ("DEMOWORKER1", "DEMOWORKER2")
    )  # fmt: skip
    HumanAnswer.objects.create(
        study=study, prompt=study.prompts.first(), annotator=answered, word="positive"
    )
    client.force_login(maker)
    page = client.get(reverse("annotators:list")).text
    hint = "(platform id hidden: no work of theirs in your projects or studies)"
    shown = page.split('data-annotator="fake:DEMOWORKER1"')[1].split("</th>")[0]
    hidden = page.split(f'data-annotator="{crowd_pseudonym(silent.pk)}"')[1].split("</th>")[0]
    assert hint not in shown and hint in hidden
    assert "DEMOWORKER2" not in page


def _kiwi_only_work(user, *, tmp_path, settings, capture) -> None:
    """The user steers one KIWI session of study "live" (made on first use) one turn: they have
    no Annotator (KIWI sessions never make one)."""
    if not Study.objects.filter(name="live").exists():
        make_live_study(tmp_path, settings)
    with capture(execute=True):
        session = session_assign(
            study=Study.objects.get(name="live"), user=user, now=timezone.now()
        )
    instruct(capture, session, user, "Shorter.")
    assert not Annotator.objects.filter(user=user).exists()


def test_a_user_who_only_steered_kiwi_sessions_is_listed_with_them(
    client, researcher, admin_user, worked_project, tmp_path, settings,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    """They had no Annotator record, so the page did not list them at all."""
    user = UserFactory(username="kiwi-only", roles=[ANNOTATOR])
    _kiwi_only_work(
        user, tmp_path=tmp_path, settings=settings, capture=django_capture_on_commit_callbacks
    )
    people = Annotator.objects.count()
    report_url = reverse("revision-reports:report", args=[Study.objects.get().pk])
    for viewer in (researcher, admin_user):
        client.force_login(viewer)
        page = client.get(reverse("annotators:list"))
        row = next(r for r in page.context["rows"] if r.name == "kiwi-only")
        assert (row.annotator, row.project, row.human_studies) == (None, None, [])
        assert [(s.name, s.sessions, s.finished, s.turns) for s in row.revision_studies] == [
            ("live", 1, 0, 1)
        ]
        html = page.text.split('data-annotator="kiwi-only"')[1].split("</tr>")[0]
        assert f'<a href="{report_url}">live</a>: 1 session (0 finished), 1 turn' in html
        assert "only KIWI sessions or re-ratings, which count once their kind is decided" in html
        # No Annotator yet, but a kind to decide: their sessions count nowhere until then.
        assert f'action="{reverse("annotators:user-kind", args=[user.pk])}"' in html
    assert Annotator.objects.count() == people  # reading the page made nobody

    # Not decided: listed among the undecided, in no project's people and no decided kind's.
    project, _ = worked_project
    page = client.get(reverse("annotators:list"), {"kind": AnnotatorKind.UNDECIDED})
    assert any(r.name == "kiwi-only" for r in page.context["rows"])
    for query in ({"project": project.pk}, {"kind": AnnotatorKind.EXPERT}):
        page = client.get(reverse("annotators:list"), query)
        assert all(r.name != "kiwi-only" for r in page.context["rows"])
        assert 'data-annotator="kiwi-only"' not in page.text


def test_a_researcher_decides_the_kind_of_someone_who_only_steered_kiwi_sessions(
    client, researcher, tmp_path, settings, django_capture_on_commit_callbacks
):
    """They had no Annotator, so no kind could be decided and their sessions never counted:
    the row's form makes the Annotator and sets the kind, and the KIWI report counts them."""
    user = UserFactory(username="kiwi-only", roles=[ANNOTATOR])
    _kiwi_only_work(
        user, tmp_path=tmp_path, settings=settings, capture=django_capture_on_commit_callbacks
    )
    client.force_login(researcher)
    url = reverse("annotators:user-kind", args=[user.pk])
    answer = client.post(url, {"kind": AnnotatorKind.EXPERT, "filter_kind": "undecided"})
    assert (
        answer.status_code == 302 and answer.url == reverse("annotators:list") + "?kind=undecided"
    )
    assert Annotator.objects.get(user=user).kind == AnnotatorKind.EXPERT
    assert Annotator.objects.get(user=user).kind_changed_at is not None
    # Someone without a KIWI session is not decided through this form: 404.
    other = UserFactory(username="no-sessions", roles=[ANNOTATOR])
    url = reverse("annotators:user-kind", args=[other.pk])
    assert client.post(url, {"kind": AnnotatorKind.EXPERT}).status_code == 404
    assert not Annotator.objects.filter(user=other).exists()


def test_a_researcher_decides_the_kind_of_someone_who_only_re_rated_kiwi_turns(
    client, researcher, tmp_path
):
    """A re-rater has no Annotator and steers no session; the report's note sends the
    researcher to this page for their finished re-rating, which listed only users with
    sessions, and the row's form answered 404 for anyone without one: it never counted."""
    study = sample_study(tmp_path)
    rater = UserFactory(username="rerater", roles=[ANNOTATOR])
    Rerating.objects.create(
        turn=Turn.objects.order_by("id").first(),
        annotator=rater,
        rating="good",
        status=RerateStatus.DONE,
        created_at=timezone.now(),
    )
    assert revision_report_build(study=study, n_resamples=10)["waiting_for_kind"]["reratings"] == 1
    client.force_login(researcher)
    page = client.get(reverse("annotators:list"), {"kind": AnnotatorKind.UNDECIDED})
    row = next(r for r in page.context["rows"] if r.name == "rerater")
    assert [(s.name, s.sessions, s.reratings) for s in row.revision_studies] == [(study.name, 0, 1)]
    html = page.text.split('data-annotator="rerater"')[1].split("</tr>")[0]
    assert "0 sessions (0 finished), 0 turns, 1 re-rating" in html

    answer = client.post(
        reverse("annotators:user-kind", args=[rater.pk]), {"kind": AnnotatorKind.EXPERT}
    )
    assert answer.status_code == 302
    assert Annotator.objects.get(user=rater).kind == AnnotatorKind.EXPERT
    report = revision_report_build(study=study, n_resamples=10)
    assert report["waiting_for_kind"]["reratings"] == 0
    assert next(r for r in report["table5"]["rows"] if r["model"] == "Human")["n"] == 1


def test_the_user_kind_form_refuses_someone_with_no_kiwi_work(client, researcher):
    """Only people with KIWI sessions or re-ratings have a row made this way."""
    client.force_login(researcher)
    nobody = UserFactory(username="nobody", roles=[ANNOTATOR])
    answer = client.post(
        reverse("annotators:user-kind", args=[nobody.pk]), {"kind": AnnotatorKind.EXPERT}
    )
    assert answer.status_code == 404
    assert not Annotator.objects.filter(user=nobody).exists()


def test_kiwi_only_users_cost_the_annotators_page_no_query_each(
    client, researcher, worked_project, tmp_path, settings, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    _kiwi_only_work(
        UserFactory(username="kiwi-0", roles=[ANNOTATOR]),
        tmp_path=tmp_path, settings=settings, capture=capture,
    )  # fmt: skip
    client.force_login(researcher)
    client.get(reverse("annotators:list"))  # the session and role reads warmed
    with CaptureQueriesContext(connection) as one:
        assert client.get(reverse("annotators:list")).status_code == 200
    for n in (1, 2):
        _kiwi_only_work(
            UserFactory(username=f"kiwi-{n}", roles=[ANNOTATOR]),
            tmp_path=tmp_path, settings=settings, capture=capture,
        )  # fmt: skip
    with CaptureQueriesContext(connection) as three:
        page = client.get(reverse("annotators:list"))
    assert sum(1 for r in page.context["rows"] if r.annotator is None) == 3
    assert len(three) == len(one), [q["sql"][:120] for q in three.captured_queries]


def test_a_kiwi_only_user_named_like_an_annotator_is_told_apart(
    client, researcher, tmp_path, settings, django_capture_on_commit_callbacks
):
    Annotator.objects.create(name="ana", kind=AnnotatorKind.EXPERT)  # imported labels' "ana"
    user = UserFactory(username="ana", roles=[ANNOTATOR])
    _kiwi_only_work(
        user, tmp_path=tmp_path, settings=settings, capture=django_capture_on_commit_callbacks
    )
    client.force_login(researcher)
    names = [r.name for r in client.get(reverse("annotators:list")).context["rows"]]
    assert names == ["ana", f"ana (user {user.pk})"]
