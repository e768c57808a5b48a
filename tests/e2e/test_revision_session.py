"""An annotator does a two-turn revision session in a real browser, with the fake model."""

import json

import pytest

from annotate.revision.models import RevisionSession, Turn
from annotate.revision.services.imports import study_upload
from annotate.roles import ANNOTATOR
from tests.e2e.storage import STORAGE_REFUSED
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = {
    "question": "How do retrieval-augmented models cite sources?",
    "documents": [
        {"title": "Paper Zero", "text": "Retrieval models fetch passages.\n\nCitations help."},
        {"title": "Paper One", "text": "Readers trust cited answers more."},
    ],
}


def start_session(page_for, settings, tmp_path, *, study: str, system: str, user: str):
    """A one-question study on the fake model; its annotator's browser on a started session,
    the initial answer shown. Model calls run in a thread, as embedded: the request returns."""
    settings.REVISION_GENERATION = "thread"
    path = tmp_path / "study.jsonl"
    path.write_text(json.dumps(QUESTION) + "\n")
    study_upload(path=str(path), study_name=study, systems=[system])
    annotator = UserFactory(username=user, roles=[ANNOTATOR])
    page = page_for(annotator)
    page.goto("/revision/")
    page.get_by_role("button", name="Start a session").click()
    page.locator("#answer").wait_for()
    return page, annotator


def test_annotator_does_a_two_turn_session(page_for, settings, tmp_path):
    page, user = start_session(
        page_for, settings, tmp_path, study="e2e", system="secret-system-name", user="e2e-annotator"
    )
    answer = page.locator("#answer")
    assert answer.inner_text().startswith("Answer to: How do retrieval-augmented")
    assert "Paper Zero" in page.content() and "secret-system-name" not in page.content()

    # Turn 1: information-seeking, rated with the keyboard, then edited.
    page.fill("#instruction", "Add how readers trust citations.")
    page.check("input[value=information-seeking]")
    page.keyboard.press("Control+Enter")
    page.locator("#rate-form").wait_for()
    # An answer already in when the page came can show its form before the page's deferred
    # script (the keys' listener) runs: wait for it, as a person never beats it.
    page.wait_for_load_state()
    assert "Revised for: Add how readers trust citations." in page.locator("#answer").inner_text()
    assert "Readers trust cited answers more." in page.locator(".revision-passages").inner_text()
    page.locator("body").click()
    page.keyboard.press("2")
    assert page.is_checked("input[name=rating][value=neutral]")
    page.keyboard.press("c")
    page.keyboard.type("Added, but too long.")
    page.fill("#edited_answer", "My shorter edit [1].")
    with page.expect_navigation():
        page.get_by_role("button", name="Save rating").click()
    page.wait_for_load_state()  # drafts are kept by a deferred script: a person never beats it

    # Turn 2: stylistic; the model revises the edit; rated good (no edit box).
    page.fill("#instruction", "Make it one sentence.")
    page.reload()  # a draft survives a reload (kept in the browser until sent)
    assert page.input_value("#instruction") == "Make it one sentence."
    page.check("input[value=stylistic]")
    page.get_by_role("button", name="Send instruction").click()
    page.locator("#rate-form").wait_for()
    page.wait_for_load_state()  # as in turn 1: the keys' listener comes with the deferred script
    assert page.locator("#answer").inner_text().startswith("My shorter edit [1].")
    page.locator("body").click()  # as in turn 1: keys typed into a text field are text
    page.keyboard.press("1")
    assert page.is_checked("input[name=rating][value=good]")
    assert page.locator("#edit-box").is_hidden()
    page.fill("#comment", "Fine.")
    with page.expect_navigation():
        page.get_by_role("button", name="Save rating").click()
    page.wait_for_load_state()  # the confirm comes with the deferred script, as in turn 1
    # Ending asks first (one click under "Send instruction" ended it): cancelled, nothing ends.
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.get_by_role("button", name="I am satisfied with this answer: end the session").click()
    assert asked == ["End the session? You cannot give it another instruction afterwards."]
    assert RevisionSession.objects.get(annotator=user).status == "active"
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="I am satisfied with this answer: end the session").click()
    page.get_by_text("This session is finished").wait_for()
    drafts = "Object.keys(window.localStorage).filter(key => key.includes('revision-'))"
    assert page.evaluate(drafts) == []  # none of the session's drafts is left in the browser

    session = RevisionSession.objects.get(annotator=user)
    assert session.status == "finished" and session.satisfied
    turns = list(Turn.objects.filter(session=session).order_by("position"))
    assert [(t.rating, t.edited_answer) for t in turns] == [
        ("neutral", "My shorter edit [1]."),
        ("good", ""),
    ]
    assert turns[1].previous_answer == "My shorter edit [1]."
    assert all(t.seconds is not None and t.seconds >= 0 for t in turns)


