"""The annotator's task page in a real browser: keyboard only, shuffled order, escaping, both mode."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotate.models import (
    Assignment,
    AssignmentStatus,
    DirectScore,
    Label,
    LabelValue,
    ProjectMode,
    Response,
)
from annotate.revision.services.imports import study_upload
from annotate.roles import ANNOTATOR
from tests.e2e.storage import STORAGE_REFUSED
from tests.factories import UserFactory, project_with_tasks

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def tab_to(page, text, limit=40):
    """Press Tab until the focused element's text is `text` (keyboard only, like a person)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent.trim()") == text:
            return
    raise AssertionError(f"never reached {text!r} with Tab")


def start_next_task_with_keyboard(page):
    page.goto("/annotate/")
    tab_to(page, "Start next task")
    page.keyboard.press("Enter")
    page.wait_for_url("**/annotate/assignments/*/")


def do_a_task_with_keyboard(page, user) -> Assignment:
    """Start the next task, answer its two questions YES then NO and submit, keys only."""
    start_next_task_with_keyboard(page)
    assignment = Assignment.objects.get(annotator__user=user)
    for key in ("y", "n"):
        page.keyboard.press(key)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    return assignment


def response_order(page, assignment):
    """Return the system ids in the order their texts appear on the page."""
    texts = page.locator("pre.response-text").all_inner_texts()
    by_text = dict(
        Response.objects.filter(instruction=assignment.task.instruction).values_list(
            "text", "system_id"
        )
    )
    return [by_text[text] for text in texts]


def test_a_full_task_with_the_keyboard_only(page_for):
    project_with_tasks(instructions=1, systems=3, questions=2)
    user = UserFactory(username="keyboarder", roles=[ANNOTATOR])
    page = page_for(user)
    start_next_task_with_keyboard(page)
    assignment = Assignment.objects.get(annotator__user=user)

    assert page.locator("#answered-count").inner_text() == "0"
    legend = page.locator("aside.keys")
    assert legend.is_visible()
    for key in ("y", "n", "u", "j", "k", "Enter"):
        assert legend.locator("kbd", has_text=key).count() >= 1, key
    guidelines = page.locator("details.guidelines")
    assert guidelines.evaluate("e => e.open") is True  # open on their first task of a project
    page.locator("details.guidelines summary").focus()
    page.keyboard.press("Enter")
    assert guidelines.evaluate("e => e.open") is False
    assert page.get_by_label("UNKNOWN").count() == 6  # real controls with their labels
    page.locator("input[name=r1_q1]").first.focus()
    page.keyboard.press("Enter")  # incomplete: refused, and the page says what is missing
    assert page.locator("#missing").is_visible()
    assert "System A, question 1" in page.locator("#missing-list").inner_text()
    assert page.url.endswith(f"/annotate/assignments/{assignment.id}/")

    for key in ["y", "n", "u", "y", "y"]:  # System A q1 q2, System B q1 q2, System C q1
        page.keyboard.press(key)
    assert page.locator("#answered-count").inner_text() == "5"
    assert "System C, question 2" in page.locator("#missing-list").inner_text()
    focused = "document.activeElement.name"
    assert page.evaluate(focused) == "r3_q2"
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    assert page.evaluate(focused) == "r2_q2"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("j")
    assert page.evaluate(focused) == "r3_q2"
    page.keyboard.press("k")  # back to System C q1 and change it
    assert page.evaluate(focused) == "r3_q1"
    page.keyboard.press("n")
    page.keyboard.press("y")  # System C q2
    assert page.locator("#answered-count").inner_text() == "6"
    assert page.locator("#missing").is_hidden()
    focus_visible = page.evaluate(
        "getComputedStyle(document.activeElement).outlineStyle !== 'none'"
    )
    assert focus_visible
    page.keyboard.press("Enter")
    page.wait_for_url("**/annotate/projects/*/done/")  # the only task: straight to "all done"
    assert "Submitted" in page.locator(".messages").inner_text()
    assert "All done" in page.locator("h1").inner_text()

    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED
    expected = {
        (1, 1): LabelValue.YES,
        (1, 2): LabelValue.NO,
        (2, 1): LabelValue.UNKNOWN,
        (2, 2): LabelValue.YES,
        (3, 1): LabelValue.NO,
        (3, 2): LabelValue.YES,
    }
    for (position, question), value in expected.items():
        label = Label.objects.get(
            assignment=assignment,
            response__system_id=assignment.display_order[position - 1],
            question__position=question,
        )
        assert label.value == value


