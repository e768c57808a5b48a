import html
import json
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.models import Assignment, AssignmentStatus, Label, Project, ProjectMode, System
from annotate.roles import ANNOTATOR
from annotate.services.assignments import annotator_for_user, assignment_claim_next
from annotate.services.projects import DEFAULT_GUIDELINES, DIRECT_SCORE_GUIDELINES
from tests.factories import UserFactory, benchmark_with_responses, project_with_tasks

pytestmark = pytest.mark.django_db


def claim_for(user, project):
    return assignment_claim_next(
        annotator=annotator_for_user(user=user), project=project, now=timezone.now()
    )


def test_dashboard_lists_projects_with_work_and_start_next_opens_a_task(client, annotator_user):
    project = project_with_tasks(instructions=2)
    client.force_login(annotator_user)
    page = client.get(reverse("work:dashboard"))
    assert page.status_code == 200 and project.name in page.text and "Start next task" in page.text
    started = client.post(reverse("work:start-next", args=[project.id]))
    assignment = Assignment.objects.get(annotator__user=annotator_user)
    assert started.status_code == 302
    assert started["Location"] == reverse("work:assignment", args=[assignment.id])


def test_task_page_shows_systems_by_letter_only(client, annotator_user):
    project = project_with_tasks(instructions=1, systems=3, questions=2)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    page = client.get(reverse("work:assignment", args=[assignment.id]))
    assert page.status_code == 200
    for letter in "ABC":
        assert f"System {letter}" in page.text
    outside_responses = re.sub(
        r'<pre class="text response-text">.*?</pre>', "", page.text, flags=re.S
    )
    for system in System.objects.all():
        assert system.name not in outside_responses
        assert f'value="{system.id}"' not in page.text
    names = set(re.findall(r'<input[^>]* name="([^"]+)"', page.text))
    assert names == {"csrfmiddlewaretoken", "active_seconds"} | {
        f"r{n}_q{m}" for n in range(1, 4) for m in range(1, 3)
    }
    assert "script-src 'self'" in page["Content-Security-Policy"]
    assert '<script src="/static/annotate/task.js"' in page.text


def test_response_text_in_order_of_the_assignment(client, annotator_user):
    project = project_with_tasks(instructions=1, systems=4)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    text = client.get(reverse("work:assignment", args=[assignment.id])).text
    names = dict(System.objects.values_list("id", "name"))
    positions = [
        text.index(f"{names[system_id]} answers") for system_id in assignment.display_order
    ]
    assert positions == sorted(positions)


def test_response_html_is_escaped(client, annotator_user):
    project = project_with_tasks(instructions=1, systems=1)
    project.batches.get().tasks.get().instruction.responses.update(
        text="<script>alert(1)</script>\n<img src=x onerror=alert(2)>"
    )
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    text = client.get(reverse("work:assignment", args=[assignment.id])).text
    assert "<script>alert(1)" not in text and "<img src=x" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_someone_elses_task_is_404_for_page_and_submit(client, annotator_user):
    project = project_with_tasks(instructions=1)
    other = UserFactory(username="other", roles=[ANNOTATOR])
    assignment = claim_for(other, project)
    client.force_login(annotator_user)
    assert client.get(reverse("work:assignment", args=[assignment.id])).status_code == 404
    posted = client.post(reverse("work:assignment", args=[assignment.id]), {"r1_q1": "yes"})
    assert posted.status_code == 404
    returned = client.post(reverse("work:assignment-return", args=[assignment.id]))
    assert returned.status_code == 404


def test_submit_from_the_page_writes_labels_and_goes_back_to_the_dashboard(client, annotator_user):
    project = project_with_tasks(instructions=1, systems=2, questions=2)
    project.continue_to_next = False
    project.save()
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    answers = {f"r{n}_q{m}": "no" for n in (1, 2) for m in (1, 2)}
    posted = client.post(
        reverse("work:assignment", args=[assignment.id]), {**answers, "active_seconds": "12"}
    )
    assert posted.status_code == 302 and posted["Location"] == reverse("work:dashboard")
    assert Label.objects.filter(annotator__user=annotator_user).count() == 4
    repeat = client.post(reverse("work:assignment", args=[assignment.id]), answers)
    assert repeat.status_code == 302
    changed = client.post(
        reverse("work:assignment", args=[assignment.id]), {**answers, "r1_q1": "yes"}
    )
    assert changed.status_code == 409


def test_incomplete_submit_is_400_and_lists_what_is_missing(client, annotator_user):
    project = project_with_tasks(instructions=1, systems=2, questions=2)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    posted = client.post(
        reverse("work:assignment", args=[assignment.id]), {"r1_q1": "yes", "r1_q2": "no"}
    )
    assert posted.status_code == 400
    assert "System B, question 1" in posted.text and "System B, question 2" in posted.text
    assert 'value="yes" checked' in posted.text  # what was given stays ticked
    assert not Label.objects.exists()
    # Said by the names the page gives them, not by field names (r2_q1) only the API knows.
    error = re.search(r'<p class="error" role="alert">(.*?)</p>', posted.text).group(1)
    assert error == "2 of 4 answers are missing: they are listed below."


def test_a_refused_submit_says_every_problem_besides_the_missing_answers(client, annotator_user):
    project = project_with_tasks(instructions=1, systems=2, questions=2)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    posted = client.post(
        reverse("work:assignment", args=[assignment.id]), {"r1_q1": "maybe", "r1_q2": "no"}
    )
    error = re.search(r'<p class="error" role="alert">(.*?)</p>', posted.text).group(1)
    assert error.startswith("2 of 4 answers are missing: they are listed below. Field r1_q1:")