def test_an_edit_stays_in_its_box_said_unused_while_the_rating_is_good(
    page_for, settings, tmp_path, snap
):
    """Switching the rating to good hid the box with the annotator's edit in it, without a
    word: the edit stays in sight, said not to be used while the rating is good (and not sent),
    and is theirs again once the rating goes back to bad."""
    page, user = start_session(
        page_for, settings, tmp_path, study="e2e-edit", system="s", user="e2e-editor"
    )
    page.fill("#instruction", "Shorter.")
    page.check("input[value=stylistic]")
    page.get_by_role("button", name="Send instruction").click()
    page.locator("#rate-form").wait_for()
    page.wait_for_load_state()
    page.check("input[name=rating][value=neutral]")
    page.fill("#edited_answer", "My own edit.")
    page.check("input[name=rating][value=good]")
    snap(page, "edit kept under good")
    assert page.locator("#edit-box").is_visible()
    assert page.input_value("#edited_answer") == "My own edit."
    assert page.locator("#edited_answer").is_disabled()
    assert page.locator("#edit-unused").inner_text() == (
        "Your edit is kept here but not used while the revision is rated good: rate it "
        "neutral or bad to send it with the rating."
    )
    page.check("input[name=rating][value=bad]")
    assert page.locator("#edit-unused").is_hidden()
    assert page.locator("#edited_answer").is_enabled()
    assert page.input_value("#edited_answer") == "My own edit."
    page.check("input[name=rating][value=good]")
    page.fill("#comment", "Fine as it was.")
    with page.expect_navigation():
        page.get_by_role("button", name="Save rating").click()
    turn = Turn.objects.get(session__annotator=user)
    assert (turn.rating, turn.edited_answer) == ("good", "")