def test_order_differs_between_annotators_and_is_stable_on_reload(page_for):
    project_with_tasks(instructions=1, systems=8, questions=1, assignments_per_task=2)
    orders = []
    for name in ("first", "second"):
        user = UserFactory(username=name, roles=[ANNOTATOR])
        page = page_for(user)
        start_next_task_with_keyboard(page)
        assignment = Assignment.objects.get(annotator__user=user)
        shown = response_order(page, assignment)
        assert shown == assignment.display_order
        page.reload()
        assert response_order(page, assignment) == shown
        labels = page.locator("section.response h2").all_inner_texts()
        assert labels == [f"System {letter}" for letter in "ABCDEFGH"]
        orders.append(shown)
    # 8! orders: two independent seeds agree once in 40320 claims.
    assert orders[0] != orders[1]


def test_script_and_img_onerror_in_a_response_are_text_and_run_nothing(page_for):
    project = project_with_tasks(instructions=1, systems=1, questions=1)
    hostile = (
        "<script>window.__pwned = 1; alert(1)</script>\n"
        '<img src="x" onerror="window.__pwned = 2; alert(2)">\n'
        "```\ncode block\n    indented\n```"
    )
    Response.objects.filter(instruction__tasks__batch__project=project).update(text=hostile)
    user = UserFactory(username="careful", roles=[ANNOTATOR])
    page = page_for(user)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    start_next_task_with_keyboard(page)
    shown = page.locator("pre.response-text").inner_text()
    assert shown == hostile
    assert page.locator("pre.response-text img, pre.response-text script").count() == 0
    assert page.evaluate("window.__pwned === undefined")
    assert dialogs == []
    assert (
        page.locator("pre.response-text").evaluate("e => getComputedStyle(e).whiteSpace")
        == "pre-wrap"
    )


def test_both_mode_scores_come_before_the_questions(page_for):
    project = project_with_tasks(instructions=1, systems=2, questions=2, mode=ProjectMode.BOTH)
    question_text = project.batches.get().tasks.get().instruction.questions.first().text
    user = UserFactory(username="scorer", roles=[ANNOTATOR])
    page = page_for(user)
    start_next_task_with_keyboard(page)
    # Claimed long ago: the server's cap (time since the claim) leaves the page's count alone.
    Assignment.objects.filter(annotator__user=user).update(
        claimed_at=timezone.now() - timedelta(minutes=30)
    )
    assert "Step 1 of 2" in page.inner_text("main")
    assert question_text not in page.content()
    assert page.locator("fieldset.question").count() == 0
    page.keyboard.press("2")
    page.keyboard.press("5")
    page.wait_for_timeout(3200)  # three seconds of active time on the scores
    page.mouse.move(5, 5)
    page.keyboard.press("Enter")
    page.wait_for_selector("fieldset.question")
    page.wait_for_load_state()  # step 2 is a new page: its key handler is a deferred script
    assert "Step 2 of 2" in page.inner_text("main")
    assert question_text in page.content()
    assert page.locator("fieldset.score").count() == 0
    for key in "ynyn":
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_url("**/annotate/projects/*/done/")

    assignment = Assignment.objects.get(annotator__user=user)
    assert assignment.scored_at < assignment.submitted_at
    first, second = assignment.display_order
    assert DirectScore.objects.get(response__system_id=first).score == 2
    assert DirectScore.objects.get(response__system_id=second).score == 5
    assert Label.objects.filter(assignment=assignment).count() == 4
    assert assignment.submitted_at <= timezone.now()
    # The scores' seconds count once: step 2 (same address) does not start from step 1's draft.
    step_one = assignment.active_seconds
    assert 2 <= step_one < 5, step_one  # step 1 counted twice gave 6