def test_both_mode_page_has_no_questions_until_scores_are_saved(client, annotator_user):
    project = project_with_tasks(instructions=1, systems=2, questions=2, mode=ProjectMode.BOTH)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    url = reverse("work:assignment", args=[assignment.id])
    first = client.get(url).text
    assert "r1_score" in first and "r1_q1" not in first
    question_text = project.batches.get().tasks.get().instruction.questions.first().text
    assert question_text not in first
    assert client.post(url, {"r1_score": "3", "r2_score": "5"}).status_code == 302
    second = client.get(url).text
    assert "r1_q1" in second and 'name="r1_score"' not in second and question_text in second


def test_returning_a_task_from_the_page(client, annotator_user):
    project = project_with_tasks(instructions=1)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    assert client.post(reverse("work:assignment-return", args=[assignment.id])).status_code == 302
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.RETURNED


def test_the_return_button_asks_first(client, annotator_user):
    """One press of "Return this task" (beside Submit on a phone) gave the task away and dropped
    its answers without a word; a crowd worker's button asked first."""
    assignment = claim_for(annotator_user, project_with_tasks(instructions=1))
    client.force_login(annotator_user)
    page = client.get(reverse("work:assignment", args=[assignment.id])).text
    button = re.search(r'<form[^>]*class="return-form".*?</form>', page, re.S).group(0)
    assert 'data-confirm="Return this task?' in button


@pytest.mark.parametrize("questions", [2, 15])
def test_task_page_runs_a_fixed_number_of_queries(
    client, annotator_user, django_assert_num_queries, questions
):
    project = project_with_tasks(instructions=3, systems=5, questions=questions)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    # session, user, the assignment with its task, instruction, project and annotator,
    # responses + questions, "task N of M" (submitted and still claimable in one), the
    # navigation's roles
    with django_assert_num_queries(6):
        page = client.get(reverse("work:assignment", args=[assignment.id]))
    assert page.text.count('type="radio"') == 5 * questions * 3
    assert "task 1 of 3" in page.text


@pytest.mark.parametrize("questions", [2, 15])
def test_claim_and_submit_run_a_fixed_number_of_queries(
    client, annotator_user, django_assert_num_queries, questions
):
    project = project_with_tasks(instructions=3, systems=5, questions=questions)
    # The submit alone: with continue_to_next (the default) the same request also claims the
    # next task, which costs what the claim above costs.
    project.continue_to_next = False
    project.save()
    client.force_login(annotator_user)
    client.get(reverse("work:dashboard"))  # the annotator's first visit creates its row
    # session, user, annotator with role, project, savepoint, the annotator's row lock and
    # block, the annotator's claims (live or stale), candidates, lock, slot check with the
    # systems, insert, release
    with django_assert_num_queries(13):
        started = client.post(reverse("work:start-next", args=[project.id]))
    assignment = Assignment.objects.get(annotator__user=annotator_user)
    assert started["Location"] == reverse("work:assignment", args=[assignment.id])
    answers = {f"r{n}_q{m}": "yes" for n in range(1, 6) for m in range(1, questions + 1)}
    # session, user, savepoint, the locked assignment with its annotator, questions +
    # responses, update, labels, release
    with django_assert_num_queries(8):
        submitted = client.post(reverse("work:assignment", args=[assignment.id]), answers)
    assert submitted.status_code == 302
    assert Label.objects.filter(assignment=assignment).count() == 5 * questions


def test_submit_that_opens_the_next_task_runs_a_fixed_number_of_queries(
    client, annotator_user, django_assert_num_queries
):
    project = project_with_tasks(instructions=3, systems=5, questions=6)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    answers = {f"r{n}_q{m}": "no" for n in range(1, 6) for m in range(1, 7)}
    # The submit stores and no more (8, as with continue_to_next off); it sends the annotator
    # to the project's next-task address, which claims and shows the task in one response.
    with django_assert_num_queries(8):
        submitted = client.post(reverse("work:assignment", args=[assignment.id]), answers)
    assert Label.objects.filter(assignment=assignment).count() == 30
    assert not Assignment.objects.filter(annotator__user=annotator_user, status="claimed").exists()
    # session, user, annotator with role, project, savepoint, the annotator's row lock and
    # block, the annotator's claims, candidates, lock, slot check with the systems, insert,
    # release; then the page's assignment, responses + questions, "task N of M", the
    # navigation's roles
    with django_assert_num_queries(17):
        page = client.get(submitted["Location"])
    following = Assignment.objects.get(annotator__user=annotator_user, status="claimed")
    assert following.task_id != assignment.task_id
    assert page.status_code == 200 and "task 2 of 3" in page.text
    assert f'action="{reverse("work:assignment", args=[following.id])}"' in page.text