def test_a_refused_or_reloaded_rating_keeps_its_drafts_and_an_untouched_answer_is_no_edit(
    page_for, settings, tmp_path, snap
):
    """The rating's choice, comment and edit survive a reload and a form refused, by the browser
    (no rating: the choice is required, and the browser says so before sending) or by the
    server (a blank comment); the model's answer left as shown in the edit box (the browser
    sends it with CRLF) is no edit, so a bad unedited answer leaves the history. A rating sent
    without a choice all the same is refused by the server: tests/annotate/revision/test_pages."""
    page, user = start_session(
        page_for, settings, tmp_path, study="e2e-drafts", system="m", user="e2e-drafter"
    )
    session = RevisionSession.objects.get(annotator=user)
    a0 = page.locator("#answer").inner_text()
    page.fill("#instruction", "Shorter.")
    page.check("input[value=stylistic]")
    page.get_by_role("button", name="Send instruction").click()
    page.locator("#rate-form").wait_for()
    assert "\n" in Turn.objects.get(session=session).answer  # several lines: CRLF in a form

    page.fill("#comment", "Not shorter at all.")
    group = page.get_by_role("group", name="Did the model follow your instruction? (required)")
    choices = group.get_by_role("radio")
    assert all(choices.nth(i).evaluate("input => input.required") for i in range(3))
    sent = []
    page.on("request", lambda request: sent.append(request) if request.method == "POST" else 0)
    page.get_by_role("button", name="Save rating").click()  # no choice: the browser stops it
    snap(page, "no rating")
    assert choices.first.evaluate("input => input.matches(':invalid')")
    assert choices.first.evaluate("input => input.validationMessage")
    assert sent == [] and Turn.objects.get(session=session).rating == ""
    page.goto(f"/revision/sessions/{session.pk}/")
    assert page.input_value("#comment") == "Not shorter at all."  # kept after the stop
    page.locator("body").click()
    page.keyboard.press("3")
    page.reload()
    assert page.is_checked("input[name=rating][value=bad]")  # the choice survives a reload
    assert page.input_value("#comment") == "Not shorter at all."
    page.fill("#comment", "  ")
    page.get_by_role("button", name="Save rating").click()  # a blank comment: the server refuses
    page.get_by_text("a comment explaining the rating is required").wait_for()
    page.goto(f"/revision/sessions/{session.pk}/")
    assert page.is_checked("input[name=rating][value=bad]")  # kept after the refusal
    page.fill("#comment", "Not shorter at all.")
    with page.expect_navigation():
        page.get_by_role("button", name="Save rating").click()  # edit box left as shown
    page.wait_for_load_state()
    first = Turn.objects.get(session=session, position=1)
    assert (first.rating, first.edited_answer) == ("bad", "")
    assert page.input_value("#instruction") == ""  # the next step starts blank
    page.fill("#instruction", "Add a citation.")
    page.check("input[value=information-seeking]")
    page.get_by_role("button", name="Send instruction").click()
    page.locator("#rate-form").wait_for()
    assert Turn.objects.get(session=session, position=2).previous_answer == a0
    assert page.input_value("#comment") == ""  # the first rating's drafts are gone


def test_a_draft_typed_before_the_page_script_ran_is_kept(page_for, settings, tmp_path):
    """The rating form shows as soon as the page's HTML is in; its script (deferred) attaches
    the draft keeping afterwards. A comment typed in between was lost on a reload or refusal
    (and made the test above fail one run in six)."""
    page, user = start_session(
        page_for, settings, tmp_path, study="e2e-early", system="m", user="e2e-early"
    )
    session = RevisionSession.objects.get(annotator=user)
    page.fill("#instruction", "Shorter.")
    page.check("input[value=stylistic]")
    page.get_by_role("button", name="Send instruction").click()
    page.locator("#rate-form").wait_for()
    scripts = []

    def hold_script(route):
        scripts.append(route)  # answered below, once the comment is typed

    page.route("**/revision/drafts.js", hold_script)
    page.goto(f"/revision/sessions/{session.pk}/", wait_until="commit")
    page.locator("#comment").wait_for()
    page.fill("#comment", "Typed early.")
    page.check("input[name=rating][value=neutral]")
    page.wait_for_timeout(100)
    assert scripts, "the page asked for its script"
    page.unroute("**/revision/drafts.js")
    scripts[0].continue_()
    page.wait_for_load_state("load")
    page.reload()
    assert page.input_value("#comment") == "Typed early."
    assert page.is_checked("input[name=rating][value=neutral]")


STREAMED = "A streamed answer that cites the retrieved passages [0] and grows word by word."