def test_submit_and_continue_opens_the_next_task_at_its_own_address(page_for):
    project_with_tasks(instructions=2, systems=2, questions=1)
    user = UserFactory(username="continuer", roles=[ANNOTATOR])
    page = page_for(user)
    start_next_task_with_keyboard(page)
    first = Assignment.objects.get(annotator__user=user)
    page.wait_for_load_state()
    for key in "yn":
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: "/annotate/assignments/" in url and f"/{first.id}/" not in url)
    second = Assignment.objects.get(annotator__user=user, status=AssignmentStatus.CLAIMED)
    assert page.url.endswith(f"/annotate/assignments/{second.id}/")  # not the next-task address
    assert "Submitted" in page.locator(".messages").inner_text()
    assert "task 2 of 2" in page.inner_text("main")
    page.reload()  # the task again, not another claim
    assert page.url.endswith(f"/annotate/assignments/{second.id}/")
    assert Assignment.objects.filter(annotator__user=user).count() == 2
    page.wait_for_load_state()
    for key in "ny":
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_url("**/annotate/projects/*/done/")
    assert Label.objects.filter(assignment=second).count() == 2


def test_answers_and_active_time_survive_a_reload_until_submitted(page_for):
    project_with_tasks(instructions=2, systems=2, questions=2)
    user = UserFactory(username="reloader", roles=[ANNOTATOR])
    page = page_for(user)
    start_next_task_with_keyboard(page)
    assignment = Assignment.objects.get(annotator__user=user)
    for key in ("y", "n", "u"):  # three of the four questions
        page.keyboard.press(key)
    assert page.locator("#answered-count").inner_text() == "3"
    page.wait_for_timeout(2200)  # two seconds of active time, touched just before
    page.mouse.move(5, 5)
    page.reload()
    assert page.locator("#answered-count").inner_text() == "3"
    checked = page.locator("fieldset.answer input[type=radio]:checked")
    assert [checked.nth(i).get_attribute("value") for i in range(3)] == ["yes", "no", "unknown"]
    page.keyboard.press("y")  # the focus is on the one left open
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED
    assert assignment.active_seconds >= 1  # counted before the reload too
    assert Label.objects.filter(assignment=assignment).count() == 4
    # The next task opens blank: the draft belongs to the task it was written on.
    assert page.locator("#answered-count").inner_text() == "0"


@pytest.mark.parametrize("refusal", list(STORAGE_REFUSED))
def test_a_browser_refusing_storage_does_a_task_without_drafts_or_errors(page_for, refusal):
    project_with_tasks(instructions=2, systems=2, questions=1)
    user = UserFactory(username=f"no-storage-{refusal}", roles=[ANNOTATOR])
    page = page_for(user)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.add_init_script(STORAGE_REFUSED[refusal])
    assignment = do_a_task_with_keyboard(page, user)
    assert errors == []
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED
    assert Label.objects.filter(assignment=assignment).count() == 2


def test_a_returned_task_shows_no_answers_that_were_never_sent(page_for):
    """Answers drafted before "Return this task" were shown again, ticked, on the returned
    task's page ("2 / 4 answered"), as if stored: the server has none of them."""
    project_with_tasks(instructions=2, systems=2, questions=2)
    user = UserFactory(username="giver", roles=[ANNOTATOR])
    page = page_for(user)
    start_next_task_with_keyboard(page)
    first = Assignment.objects.get(annotator__user=user)
    page.keyboard.press("y")
    page.keyboard.press("n")
    tab_to(page, "Return this task (someone else will do it)")
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert asked and asked[0].startswith("Return this task?")
    page.goto(f"/annotate/assignments/{first.id}/")
    assert "This assignment is returned" in page.locator("main").inner_text()
    assert page.locator("fieldset.answer input[type=radio]:checked").count() == 0
    assert page.locator("#answered-count").inner_text() == "0"
    assert not Label.objects.filter(assignment=first).exists()