def test_submit_of_the_last_task_asks_for_candidates_once(
    client, annotator_user, django_assert_num_queries
):
    # One instruction: after its submit nothing is left for this annotator. The next claim
    # asks for candidates once (none) instead of again waiting for locks nobody holds.
    project = project_with_tasks(instructions=1, systems=5, questions=6)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    answers = {f"r{n}_q{m}": "no" for n in range(1, 6) for m in range(1, 7)}
    submitted = client.post(reverse("work:assignment", args=[assignment.id]), answers)
    # session, user, annotator with role, project, savepoint, the annotator's row lock and
    # block, the annotator's claims, candidates (none), rollback to the savepoint and its
    # release
    with django_assert_num_queries(11) as captured:
        done = client.get(submitted["Location"])
    assert done["Location"] == reverse("work:project-done", args=[project.id])
    assert not Assignment.objects.filter(annotator__user=annotator_user, status="claimed").exists()
    assert sum("ORDER BY taken" in q["sql"] for q in captured.captured_queries) == 1
    assert Label.objects.filter(assignment=assignment).count() == 30


def test_the_next_task_address_claims_only_with_the_token_of_this_user_and_project(
    client, annotator_user
):
    project = project_with_tasks(instructions=3, systems=2, questions=1)
    other_project = project_with_tasks(instructions=2, systems=2, questions=1)
    first = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    answers = {f"r{n}_q1": "yes" for n in (1, 2)}
    next_url = client.post(reverse("work:assignment", args=[first.id]), answers)["Location"]
    token = next_url.split("after=", 1)[1]
    bare = reverse("work:start-next", args=[project.id])
    # A link from elsewhere: no token, someone else's, another project's, or tampered with.
    someone = UserFactory(username="someone", roles=[ANNOTATOR])
    forged = [
        bare,
        f"{bare}?after=garbage",
        f"{bare}?after={token[:-2]}xx",
        f"{reverse('work:start-next', args=[other_project.id])}?after={token}",
    ]
    for url in forged:
        answer = client.get(url)
        assert answer.status_code == 302 and answer["Location"] == reverse("work:dashboard"), url
    client.force_login(someone)
    assert client.get(next_url)["Location"] == reverse("work:dashboard")
    assert not Assignment.objects.filter(status="claimed").exists()
    # The annotator's own token claims once: a reload shows the same task.
    client.force_login(annotator_user)
    opened = client.get(next_url)
    again = client.get(next_url)
    claimed = Assignment.objects.get(status="claimed")
    assert (
        claimed.annotator.user == annotator_user and opened.status_code == again.status_code == 200
    )
    assert f'data-canonical-url="{reverse("work:assignment", args=[claimed.id])}"' in again.text


def test_non_annotators_have_no_dashboard(client, researcher):
    client.force_login(researcher)
    assert client.get(reverse("work:dashboard")).status_code == 403


# --- Researchers and admins ------------------------------------------------------------------


def test_admin_creates_a_project_from_the_page(client, admin_user):
    benchmark, systems = benchmark_with_responses(instructions=3, systems=2)
    client.force_login(admin_user)
    assert client.get(reverse("work:project-create")).status_code == 200
    posted = client.post(
        reverse("work:project-create"),
        {
            "name": "pilot",
            "benchmark": benchmark.id,
            "systems": [system.id for system in systems],
            "selection": "all",
            "seed": 0,
            "mode": "drfr",
            "assignments_per_task": 2,
            "allotted_minutes": 30,
            "guidelines": "",
        },
    )
    project = Project.objects.get(name="pilot")
    assert posted.status_code == 302
    assert project.batches.get().tasks.count() == 3 and project.created_by == admin_user


def _textarea(page: str, name: str) -> str:
    found = re.search(rf'<textarea name="{name}"[^>]*>\n?(.*?)</textarea>', page, flags=re.S)
    return html.unescape(found.group(1))


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (ProjectMode.DIRECT_SCORE, DIRECT_SCORE_GUIDELINES),
        (ProjectMode.DRFR, DEFAULT_GUIDELINES),
        (ProjectMode.BOTH, DEFAULT_GUIDELINES),
    ],
)
def test_a_project_created_with_the_guidelines_as_pre_filled_gets_those_of_its_mode(
    client, admin_user, mode, expected
):
    # The form loads for a DRFR project; the researcher picks another mode and leaves the
    # guidelines as they were pre-filled (the browser's script swaps them; without it, the
    # page sends the YES/NO ones back): a direct-score project does not get YES/NO guidelines.
    benchmark, systems = benchmark_with_responses(instructions=1, systems=2)
    client.force_login(admin_user)
    page = client.get(reverse("work:project-create")).text
    pre_filled = _textarea(page, "guidelines")
    assert pre_filled == DEFAULT_GUIDELINES
    prefills = json.loads(
        html.unescape(re.search(r'data-mode-guidelines="([^"]*)"', page).group(1))
    )
    assert prefills == {
        "drfr": DEFAULT_GUIDELINES,
        "direct_score": DIRECT_SCORE_GUIDELINES,
        "both": DEFAULT_GUIDELINES,
    }
    form = {
        "name": "pilot", "benchmark": benchmark.id, "systems": [s.id for s in systems],
        "selection": "all", "mode": mode, "assignments_per_task": 1, "allotted_minutes": 30,
    }  # fmt: skip
    for sent in (pre_filled.replace("\n", "\r\n"), prefills[mode]):
        Project.objects.all().delete()
        assert (
            client.post(reverse("work:project-create"), {**form, "guidelines": sent}).status_code
            == 302
        )
        assert Project.objects.get().guidelines == expected


