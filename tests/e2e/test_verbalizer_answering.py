"""A person answers verbalizer items in a real browser with keys 1 and 2; time is recorded."""

import pytest

from annotate.roles import ANNOTATOR
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.services.humans import human_study_create
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.verbalizer.helpers import fill
from tests.factories import UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_keys_1_and_2_answer_with_the_first_and_second_word(page_for):
    fill("Reviews", [True, False])
    evaluation_set = evaluation_set_create(
        name="e2e", datasets=["Reviews"], items=2, seed=1, mappings="flipped-golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="flip", answers_per_prompt=1)
    page = page_for(UserFactory(username="reader", roles=[ANNOTATOR]))

    page.goto(f"/verbalizer/work/{study.pk}/")
    first_text = page.locator("#prompt-text").inner_text()
    assert 'Answer "negative" if the sentiment of the text is "positive"' in first_text
    page.keyboard.press("1")
    # A locator wait, not wait_for_function: the site's CSP forbids the eval that one needs.
    page.locator("#progress", has_text="You answered 1 of 2.").wait_for()
    assert page.locator("#prompt-text").inner_text() != first_text
    page.wait_for_load_state()  # the key handler is a deferred script: a person never beats it
    page.keyboard.press("2")
    page.wait_for_selector("#all-done")

    answers = list(HumanAnswer.objects.order_by("pk").select_related("prompt"))
    assert [a.word for a in answers] == ["negative", "positive"]
    assert [a.prompt.text for a in answers][0] == first_text
    assert all(a.seconds is not None and 0 <= a.seconds < 60 for a in answers)


def test_a_second_answer_while_the_first_is_on_its_way_sends_nothing(page_for):
    """Word 1 clicked, then key 2 pressed before the next item came: the second send came back
    as an "answered already" page in place of the next item. The first answer stands."""
    fill("Reviews", [True, False])
    evaluation_set = evaluation_set_create(
        name="e2e-twice", datasets=["Reviews"], items=2, seed=1, mappings="golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="twice", answers_per_prompt=1)
    page = page_for(UserFactory(username="quick", roles=[ANNOTATOR]))
    page.goto(f"/verbalizer/work/{study.pk}/")
    page.wait_for_load_state()
    held = []
    page.route("**/verbalizer/work/*/answer/", lambda route: held.append(route))  # waits here
    page.locator("#key-1").click(no_wait_after=True)
    page.keyboard.press("2")
    page.wait_for_timeout(300)
    assert len(held) == 1  # the second was never sent
    page.unroute("**/verbalizer/work/*/answer/")
    held[0].continue_()
    page.locator("#progress", has_text="You answered 1 of 2.").wait_for()
    assert "answered already" not in page.content()
    answer = HumanAnswer.objects.get()
    assert answer.word == answer.prompt.positive_word


def test_the_time_recorded_runs_from_when_the_prompt_was_first_shown_across_a_reload(page_for):
    """A reload mid-way restarted the clock: the seconds recorded left out the time the prompt
    had been on screen before it. The first showing is kept in the tab (sessionStorage); here
    it is set two minutes back, as if the reader had looked at the prompt that long."""
    fill("Reviews", [True, False])
    evaluation_set = evaluation_set_create(
        name="e2e-time", datasets=["Reviews"], items=2, seed=1, mappings="golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="time", answers_per_prompt=1)
    reader = UserFactory(username="slow", roles=[ANNOTATOR])
    page = page_for(reader)
    page.goto(f"/verbalizer/work/{study.pk}/")
    page.wait_for_load_state()
    prompt_id = page.locator("input[name=prompt]").get_attribute("value")
    key = f"verbalizer-shown:{reader.pk}:{study.pk}:{prompt_id}"
    shown = page.evaluate("key => Number(sessionStorage.getItem(key))", key)
    assert shown > 0  # kept at the first showing
    page.evaluate("([key, at]) => sessionStorage.setItem(key, String(at))", [key, shown - 120_000])
    page.reload()
    page.wait_for_load_state()
    assert page.locator("input[name=prompt]").get_attribute("value") == prompt_id  # same prompt
    page.keyboard.press("1")
    page.locator("#progress", has_text="You answered 1 of 2.").wait_for()
    assert HumanAnswer.objects.get().seconds >= 120
    assert page.evaluate("key => sessionStorage.getItem(key)", key) is None  # dropped once sent


def test_a_slip_is_changed_from_the_next_page_and_the_change_counts_towards_no_time(page_for):
    """Key 1 pressed for key 2: "Change it" on the next prompt's page mends it. The minutes the
    next prompt stood on screen while the reader changed their last answer (here set two
    minutes back) are not counted towards it: its time starts afresh after the change."""
    fill("Reviews", [True, False])
    evaluation_set = evaluation_set_create(
        name="e2e-slip", datasets=["Reviews"], items=2, seed=1, mappings="golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="slip", answers_per_prompt=1)
    reader = UserFactory(username="slipper", roles=[ANNOTATOR])
    page = page_for(reader)
    page.goto(f"/verbalizer/work/{study.pk}/")
    page.wait_for_load_state()
    page.keyboard.press("1")
    page.locator("#progress", has_text="You answered 1 of 2.").wait_for()
    page.wait_for_load_state()
    slip = HumanAnswer.objects.get()
    change = page.locator("#change-answer")
    assert change.inner_text() == f"Change it to “{slip.prompt.negative_word}”"
    prompt_id = page.locator("#answer-form input[name=prompt]").get_attribute("value")
    key = f"verbalizer-shown:{reader.pk}:{study.pk}:{prompt_id}"
    shown = page.evaluate("key => Number(sessionStorage.getItem(key))", key)
    page.evaluate("([key, at]) => sessionStorage.setItem(key, String(at))", [key, shown - 120_000])
    change.click()
    page.locator(".messages", has_text="Changed: you answered").wait_for()
    page.wait_for_load_state()
    assert page.locator("#change-answer").count() == 0  # once
    page.keyboard.press("2")
    page.wait_for_selector("#all-done")
    slip.refresh_from_db()
    assert (slip.word, slip.changed_from) == (slip.prompt.negative_word, slip.prompt.positive_word)
    following = HumanAnswer.objects.exclude(pk=slip.pk).get()
    assert following.seconds is not None and following.seconds < 60