def test_enter_on_a_button_outside_the_task_form_presses_that_button(page_for):
    project_with_tasks(instructions=2, systems=2, questions=1)
    user = UserFactory(username="returner", roles=[ANNOTATOR])
    page = page_for(user)
    start_next_task_with_keyboard(page)
    first = Assignment.objects.get(annotator__user=user)
    page.keyboard.press("y")  # one of two answered: Enter on the task form would list the rest
    tab_to(page, "Return this task (someone else will do it)")
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert asked and asked[0].startswith("Return this task?")
    page.wait_for_url("**/annotate/")
    assert "Task returned" in page.locator(".messages").inner_text()
    first.refresh_from_db()
    assert first.status == AssignmentStatus.RETURNED
    page.get_by_role("button", name="Start next task").click()
    page.wait_for_url("**/annotate/assignments/*/")
    page.wait_for_load_state()
    page.get_by_role("button", name="Log out", exact=True).focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**/accounts/login/")


def test_the_start_buttons_are_on_a_phones_screen(page_for, settings, tmp_path):
    """On a 375 px phone the lists scrolled sideways inside their box and the buttons sat past
    its right edge: a new annotator saw project names and no way to start."""
    project = project_with_tasks(instructions=1, systems=2, questions=1)
    project.name = "A study with a rather long name, as real studies have"
    project.save(update_fields=["name"])
    path = tmp_path / "study.jsonl"
    path.write_text('{"question": "Why?", "documents": [{"title": "Paper", "text": "Because."}]}\n')
    study_upload(path=str(path), study_name="A revision study", systems=["sys"])
    user = UserFactory(username="phone-starter", roles=[ANNOTATOR])
    page = page_for(user, viewport={"width": 375, "height": 700})
    for url, name in (("/annotate/", "Start next task"), ("/revision/", "Start a session")):
        page.goto(url)
        box = page.get_by_role("button", name=name).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 375, (url, box)
        assert page.evaluate("document.documentElement.scrollWidth") <= 375, url
        # The menu sat squeezed beside the site's name, five lines tall (a 219 px header).
        assert page.evaluate("document.querySelector('.site-header').offsetHeight") <= 160, url


def test_the_sticky_submit_bar_leaves_a_phone_most_of_its_screen(page_for):
    """On a 375 x 700 phone the bar (count, Submit, the deadline) was 204 px tall, always."""
    project_with_tasks(instructions=1, systems=2, questions=2, allotted_minutes=30)
    user = UserFactory(username="phone-bar", roles=[ANNOTATOR])
    page = page_for(user, viewport={"width": 375, "height": 700})
    start_next_task_with_keyboard(page)
    assert page.locator("#deadline").is_visible()
    height = page.evaluate("document.querySelector('.submit-bar').offsetHeight")
    assert height <= 140, height


def test_the_missing_answers_are_listed_outside_the_sticky_bar_on_a_phone(page_for):
    """With answers missing on submit their list sat in the sticky bar, which then grew to
    ~281 px of a 375 x 700 phone: the bar keeps a short line and a link to the first one."""
    project_with_tasks(instructions=1, systems=3, questions=4, allotted_minutes=30)
    user = UserFactory(username="phone-missing", roles=[ANNOTATOR])
    page = page_for(user, viewport={"width": 375, "height": 700})
    start_next_task_with_keyboard(page)
    page.keyboard.press("y")  # System A question 1; eleven still to answer
    page.get_by_role("button", name="Submit").click()  # refused in the page: the list shows
    bar_height = "document.querySelector('.submit-bar').offsetHeight"
    assert page.locator("#missing").is_visible()
    assert "System C, question 4" in page.locator("#missing-list").inner_text()
    assert page.locator(".submit-bar #missing-list").count() == 0
    assert page.locator("#missing-short").inner_text().startswith("11 missing")
    assert page.evaluate(bar_height) <= 140, page.evaluate(bar_height)
    page.keyboard.press("y")
    assert page.locator("#missing-count").inner_text() == "10"
    page.locator("#missing-first").click()  # to the first one still missing
    assert page.evaluate("document.activeElement.name") == "r1_q3"

    with page.expect_navigation():  # past the script: the server refuses and lists them
        page.evaluate("document.getElementById('task-form').submit()")
    assert page.locator("#missing").is_visible() and page.locator("#missing-short").is_visible()
    assert page.locator("#missing-count").inner_text() == "10"
    assert page.evaluate(bar_height) <= 140, page.evaluate(bar_height)
    assert page.evaluate("document.activeElement.name") == "r1_q3"