def test_guidelines_the_researcher_wrote_are_kept_whatever_the_mode(client, admin_user):
    benchmark, systems = benchmark_with_responses(instructions=1, systems=1)
    client.force_login(admin_user)
    own = "Score how polite each response is.\r\nIgnore typos."
    form = {
        "name": "pilot", "benchmark": benchmark.id, "systems": [systems[0].id],
        "selection": "all", "mode": ProjectMode.DIRECT_SCORE, "assignments_per_task": 1,
        "allotted_minutes": 30, "guidelines": own,
    }  # fmt: skip
    assert client.post(reverse("work:project-create"), form).status_code == 302
    assert Project.objects.get().guidelines == own
    # A form sent back with an error keeps the mode chosen and what was typed.
    form = {**form, "name": "again", "selection": "ids", "external_ids": "missing-one"}
    refused = client.post(reverse("work:project-create"), form)
    assert refused.status_code == 400 and _textarea(refused.text, "guidelines") == own


def test_a_system_whose_generation_failed_is_no_choice_for_a_project(client, admin_user):
    """Every call of its generation run failed: the system exists but has no response, so the
    project page does not offer it, and a hand-made POST naming it is refused."""
    from tests.annotate.engine.conftest import system_of_a_failed_generation

    benchmark, systems = benchmark_with_responses(instructions=1, systems=2)
    down = system_of_a_failed_generation(benchmark)
    client.force_login(admin_user)
    page = client.get(reverse("work:project-create")).text
    offered = set(re.findall(r'name="systems" value="(\d+)"', page))
    assert offered == {str(system.pk) for system in systems} and "downsys" not in page
    form = {"name": "p", "benchmark": benchmark.id, "systems": [down.pk], "selection": "all"}
    refused = client.post(reverse("work:project-create"), form)
    assert refused.status_code == 400 and "Select a valid choice" in refused.text
    assert not Project.objects.exists()


def test_project_form_shows_service_errors(client, admin_user):
    benchmark, systems = benchmark_with_responses(instructions=1)
    client.force_login(admin_user)
    posted = client.post(
        reverse("work:project-create"),
        {
            "name": "pilot",
            "benchmark": benchmark.id,
            "systems": [systems[0].id],
            "selection": "ids",
            "external_ids": "missing-one",
            "mode": "drfr",
            "assignments_per_task": 2,
            "allotted_minutes": 30,
        },
    )
    assert posted.status_code == 400 and "missing-one" in posted.text
    assert not Project.objects.exists()


def test_researchers_cannot_create_projects(client, researcher):
    client.force_login(researcher)
    assert client.get(reverse("work:project-create")).status_code == 403


def test_project_list_tells_a_researcher_who_creates_projects(client, researcher, admin_user):
    client.force_login(researcher)
    listing = client.get(reverse("work:project-list")).text
    assert "Projects are created by an admin" in listing
    assert reverse("work:project-create") not in listing
    client.force_login(admin_user)
    listing = client.get(reverse("work:project-list")).text
    assert reverse("work:project-create") in listing
    assert "Projects are created by an admin" not in listing


def test_researcher_sees_only_their_projects_progress_and_labels(
    client, researcher, annotator_user
):
    mine = project_with_tasks(instructions=2, systems=2, questions=1, assignments_per_task=1)
    mine.researchers.add(researcher)
    theirs = project_with_tasks(instructions=1)
    assignment = claim_for(annotator_user, mine)
    client.force_login(annotator_user)
    client.post(reverse("work:assignment", args=[assignment.id]), {"r1_q1": "yes", "r2_q1": "no"})
    client.force_login(researcher)
    listing = client.get(reverse("work:project-list")).text
    assert mine.name in listing and theirs.name not in listing
    detail = client.get(reverse("work:project-detail", args=[mine.id]))
    assert "1 / 2" in detail.text and annotator_user.username in detail.text
    assert client.get(reverse("work:project-detail", args=[theirs.id])).status_code == 404
    csv_text = b"".join(
        client.get(reverse("work:labels-csv", args=[mine.id])).streaming_content
    ).decode()
    lines = csv_text.strip().splitlines()
    assert lines[0].startswith("batch,instruction_id,system,annotator")
    assert len(lines) == 3 and all(annotator_user.username in line for line in lines[1:])
    assert client.get(reverse("work:labels-csv", args=[theirs.id])).status_code == 404


def test_admin_adds_a_batch(client, admin_user):
    benchmark, systems = benchmark_with_responses(instructions=3)
    from annotate.services.projects import InstructionSelection, Selection, project_create

    ids = list(benchmark.instructions.values_list("external_id", flat=True))
    project = project_create(
        name="p",
        benchmark=benchmark,
        systems=systems,
        selection=InstructionSelection(Selection.IDS, ids[:1]),
    )
    client.force_login(admin_user)
    posted = client.post(
        reverse("work:batch-create", args=[project.id]), {"name": "Batch 2", "selection": "all"}
    )
    assert posted.status_code == 302
    assert project.batches.get(name="Batch 2").tasks.count() == 2


def test_csrf_is_required_on_submit(annotator_user):
    from django.test import Client

    project = project_with_tasks(instructions=1, systems=1, questions=1)
    assignment = claim_for(annotator_user, project)
    client = Client(enforce_csrf_checks=True)
    client.force_login(annotator_user)
    posted = client.post(reverse("work:assignment", args=[assignment.id]), {"r1_q1": "yes"})
    assert posted.status_code == 403
    assert not Label.objects.exists()


