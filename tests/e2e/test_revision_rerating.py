"""A re-rater rates two turns of someone else's session in a real browser: the papers the answers
cite beside them, "N of M re-rated", the keyboard, and straight on to the next turn."""

import json

import pytest
from django.utils import timezone

from annotate.models import Annotator
from annotate.revision.models import Rerating, RevisionSession, Study, Turn
from annotate.revision.services.imports import study_upload
from annotate.roles import ANNOTATOR, RESEARCHER
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = {
    "question": "How do retrieval-augmented models cite sources?",
    "documents": [
        {"title": "Paper Zero", "text": "Retrieval models fetch passages."},
        {"title": "Paper One", "text": "Readers trust cited answers more."},
    ],
}


def _two_reratings(tmp_path) -> tuple:
    """Return the re-rater and their two re-ratings of someone else's finished session."""
    path = tmp_path / "study.jsonl"
    path.write_text(json.dumps(QUESTION) + "\n")
    study_upload(path=str(path), study_name="rerate", systems=["alpha"])
    study = Study.objects.get(name="rerate")
    owner, rerater = (UserFactory(username=n, roles=[ANNOTATOR]) for n in ("owner", "rerater"))
    session = RevisionSession.objects.create(
        study=study, question=study.questions.get(), system=study.systems.get(), annotator=owner,
        status="finished", initial_answer="a0", created_at=timezone.now(),
    )  # fmt: skip
    for n, answer in ((1, "Readers trust <em>cited</em> answers [1]."), (2, "Shorter [0].")):
        turn = Turn.objects.create(
            session=session, position=n, instruction=f"Instruction {n}.", answer=answer,
            previous_answer="a0", rating="good", instruction_type="stylistic",
        )  # fmt: skip
        Rerating.objects.create(turn=turn, annotator=rerater, created_at=timezone.now())
    return rerater, list(Rerating.objects.order_by("turn__position"))


def test_a_rerater_judges_with_the_papers_and_sees_how_far_they_are(page_for, tmp_path, snap):
    rerater, _ = _two_reratings(tmp_path)
    page = page_for(rerater)
    page.goto("/revision/")
    page.get_by_role("link", name="turn 1: Instruction 1.").click()
    page.wait_for_url("**/revision/reratings/*/")
    assert page.locator("#titles li").all_inner_texts() == ["Paper Zero", "Paper One"]
    assert page.locator("#rerate-progress").inner_text() == "0 of 2 re-rated"
    assert (
        "Readers trust <em>cited</em> answers [1]." in page.locator("pre.text").nth(1).inner_text()
    )
    page.locator("body").click()
    page.keyboard.press("1")
    page.keyboard.press("c")
    page.keyboard.type("Cites Paper One, as asked.")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    assert "Instruction 2." in page.locator("main").inner_text()
    assert page.locator("#rerate-progress").inner_text() == "1 of 2 re-rated"
    snap(page, "second turn")
    assert Rerating.objects.filter(status="done").get().comment == "Cites Paper One, as asked."


def test_a_rerating_half_done_survives_a_reload(page_for, tmp_path, snap):
    rerater, (first, second) = _two_reratings(tmp_path)
    page = page_for(rerater)
    page.goto(f"/revision/reratings/{first.pk}/")
    page.locator("body").click()
    page.keyboard.press("2")
    page.keyboard.press("c")
    page.keyboard.type("Half of it.")
    page.reload()
    snap(page, "reloaded")
    assert page.locator("input[name=rating][value=neutral]").is_checked()
    assert page.locator("#comment").input_value() == "Half of it."
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    first.refresh_from_db()
    assert (first.status, first.rating, first.comment) == ("done", "neutral", "Half of it.")
    # The next turn starts blank: a draft belongs to the re-rating it was written for.
    assert page.url.endswith(f"/revision/reratings/{second.pk}/")
    assert page.locator("#comment").input_value() == ""
    assert not page.locator("input[name=rating]:checked").count()


def test_a_rerating_page_opens_with_the_keyboard_on_the_rating(page_for, tmp_path):
    """The session page puts the keyboard on the rating when the answer is in; the re-rating
    page, the same form, left it on nothing (arrow keys and Tab started from the top)."""
    rerater, (first, _) = _two_reratings(tmp_path)
    page = page_for(rerater)
    page.goto(f"/revision/reratings/{first.pk}/")
    page.wait_for_load_state()
    focused = "[document.activeElement.name, document.activeElement.value]"
    assert page.evaluate(focused) == ["rating", "good"]
    assert page.evaluate("window.scrollY") == 0
    page.keyboard.press("ArrowDown")  # the radio group has the keyboard: on to "neutral"
    assert page.is_checked("input[name=rating][value=neutral]")
    page.keyboard.press("Tab")  # on to the comment
    page.keyboard.type("Partly.")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    first.refresh_from_db()
    assert (first.status, first.rating, first.comment) == ("done", "neutral", "Partly.")