def test_a_long_word_in_a_question_or_response_wraps_on_a_phone(page_for):
    project = project_with_tasks(instructions=1, systems=2, questions=1)
    instruction = project.batches.get().tasks.get().instruction
    link = "https://example.org/" + "y" * 150
    instruction.questions.update(text=f"Does the answer link {link}?")
    instruction.responses.update(text=f"See {link}")
    user = UserFactory(username="phone-reader", roles=[ANNOTATOR])
    page = page_for(user, viewport={"width": 390, "height": 844})
    start_next_task_with_keyboard(page)
    assert link in page.locator("fieldset.question legend").first.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_the_task_opens_at_its_top_with_the_keys_ready_for_the_first_question(page_for):
    # A long instruction and responses put the first question below the window: the page still
    # opens on the instruction (read it first), and "y" answers question 1 all the same.
    from annotate.models import Instruction

    project = project_with_tasks(instructions=1, systems=2, questions=2)
    instruction = Instruction.objects.get(benchmark=project.benchmark)
    long_text = "\n".join(f"Line {n} of a long instruction." for n in range(60))
    Instruction.objects.filter(pk=instruction.pk).update(text=long_text)
    user = UserFactory(username="reader", roles=[ANNOTATOR])
    page = page_for(user, viewport={"width": 1280, "height": 800})
    start_next_task_with_keyboard(page)

    assert page.evaluate("window.scrollY") == 0
    assert page.locator("h1").is_visible()
    assert page.evaluate("document.activeElement.name") == "r1_q1"
    page.keyboard.press("y")
    assert page.locator("input[name=r1_q1][value=yes]").is_checked()
    assert page.evaluate("document.activeElement.name") == "r1_q2"
    assert page.evaluate("window.scrollY") > 0  # the next question is brought into view


def test_a_submitted_task_answers_no_key_and_sends_nothing(page_for):
    project_with_tasks(instructions=2, systems=2, questions=1)
    user = UserFactory(username="rereader", roles=[ANNOTATOR])
    page = page_for(user)
    assignment = do_a_task_with_keyboard(page, user)
    page.goto(f"/annotate/assignments/{assignment.id}/")
    assert "This assignment is submitted" in page.locator(".notice").inner_text()
    legend = page.locator("aside.keys").inner_text()
    assert "submit" not in legend.lower() and "YES" not in legend
    # requestSubmit fires the form's submit event at once, before anything is sent.
    page.evaluate(
        "document.getElementById('task-form').addEventListener('submit', () => window.sent = true)"
    )
    for key in ("u", "Enter"):  # its radio buttons are disabled: the focus is on the page
        page.keyboard.press(key)
    assert page.evaluate("window.sent === undefined")
    page.keyboard.press("?")
    assert "submit" not in page.locator("#key-help").inner_text().lower()
    checked = page.locator("fieldset.answer input[type=radio]:checked")
    assert [checked.nth(i).get_attribute("value") for i in range(checked.count())] == ["yes", "no"]


def test_the_deadline_counts_down_while_the_page_is_open_and_then_says_the_time_is_up(page_for):
    """The page said "(29 minutes left)" for as long as it stayed open, and still "Submit by"
    after the time was up. The browser's clock is Playwright's, moved on by the test."""
    project = project_with_tasks(instructions=1, systems=2, questions=1)
    user = UserFactory(username="deadline-watcher", roles=[ANNOTATOR])
    page = page_for(user)
    page.clock.install()
    start_next_task_with_keyboard(page)
    assignment = Assignment.objects.get(annotator__user=user, task__batch__project=project)
    # The claim is for the project's allotted minutes; the page counts down what is left of them.
    minutes = int((assignment.expires_at - timezone.now()).total_seconds() // 60)
    left = page.locator("#deadline-left")
    assert left.inner_text() == f"{minutes}\xa0minutes"
    page.clock.run_for(5 * 60 * 1000)
    assert left.inner_text() == f"{minutes - 5}\xa0minutes"
    page.clock.run_for((minutes - 5 + 1) * 60 * 1000)  # past the seconds over the minutes too
    deadline = page.locator("#deadline")
    assert deadline.inner_text().startswith("The time for this task is up: submit now")
    assert left.count() == 0 and page.locator("#task-form button[type=submit]").is_visible()