def test_a_streamed_answer_grows_on_the_page_then_stands_whole_without_a_reload(
    page_for, settings, tmp_path, snap
):
    import threading

    from annotate.engine.services import endpoint_create
    from tests.evaluation.openai_stub import StubOpenAI

    settings.REVISION_GENERATION = "thread"
    release = threading.Event()

    def hold_half_way(event: int) -> None:
        if event == 5:  # the role and four words are out: hold the rest until the page saw them
            release.wait(30)

    with StubOpenAI(replies=[STREAMED], stream_gate=hold_half_way) as stub:
        endpoint_create(name="streaming", model="m", base_url=stub.base_url, stream=True)
        path = tmp_path / "study.jsonl"
        path.write_text(json.dumps(QUESTION) + "\n")
        study_upload(path=str(path), study_name="e2e-stream", systems=["model=streaming"])
        user = UserFactory(username="e2e-streamer", roles=[ANNOTATOR])
        page = page_for(user)
        page.goto("/revision/")
        page.get_by_role("button", name="Start a session").click()
        page.wait_for_url("**/revision/sessions/*/")
        page.evaluate("window.notReloaded = true")
        partial = page.locator("#partial")
        partial.wait_for()
        shown = partial.inner_text()
        snap(page, "partial answer")
        assert shown and STREAMED.startswith(shown) and len(shown) < len(STREAMED)
        assert page.locator("#answer").is_hidden() and page.locator("#turn-form").is_hidden()
        release.set()
        page.locator("#answer").wait_for()
        assert page.locator("#answer").inner_text() == STREAMED
        assert page.locator("#partial").count() == 0
        # A screen reader hears that the answer is in: the waiting notice (a live region) says
        # so, out of sight, rather than vanishing without a word.
        notice = page.locator("#waiting[role=status]")
        assert (
            notice.text_content() == "The model's answer is in: it is shown under Initial answer."
        )
        assert "visually-hidden" in notice.get_attribute("class")
        assert page.locator("#turn-form").is_visible()
        assert page.evaluate("window.notReloaded") is True  # the same page, never reloaded
        assert "Citations help." in page.locator(".revision-passages").inner_text()
        # Numbered as the answer cites them ("[0]"), and said to be a0's, in place of the
        # "shown once it is in" the page was rendered with.
        numbers = page.locator(".revision-passages .passage-number").all_inner_texts()
        assert numbers == [f"[{n}]" for n in range(len(numbers))] and numbers
        source = page.locator("#passages-source").inner_text()
        assert source == (
            "Retrieved for the question to write the initial answer: the answer's [0], [1]… "
            "cite these passages by their numbers."
        )
        snap(page, "whole answer")
    session = RevisionSession.objects.get(annotator=user)
    assert (session.initial_answer, session.initial_partial) == (STREAMED, "")


def held_back(page, seconds=0.6):
    """Let every form reach the server at once but give the browser its answer `seconds` later,
    as a slow network does; return the list of (status, path) of the forms' answers."""
    import time
    from urllib.parse import urlsplit

    answers = []

    def route(route):
        if route.request.method != "POST":
            route.continue_()
            return
        response = route.fetch(max_redirects=0)
        answers.append((response.status, urlsplit(route.request.url).path))
        time.sleep(seconds)
        route.fulfill(response=response)

    page.route("**/*", route)
    return answers


def test_a_second_click_while_the_first_is_on_its_way_sends_nothing(page_for, settings, tmp_path):
    page, user = start_session(
        page_for, settings, tmp_path, study="e2e-double", system="m", user="e2e-double"
    )
    session = RevisionSession.objects.get(annotator=user)
    page.fill("#instruction", "Shorter.")
    page.check("input[value=stylistic]")
    answers = held_back(page)
    double_click = """selector => {
        const button = document.querySelector(selector);
        button.click();
        setTimeout(() => button.click(), 150);
    }"""
    page.evaluate(double_click, "#turn-form button[type=submit]")
    page.locator("#rate-form").wait_for()
    page.wait_for_load_state()  # the keys' listener comes with the page's deferred script
    assert [status for status, _ in answers] == [302]
    assert Turn.objects.filter(session=session).count() == 1
    page.locator("body").click()
    page.keyboard.press("1")
    page.fill("#comment", "Shorter indeed.")
    page.evaluate(double_click, "#rate-form button[type=submit]")
    page.locator("#turn-form").wait_for()
    assert [status for status, _ in answers] == [302, 302]
    assert "Cannot do that" not in page.content()
    assert Turn.objects.get(session=session).rating == "good"