def test_direct_score_page_shows_the_rubric_and_labelled_scores(client, annotator_user):
    project = project_with_tasks(instructions=1, systems=2, mode=ProjectMode.DIRECT_SCORE)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    page = client.get(reverse("work:assignment", args=[assignment.id])).text
    for rubric in ("1 Very bad", "2 Bad", "3 Okay", "4 Good", "5 Excellent"):
        assert f"<dt>{rubric}</dt>" in page
    assert 'name="r1_q1"' not in page
    for position in (1, 2):
        for score in range(1, 6):
            assert f'<input type="radio" name="r{position}_score" value="{score}">' in page


def _guidelines(page: str) -> str:
    return re.search(r'<div class="guidelines-text">(.*?)</div>', page, flags=re.S).group(1)


@pytest.mark.parametrize("mode", [ProjectMode.BOTH, ProjectMode.DIRECT_SCORE])
def test_the_scoring_step_shows_scoring_guidelines_not_the_yes_no_ones(
    client, annotator_user, mode
):
    project = project_with_tasks(instructions=1, systems=2, questions=1, mode=mode)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    url = reverse("work:assignment", args=[assignment.id])
    scoring = _guidelines(client.get(url).text)
    assert "score" in scoring and "UNKNOWN" not in scoring and "YES" not in scoring
    api = client.get(reverse("annotate-api:assignment", args=[assignment.id])).json()
    assert "UNKNOWN" not in api["guidelines"]
    if mode == ProjectMode.BOTH:
        assert client.post(url, {"r1_score": "3", "r2_score": "5"}).status_code == 302
        assert "UNKNOWN" in _guidelines(client.get(url).text)


def test_submit_continues_to_the_next_task_then_to_the_all_done_page(client, annotator_user):
    project = project_with_tasks(instructions=2, systems=2, questions=1)
    first = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    page = client.get(reverse("work:assignment", args=[first.id]))
    assert "task 1 of 2" in page.text
    assert '<details class="guidelines" open>' in page.text  # their first task of the project
    answers = {f"r{n}_q1": "yes" for n in (1, 2)}

    posted = client.post(reverse("work:assignment", args=[first.id]), answers)
    page = client.get(posted["Location"])
    second = Assignment.objects.exclude(pk=first.pk).get(annotator__user=annotator_user)
    assert "task 2 of 2" in page.text and '<details class="guidelines">' in page.text
    assert "Submitted. Thank you!" in page.text
    assert client.get(reverse("work:assignment", args=[second.id])).text.count('type="radio"') == 6

    done = client.post(reverse("work:assignment", args=[second.id]), answers, follow=True)
    assert done.redirect_chain[-1][0] == reverse("work:project-done", args=[project.id])
    assert "All done in" in done.text and "You submitted 2 tasks" in done.text


def test_scores_sent_twice_lead_to_the_questions_not_to_the_dashboard(client, annotator_user):
    # A double click on "Save scores and continue": the second send finds the scores stored.
    project = project_with_tasks(instructions=2, systems=2, questions=1, mode=ProjectMode.BOTH)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    url = reverse("work:assignment", args=[assignment.id])
    scores = {"r1_score": "3", "r2_score": "5"}
    first = client.post(url, scores)
    again = client.post(url, scores)
    assert first["Location"] == again["Location"] == url
    assert "Step 2 of 2" in client.get(url).text


def test_a_task_sent_twice_goes_on_to_the_next_task_not_to_the_dashboard(client, annotator_user):
    project = project_with_tasks(instructions=2, systems=2, questions=1)
    first = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    answers = {f"r{n}_q1": "yes" for n in (1, 2)}
    url = reverse("work:assignment", args=[first.id])
    sent = client.post(url, answers)
    # The browser left the first answer for the second: the next task was not claimed yet.
    again = client.post(url, answers)
    assert again["Location"].startswith(reverse("work:start-next", args=[project.id]))
    page = client.get(again["Location"])
    assert "task 2 of 2" in page.text and "Already submitted; nothing changed." in page.text
    assert sent["Location"].startswith(reverse("work:start-next", args=[project.id]))
    assert Label.objects.filter(assignment=first).count() == 2


def test_the_all_done_page_points_to_a_task_left_open_in_another_project(client, annotator_user):
    # Two projects over the same instructions: each instruction is labelled once, so the task
    # claimed in the second project is the only work left there, and nothing is claimable.
    from annotate.services.projects import InstructionSelection, project_create

    benchmark, systems = benchmark_with_responses(instructions=1, systems=2, questions=1)
    first, second = (
        project_create(
            name=name, benchmark=benchmark, systems=systems, selection=InstructionSelection()
        )
        for name in ("First", "Second")
    )
    waiting = claim_for(annotator_user, second)
    client.force_login(annotator_user)
    done = client.get(reverse("work:project-done", args=[first.id])).text
    assert "Second" in done
    assert f'href="{reverse("work:assignment", args=[waiting.id])}"' in done


def test_the_all_done_page_opened_during_a_task_links_to_it_and_says_it_is_not_done(
    client, annotator_user
):
    """Opened by its address while a claimed task was in progress, it said "All done" and
    "1 more is waiting", with no link to the task in progress."""
    project = project_with_tasks(instructions=2, systems=2, questions=1)
    live = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    page = client.get(reverse("work:project-done", args=[project.id])).text
    assert "All done" not in page and "in progress" in page
    assert f'href="{reverse("work:assignment", args=[live.id])}"' in page