def test_a_rerating_without_a_choice_is_stopped_by_the_browser_and_says_so(
    page_for, tmp_path, snap
):
    """A re-rating sent without its rating went to the server, which refused it: the choice was
    not marked required. The browser now stops it, from the button as from Ctrl+Enter; the
    legend says the choice is required. The server's own refusal: tests/annotate/revision."""
    rerater, (first, _) = _two_reratings(tmp_path)
    page = page_for(rerater)
    page.goto(f"/revision/reratings/{first.pk}/")
    group = page.get_by_role("group", name="Did the model follow the instruction? (required)")
    choices = group.get_by_role("radio")
    assert all(choices.nth(i).evaluate("input => input.required") for i in range(3))
    page.locator("body").click()
    page.keyboard.press("c")
    page.keyboard.type("Cites nothing.")
    sent = []
    page.on("request", lambda request: sent.append(request) if request.method == "POST" else 0)
    page.keyboard.press("Control+Enter")
    page.get_by_role("button", name="Save rating").click()
    snap(page, "no rating")
    assert choices.first.evaluate("input => input.matches(':invalid')")
    assert choices.first.evaluate("input => input.validationMessage")
    assert sent == []
    first.refresh_from_db()
    assert first.status == "pending"
    page.locator("body").click()
    page.keyboard.press("3")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    first.refresh_from_db()
    assert (first.status, first.rating, first.comment) == ("done", "bad", "Cites nothing.")


DRAFTS = "() => Object.keys(window.localStorage).filter(key => key.includes('revision-'))"


def test_a_saved_rerating_leaves_no_draft_in_the_browser(page_for, tmp_path):
    """A re-rating's draft stayed in the browser's storage for ever once it was saved: the page
    after it is the next re-rating's, or the list of sessions after the last. It goes once the
    server took it; a form the server refuses (a blank comment) keeps it."""
    rerater, (first, second) = _two_reratings(tmp_path)
    page = page_for(rerater)
    page.goto(f"/revision/reratings/{first.pk}/")
    page.locator("body").click()
    page.keyboard.press("2")
    page.keyboard.press("c")
    page.keyboard.type("Half of it.")
    assert page.evaluate(DRAFTS)  # kept while it is written
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    assert page.url.endswith(f"/revision/reratings/{second.pk}/")
    assert page.evaluate(DRAFTS) == []

    page.locator("body").click()
    page.keyboard.press("3")
    page.fill("#comment", "   ")
    page.get_by_role("button", name="Save rating").click()
    page.get_by_text("a comment explaining the rating is required").wait_for()
    page.goto(f"/revision/reratings/{second.pk}/")
    assert page.is_checked("input[name=rating][value=bad]")  # refused: the draft is kept
    page.fill("#comment", "Worse.")
    with page.expect_navigation():
        page.get_by_role("button", name="Save rating").click()
    assert page.url.endswith("/revision/")  # the last one: back to the list of sessions
    assert page.evaluate(DRAFTS) == []
    second.refresh_from_db()
    assert (second.status, second.rating, second.comment) == ("done", "bad", "Worse.")


@pytest.mark.parametrize("width", [390, 800])
def test_each_rating_choice_stays_whole_and_the_page_fits(page_for, tmp_path, snap, width):
    """On a 390 px phone "2 neutral: partly" broke across two lines, its radio button left at
    the end of the line above its words; no choice breaks now, and the page never scrolls
    sideways."""
    rerater, (first, _) = _two_reratings(tmp_path)
    page = page_for(rerater, viewport={"width": width, "height": 800})
    page.goto(f"/revision/reratings/{first.pk}/")
    choices = page.locator("#rate-form fieldset label")
    assert choices.count() == 3
    for choice in choices.all():
        assert choice.evaluate("label => label.getClientRects().length") == 1, choice.inner_text()
    scrolled, window = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert scrolled <= window, scrolled
    snap(page, f"rating choices at {width} px")


def test_the_researcher_sees_how_many_turns_the_ticked_annotators_may_re_rate(
    page_for, tmp_path, snap
):
    """The page said "Turns left to send 2" while the only annotator ticked could re-rate none
    of them (both of their own session): it counts the turns eligible for those ticked."""
    rerater, (first, second) = _two_reratings(tmp_path)
    study = first.turn.session.study
    owner = first.turn.session.annotator
    # Counted (a decided kind), so its turns are left to send.
    Annotator.objects.update_or_create(user=owner, defaults={"name": "owner", "kind": "expert"})
    Rerating.objects.all().delete()
    page = page_for(UserFactory(username="rex", roles=[RESEARCHER]))
    page.goto(f"/revision/studies/{study.pk}/rerate/")
    assert page.locator("#rerate-left").inner_text() == "2"
    assert page.locator("#rerate-eligible").is_hidden()
    page.get_by_label("owner (").check()
    snap(page, "owner alone")
    assert page.locator("#rerate-eligible-term").inner_text() == (
        "Of them eligible for the chosen annotators (owner)"
    )
    assert page.locator("#rerate-eligible").inner_text() == "0"
    page.get_by_label("rerater (").check()
    assert page.locator("#rerate-chosen").inner_text() == "owner, rerater"
    assert page.locator("#rerate-eligible").inner_text() == "2"
    page.get_by_label("owner (").uncheck()
    assert page.locator("#rerate-eligible").inner_text() == "2"
    page.get_by_label("rerater (").uncheck()
    assert page.locator("#rerate-eligible").is_hidden()