def test_a_long_link_in_an_instruction_wraps_on_a_phone_and_beside_the_passages(
    page_for, settings, tmp_path
):
    page, _ = start_session(
        page_for, settings, tmp_path, study="e2e-long", system="m", user="e2e-long"
    )
    link = "https://example.org/" + "x" * 200
    page.fill("#instruction", f"Cite {link} please.")
    page.check("input[value=stylistic]")
    page.get_by_role("button", name="Send instruction").click()
    page.locator("#rate-form").wait_for()
    page.wait_for_load_state("load")  # measured as people see it: with the stylesheet applied
    said = page.locator("#rate-form p").first
    for _ in range(50):
        if said.evaluate("p => getComputedStyle(p).overflowWrap") == "anywhere":
            break
        page.wait_for_timeout(100)
    assert link in said.inner_text()
    # Its text stays in its box: not under the passages beside it.
    assert said.evaluate("p => p.scrollWidth <= p.clientWidth + 1")  # +1: subpixel rounding
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def held_revision(page_for, settings, tmp_path, *, user: str, kind: str = "stylistic"):
    """A session on a stub model whose second call (the turn's revision) waits for `release`;
    return the annotator's page once the instruction is sent (waiting for it) and the event."""
    import threading

    from annotate.engine.services import endpoint_create
    from tests.evaluation.openai_stub import StubOpenAI

    settings.REVISION_GENERATION = "thread"
    release = threading.Event()

    def hold_the_revision(count: int) -> None:
        if count == 2:
            release.wait(30)

    stub = StubOpenAI(replies=["Initial [0].", "Revised [1]."], on_request=hold_the_revision)
    stub.start()
    endpoint_create(name="held", model="m", base_url=stub.base_url)
    path = tmp_path / "study.jsonl"
    path.write_text(json.dumps(QUESTION) + "\n")
    study_upload(path=str(path), study_name=f"e2e-{user}", systems=["model=held"])
    page = page_for(UserFactory(username=user, roles=[ANNOTATOR]))
    page.goto("/revision/")
    page.get_by_role("button", name="Start a session").click()
    page.locator("#turn-form").wait_for()
    page.fill("#instruction", "Shorter.")
    page.check(f"input[value={kind}]")
    page.get_by_role("button", name="Send instruction").click()
    page.locator("#waiting").wait_for()
    return page, release, stub


def test_the_passages_note_of_an_arriving_answer_reads_as_after_a_reload(
    page_for, settings, tmp_path, snap
):
    """The note filled in when a turn's answer came in by polling read "its [0], [1]… this
    retrieval added cite these passages": it says what the page rendered again says."""
    page, release, stub = held_revision(
        page_for, settings, tmp_path, user="e2e-note", kind="information-seeking"
    )
    try:
        release.set()
        page.locator("#rate-form").wait_for()
        snap(page, "answer in")
        arrived = page.locator("#passages-source").inner_text()
        assert arrived == (
            "Retrieved for turn 1's instruction: the [0], [1]… this retrieval added to the "
            "answer cite these passages by their numbers; citations kept from earlier answers "
            "refer to earlier retrievals."
        )
        page.reload()
        assert page.locator("#passages-source").inner_text() == arrived
    finally:
        release.set()
        stub.stop()


def test_the_arriving_answer_takes_focus_to_the_rating_form(page_for, settings, tmp_path, snap):
    """When the answer came in, focus stayed where it was (on nothing): a keyboard or screen
    reader user had to find the rating form. It goes to the first rating, the notice kept."""
    page, release, stub = held_revision(page_for, settings, tmp_path, user="e2e-focus")
    try:
        assert page.locator("#rate-form").is_hidden()
        release.set()
        page.locator("#rate-form").wait_for()
        snap(page, "answer in")
        focused = page.evaluate("[document.activeElement.name, document.activeElement.value]")
        assert focused == ["rating", "good"]
        notice = page.locator("#waiting[role=status]")
        assert notice.text_content() == (
            "The model's answer is in: it is shown under Answer after turn 1."
        )
        page.keyboard.press("ArrowDown")  # the radio group has the keyboard: on to "neutral"
        assert page.is_checked("input[name=rating][value=neutral]")
    finally:
        release.set()
        stub.stop()