@pytest.mark.parametrize("mode", [ProjectMode.DRFR, ProjectMode.DIRECT_SCORE, ProjectMode.BOTH])
def test_the_task_page_headings_go_down_one_level_at_a_time(client, annotator_user, mode):
    project = project_with_tasks(instructions=1, systems=2, questions=1, mode=mode)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    page = client.get(reverse("work:assignment", args=[assignment.id])).text
    levels = [int(level) for level in re.findall(r"<h([1-6])[\s>]", page)]
    assert levels[0] == 1
    assert all(after <= before + 1 for before, after in zip(levels, levels[1:], strict=False))


def test_the_task_page_says_by_when_to_submit_and_when_the_time_is_up(client, annotator_user):
    """A late submit is kept but counts only if the task's slot is still free: the page said
    nothing about the claim's time."""
    from datetime import timedelta

    project = project_with_tasks(instructions=1, systems=2, questions=1)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    url = reverse("work:assignment", args=[assignment.id])
    Assignment.objects.filter(pk=assignment.pk).update(
        expires_at=timezone.now() + timedelta(minutes=45, seconds=30)
    )
    deadline = re.search(
        r'<p class="tags" id="deadline"[^>]*>(.*?)</p>', client.get(url).text
    ).group(1)
    assert "Submit by <time datetime=" in deadline
    assert "(45\xa0minutes left)" in re.sub(r"<[^>]+>", "", deadline)
    Assignment.objects.filter(pk=assignment.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    assert "The time for this task is up: submit now" in client.get(url).text
    Assignment.objects.filter(pk=assignment.pk).update(status=AssignmentStatus.SUBMITTED)
    assert 'id="deadline"' not in client.get(url).text  # nothing to submit any more


def _keyboard_hints(page) -> str:
    """The page's keyboard legend and its key help, as text."""
    legend = re.search(r'<aside class="keys".*?</aside>', page.text, flags=re.S).group(0)
    help_keys = re.search(r'<dialog class="help".*?</dialog>', page.text, flags=re.S).group(0)
    return re.sub(r"<[^>]+>", "", legend + help_keys)


@pytest.mark.parametrize("mode", [ProjectMode.DRFR, ProjectMode.DIRECT_SCORE])
def test_a_submitted_task_offers_no_key_to_answer_or_submit_it(client, annotator_user, mode):
    project = project_with_tasks(instructions=2, systems=2, questions=1, mode=mode)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    url = reverse("work:assignment", args=[assignment.id])
    open_hints = _keyboard_hints(client.get(url))
    assert "Enter submit when complete" in open_hints
    assert "submit when every question is answered" in open_hints
    answer = "yes" if mode == ProjectMode.DRFR else "4"
    fields = ["r1_q1", "r2_q1"] if mode == ProjectMode.DRFR else ["r1_score", "r2_score"]
    assert client.post(url, dict.fromkeys(fields, answer)).status_code == 302

    page = client.get(url)
    assert "This assignment is submitted" in page.text
    hints = _keyboard_hints(page)
    assert "submit" not in hints.lower()
    assert "YES" not in hints and "score" not in hints  # its answers are read-only
    assert "↓/j next" in hints and "? all keys" in hints


def test_a_claim_the_beat_expired_still_takes_the_answers_the_page_says_to_submit(
    client, annotator_user
):
    """The page says "the time for this task is up: submit now", and the submit takes a late
    answer (counted while the slot is free), but once the beat had marked the claim expired
    (within a minute) a reload showed the answers locked with no Submit: the work was lost."""
    from datetime import timedelta

    from annotate.services.assignments import assignments_expire

    project = project_with_tasks(instructions=1, systems=2, questions=1)
    assignment = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    url = reverse("work:assignment", args=[assignment.id])
    Assignment.objects.filter(pk=assignment.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    assert assignments_expire(now=timezone.now()) == 1
    page = client.get(url).text
    assert "The time for this task is up: submit now" in page
    assert "· task 1 of 1</span>" in page  # not "task 1 of 0"
    assert re.search(r'<button type="submit">Submit</button>', page)
    assert not re.search(r'name="r1_q1" value="yes"[^>]*disabled', page)
    assert "Return this task" not in page  # a lapsed claim cannot be given back
    response = client.post(url, {"r1_q1": "yes", "r2_q1": "no"})
    assert response.status_code == 302
    assert Label.objects.filter(assignment=assignment).count() == 2
    page = client.get(url).text
    assert 'id="deadline"' not in page and "Return this task" not in page


def test_the_dashboard_offers_a_lapsed_claim_to_submit_while_the_task_page_takes_it(
    client, annotator_user
):
    """A claim past its time, not submitted, is still taken by the task page (test above): the
    dashboard links it, saying the time is up, before and after the beat marks it expired, and
    no longer once it is submitted or returned. Someone else's lapsed claim is not shown."""
    from datetime import timedelta

    from annotate.services.assignments import assignment_return, assignments_expire

    project = project_with_tasks(instructions=3, systems=2, questions=1)
    assignment = claim_for(annotator_user, project)
    other = UserFactory(username="other-lapsed", roles=[ANNOTATOR])
    theirs = claim_for(other, project)
    Assignment.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    client.force_login(annotator_user)
    url = reverse("work:assignment", args=[assignment.id])
    link = f'<a href="{url}">Continue task {assignment.task.instruction.external_id}</a>'

    def dashboard():
        return client.get(reverse("work:dashboard")).text

    for beat_ran in (False, True):
        if beat_ran:
            assert assignments_expire(now=timezone.now()) == 2
        page = dashboard()
        assert link in page and "the time for it is up, but you may still submit it" in page
        assert "Continue your task" not in page  # not offered as a live claim
        assert reverse("work:assignment", args=[theirs.id]) not in page
    assert client.post(url, {"r1_q1": "yes", "r2_q1": "no"}).status_code == 302
    assert "may still submit" not in dashboard()

    returned = claim_for(annotator_user, project)
    assignment_return(assignment_id=returned.id, annotator=returned.annotator, now=timezone.now())
    Assignment.objects.filter(pk=returned.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    assert "may still submit" not in dashboard()  # the task page takes no answers for it


def test_the_all_done_page_offers_the_lapsed_claims_the_dashboard_offers(client, annotator_user):
    """A claim past its time, not submitted, in this project or another, is linked on the
    all-done page as on the dashboard (same rule, same words), until it is submitted."""
    from datetime import timedelta

    here = project_with_tasks(instructions=2, systems=2, questions=1)
    there = project_with_tasks(instructions=2, systems=2, questions=1)
    lapsed_here, lapsed_there = claim_for(annotator_user, here), claim_for(annotator_user, there)
    Assignment.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    client.force_login(annotator_user)
    done_url = reverse("work:project-done", args=[here.id])
    words = (
        "the time for it is up, but you may still submit it (it counts if the task is not full yet)"
    )

    def link(assignment):
        url = reverse("work:assignment", args=[assignment.id])
        return (
            f'<a href="{url}">Continue task {assignment.task.instruction.external_id}</a>: {words}'
        )

    page = client.get(done_url).text
    assert link(lapsed_here) in page and link(lapsed_there) in page
    assert link(lapsed_here) in client.get(reverse("work:dashboard")).text  # the same words
    url = reverse("work:assignment", args=[lapsed_here.id])
    assert client.post(url, {"r1_q1": "yes", "r2_q1": "no"}).status_code == 302
    page = client.get(done_url).text
    assert link(lapsed_here) not in page and link(lapsed_there) in page


def test_the_all_done_page_does_not_say_nothing_is_left_above_a_claim_to_submit(
    client, annotator_user
):
    from datetime import timedelta

    project = project_with_tasks(instructions=1, systems=2, questions=1)
    claim_for(annotator_user, project)
    Assignment.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    client.force_login(annotator_user)
    page = client.get(reverse("work:project-done", args=[project.id])).text
    assert "nothing left for you here" not in page
    assert "no new task is left for you here, but you may still submit the one below" in page


def test_no_page_of_an_annotators_own_work_may_be_kept_by_a_browser_or_proxy(
    client, annotator_user
):
    """On a shared computer the back button (or a proxy) must not show the next person an
    annotator's task and answers: the task page, a refused submit showing the answers, the next
    task and the pages listing their work say Cache-Control: no-store."""
    project = project_with_tasks(instructions=2, systems=2, questions=1)
    first = claim_for(annotator_user, project)
    client.force_login(annotator_user)
    url = reverse("work:assignment", args=[first.id])
    task = client.get(url)
    refused = client.post(url, {"r1_q1": "yes"})
    posted = client.post(url, {f"r{n}_q1": "yes" for n in (1, 2)})
    next_task = client.get(posted["Location"])
    assert refused.status_code == 400 and 'value="yes" checked' in refused.text
    assert "task 2 of 2" in next_task.text
    pages = [task, refused, posted, next_task, client.get(reverse("work:dashboard"))]
    pages.append(client.get(reverse("work:project-done", args=[project.id])))
    for page in pages:
        assert "no-store" in page["Cache-Control"] and "private" in page["Cache-Control"]


def test_a_lapsed_claim_in_a_closed_batch_says_so_and_takes_no_answers(client, annotator_user):
    """A claim past its time in a batch deactivated since was offered nowhere (the dashboard
    lists active batches only) while its page still took answers: the page now says the batch
    is closed, the submit is refused with nothing saved, and no page offers it to continue. A
    live claim there may still be finished."""
    from datetime import timedelta

    project = project_with_tasks(instructions=3, systems=2, questions=1)
    lapsed = claim_for(annotator_user, project)
    Assignment.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    project.batches.update(active=False)
    client.force_login(annotator_user)
    url = reverse("work:assignment", args=[lapsed.id])
    page = client.get(url).text
    assert 'id="batch-closed"' in page and "This batch is closed" in page
    assert '<button type="submit">Submit' not in page
    refused = client.post(url, {"r1_q1": "yes", "r2_q1": "no"})
    assert refused.status_code == 410 and "nothing was saved" in refused.text
    lapsed.refresh_from_db()
    assert lapsed.submitted_at is None and not Label.objects.exists()
    assert "Continue task" not in client.get(reverse("work:dashboard")).text

    live = Assignment.objects.create(
        task=project.batches.get().tasks.exclude(pk=lapsed.task_id).first(),
        annotator=lapsed.annotator,
        claimed_at=timezone.now(),
        expires_at=timezone.now() + timedelta(minutes=30),
        order_seed=1,
        display_order=lapsed.display_order,
    )
    live_url = reverse("work:assignment", args=[live.id])
    assert 'id="batch-closed"' not in client.get(live_url).text
    assert client.post(live_url, {"r1_q1": "yes", "r2_q1": "no"}).status_code == 302
    assert Label.objects.filter(assignment=live).count() == 2


def test_the_all_done_page_of_a_project_never_offered_to_the_annotator_is_404(
    client, annotator_user
):
    """Any project id answered "All done in '<its name>'": the names of other studies, closed
    ones included, were one URL away for every annotator."""
    closed = project_with_tasks(instructions=1, systems=2, questions=1)
    closed.name = "A closed study of someone else"
    closed.save(update_fields=["name"])
    closed.batches.update(active=False)
    client.force_login(annotator_user)
    refused = client.get(reverse("work:project-done", args=[closed.id]))
    assert refused.status_code == 404 and closed.name not in refused.text
    worked = project_with_tasks(instructions=1, systems=2, questions=1)
    claim_for(annotator_user, worked)
    worked.batches.update(active=False)  # their own project, closed since: still theirs
    assert client.get(reverse("work:project-done", args=[worked.id])).status_code == 200


def test_start_next_in_a_project_never_offered_to_the_annotator_is_404(client, annotator_user):
    """The "Start next task" form posted to a closed project's id answered "No task left for you in
    '<its name>'": the same names one URL away as the All-done page had. A closed project of
    their own still says there is nothing left in it."""
    closed = project_with_tasks(instructions=1, systems=2, questions=1)
    closed.name = "A closed study of someone else"
    closed.save(update_fields=["name"])
    closed.batches.update(active=False)
    client.force_login(annotator_user)
    refused = client.post(reverse("work:start-next", args=[closed.id]), follow=True)
    assert refused.status_code == 404 and closed.name not in refused.text
    worked = project_with_tasks(instructions=1, systems=2, questions=1)
    worked.name = "Their own closed study"
    worked.save(update_fields=["name"])
    returned = claim_for(annotator_user, worked)  # theirs, given back: no live claim
    Assignment.objects.filter(pk=returned.pk).update(status=AssignmentStatus.RETURNED)
    worked.batches.update(active=False)
    told = client.post(reverse("work:start-next", args=[worked.id]), follow=True)
    assert told.status_code == 200 and "No task left for you in" in told.text


def test_the_annotators_work_pages_are_limited_per_user_on_the_apis_counter(
    client, annotator_user, worker_rates
):
    """Claims, submits and returns from the pages count on the annotator's work rate (scope
    "annotator-work"), with the API's claims: past it 429 with Retry-After, a message saying
    what was not done and the way back, and nothing written. Within it work goes on."""
    clock = worker_rates(annotator_work="4/minute")
    project = project_with_tasks(instructions=3, systems=1, questions=1)
    project.continue_to_next = False
    project.save()
    client.force_login(annotator_user)
    claimed = client.post(reverse("annotate-api:claim", args=[project.id]))  # the API: 1
    assert claimed.status_code == 201
    first = Assignment.objects.get(pk=claimed.json()["assignment"])
    task_url = reverse("work:assignment", args=[first.id])
    assert client.post(task_url, {"r1_q1": "yes"}).status_code == 302  # 2
    assert client.post(reverse("work:start-next", args=[project.id])).status_code == 302  # 3
    second = Assignment.objects.exclude(pk=first.pk).get()
    second_url = reverse("work:assignment", args=[second.id])
    assert client.get(second_url).status_code == 200  # reading a task is not counted
    assert client.post(reverse("work:assignment-return", args=[second.id])).status_code == 302
    clock[0] += 15

    refused = client.post(reverse("work:start-next", args=[project.id]))
    assert refused.status_code == 429 and refused["Retry-After"] == "45"
    assert (
        "Too many work requests from your account (at most 4/minute). Please wait 45 s and try "
        "again. No task was claimed." in refused.text
    )
    assert f'href="{reverse("work:dashboard")}"' in refused.text
    assert Assignment.objects.count() == 2
    submit = client.post(second_url, {"r1_q1": "no"})
    assert submit.status_code == 429 and "Nothing was submitted." in submit.text
    assert f'href="{second_url}">Back to the task</a>' in submit.text
    assert Label.objects.count() == 1
    returned = client.post(reverse("work:assignment-return", args=[first.id]))
    assert returned.status_code == 429 and "The task was not returned." in returned.text
    # Another annotator is not held up by this one's count.
    other = UserFactory(username="other-annotator", roles=[ANNOTATOR])
    client.force_login(other)
    assert client.post(reverse("work:start-next", args=[project.id])).status_code == 302
    client.force_login(annotator_user)
    clock[0] += 45
    assert client.post(second_url).status_code == 400  # counted again: a refusal of its own


def test_the_projects_labels_csv_counts_with_the_exports(client, researcher, worker_rates):
    worker_rates(exports="2/hour")
    project = project_with_tasks(instructions=1)
    project.researchers.add(researcher)
    client.force_login(researcher)
    url = reverse("work:labels-csv", args=[project.id])
    assert [client.get(url).status_code for _ in range(2)] == [200, 200]
    refused = client.get(url)
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    assert "Too many report exports and label downloads from your account" in refused.text
    assert f'href="{reverse("work:project-detail", args=[project.id])}"' in refused.text


def test_head_requests_of_the_labels_csv_count_with_the_exports(client, researcher, worker_rates):
    """Django runs a download's view for a HEAD as for a GET (and drops the body), so a HEAD
    counts too: uncounted, it was a way to the view that no limit saw."""
    worker_rates(exports="2/hour")
    project = project_with_tasks(instructions=1)
    project.researchers.add(researcher)
    client.force_login(researcher)
    url = reverse("work:labels-csv", args=[project.id])
    assert [client.head(url).status_code for _ in range(2)] == [200, 200]
    assert client.head(url).status_code == 429
    assert client.get(url).status_code == 429