def test_an_answer_already_in_on_a_reload_takes_focus_to_the_rating_unless_one_is_chosen(
    page_for, settings, tmp_path
):
    """Focus went to the rating when the answer arrived, but not when it was there as the page
    loaded (a reload after it arrived): the keyboard was on nothing again. It goes to the first
    rating then too, unless the annotator chose one already (kept as a draft)."""
    page, user = start_session(
        page_for, settings, tmp_path, study="e2e-reload-focus", system="m", user="e2e-reload"
    )
    page.fill("#instruction", "Shorter.")
    page.check("input[value=stylistic]")
    page.get_by_role("button", name="Send instruction").click()
    page.locator("#rate-form").wait_for()
    page.reload()
    focused = "[document.activeElement.name, document.activeElement.value]"
    assert page.evaluate(focused) == ["rating", "good"]
    page.keyboard.press("ArrowDown")  # the radio group has the keyboard: on to "neutral"
    assert page.is_checked("input[name=rating][value=neutral]")
    page.reload()
    assert page.is_checked("input[name=rating][value=neutral]")  # the draft's choice
    assert page.evaluate("document.activeElement === document.body")
    page.keyboard.press("c")  # the shortcuts work from there as ever
    page.keyboard.type("Partly.")
    assert page.input_value("#comment") == "Partly."


def test_the_keyboard_starts_in_the_instruction_box_of_a_new_session_and_of_each_turn(
    page_for, settings, tmp_path
):
    """A new session and the page after a rating left the focus on nothing: a keyboard user
    tabbed past the site's links to reach the instruction box. It is focused, the page kept at
    its top (the question and the answer come first)."""
    page, user = start_session(
        page_for, settings, tmp_path, study="e2e-instr-focus", system="m", user="e2e-instr"
    )
    page.wait_for_load_state()
    assert page.evaluate("document.activeElement.id") == "instruction"
    assert page.evaluate("window.scrollY") == 0
    page.keyboard.type("Shorter.")
    page.keyboard.press("Tab")
    page.keyboard.press("ArrowDown")  # the type's radio group: on to "stylistic"
    page.keyboard.press("Control+Enter")
    page.locator("#rate-form").wait_for()
    page.wait_for_load_state()  # the form can show before the page's script runs
    page.keyboard.press("1")
    page.keyboard.press("c")
    page.keyboard.type("Done.")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    page.wait_for_load_state()
    assert page.evaluate("document.activeElement.id") == "instruction"
    page.keyboard.type("Add a citation.")
    assert page.input_value("#instruction") == "Add a citation."
    turn = Turn.objects.get(session__annotator=user)
    assert (turn.instruction, turn.instruction_type, turn.rating) == (
        "Shorter.",
        "stylistic",
        "good",
    )


def test_the_arriving_answer_leaves_focus_in_a_field_being_typed_in(page_for, settings, tmp_path):
    """Someone typing elsewhere on the page (a field the page gains, a browser extension's
    box) keeps the focus and their keys when the answer comes in."""
    page, release, stub = held_revision(page_for, settings, tmp_path, user="e2e-typing")
    try:
        page.evaluate("""() => {
            const box = document.createElement("input");
            box.type = "search"; box.id = "elsewhere"; box.setAttribute("aria-label", "Search");
            document.querySelector(".revision-main").prepend(box);
        }""")
        page.focus("#elsewhere")
        release.set()
        page.locator("#rate-form").wait_for()
        page.keyboard.type("still here")
        assert page.evaluate("document.activeElement.id") == "elsewhere"
        assert page.input_value("#elsewhere") == "still here"
        assert not page.is_checked("input[name=rating][value=good]")
    finally:
        release.set()
        stub.stop()


def test_the_instruction_type_is_required_in_the_browser_and_says_so(
    page_for, settings, tmp_path, snap
):
    """An instruction sent without its type went to the server, which refused it: the choice
    was not marked required. The browser now stops it at the choice; its legend says it is
    required and each choice carries the required state that screen readers announce."""
    page, user = start_session(
        page_for, settings, tmp_path, study="e2e-type", system="m", user="e2e-type"
    )
    group = page.get_by_role("group", name="Instruction type (required)")
    choices = group.get_by_role("radio")
    assert choices.count() == 2
    assert all(choices.nth(i).evaluate("input => input.required") for i in range(2))
    page.fill("#instruction", "Shorter.")
    sent = []
    page.on("request", lambda request: sent.append(request) if request.method == "POST" else 0)
    page.get_by_role("button", name="Send instruction").click()
    snap(page, "no type")
    assert choices.first.evaluate("input => input.matches(':invalid')")
    assert choices.first.evaluate("input => input.validationMessage")
    assert sent == [] and not Turn.objects.filter(session__annotator=user).exists()
    page.check("input[value=stylistic]")
    page.get_by_role("button", name="Send instruction").click()
    page.locator("#rate-form").wait_for()
    assert Turn.objects.get(session__annotator=user).instruction_type == "stylistic"


def test_a_refused_form_leaves_the_session_address_which_opens_again(page_for, settings, tmp_path):
    """A rating the server refuses (a blank comment) came back at the form's address,
    .../rate/, which takes POST only: opened again from the address bar or a restored tab, the
    annotator got a blank 405 page. The page now shows the session's own address, and opening
    it again shows the session with the rating form as it was."""
    page, user = start_session(
        page_for, settings, tmp_path, study="e2e-refused-url", system="m", user="e2e-refused-url"
    )
    session = RevisionSession.objects.get(annotator=user)
    session_path = f"/revision/sessions/{session.pk}/"
    page.fill("#instruction", "Shorter.")
    page.check("input[value=stylistic]")
    page.get_by_role("button", name="Send instruction").click()
    page.locator("#rate-form").wait_for()
    page.wait_for_load_state()
    page.check("input[name=rating][value=bad]")
    page.fill("#comment", "  ")
    page.get_by_role("button", name="Save rating").click()
    page.get_by_text("a comment explaining the rating is required").wait_for()
    page.wait_for_load_state()
    assert page.evaluate("location.pathname") == session_path
    response = page.goto(page.url)  # the address bar's address, opened again
    assert response.status == 200
    assert page.is_checked("input[name=rating][value=bad]")
    assert Turn.objects.get(session=session).rating == ""


@pytest.mark.parametrize("refusal", list(STORAGE_REFUSED))
def test_a_browser_refusing_storage_rates_a_turn_without_drafts_or_errors(
    page_for, settings, tmp_path, refusal
):
    page, user = start_session(
        page_for, settings, tmp_path, study=f"e2e-{refusal}", system="m", user=f"e2e-{refusal}"
    )
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.add_init_script(STORAGE_REFUSED[refusal])
    page.reload()
    page.fill("#instruction", "Shorter.")
    page.check("input[value=stylistic]")
    page.get_by_role("button", name="Send instruction").click()
    page.locator("#rate-form").wait_for()
    page.locator("body").click()
    page.keyboard.press("2")  # the page's own keys still work
    page.fill("#comment", "Kept nowhere but sent.")
    with page.expect_navigation():
        page.get_by_role("button", name="Save rating").click()
    page.wait_for_load_state()
    assert errors == []
    turn = Turn.objects.get(session__annotator=user)
    assert (turn.rating, turn.comment) == ("neutral", "Kept nowhere but sent.")
