"""Drafts on a shared computer (static/annotate/storage.js, logout.js): kept per user, so the next
person of the same browser never sees them; log-out drops them when nothing unsent would be lost,
and asks (discard, keep, stay) when some are unsent."""

from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.test import Client

from annotate.models import Assignment
from annotate.roles import ANNOTATOR
from tests.e2e.test_annotator_task import start_next_task_with_keyboard
from tests.factories import UserFactory, project_with_tasks

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RAW_KEYS = "() => Object.keys(window.localStorage).sort()"
CHECKED = "fieldset.answer input[type=radio]:checked"


def log_in(page, user) -> None:
    """Log `user` in, in the page's own browser (the cookies of whoever used it before gone)."""
    client = Client()
    client.force_login(user)
    page.context.clear_cookies()
    page.context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": "{0.scheme}://{0.netloc}/".format(urlsplit(page.url)),
            }
        ]
    )


def own_keys(page, user) -> list[str]:
    return [key for key in page.evaluate(RAW_KEYS) if key.startswith(f"u{user.pk}:")]


def test_a_draft_is_its_users_only_and_log_out_asks_to_keep_or_discard_it(page_for, snap):
    project_with_tasks(instructions=2, systems=2, questions=2)
    first = UserFactory(username="first-at-the-desk", roles=[ANNOTATOR])
    second = UserFactory(username="second-at-the-desk", roles=[ANNOTATOR])
    page = page_for(first)
    start_next_task_with_keyboard(page)
    task_url = page.url
    page.keyboard.press("y")  # one answer, not sent
    assert page.evaluate("window.draftStorage.unsent()") == 1

    # Log out asks; "Stay" keeps the user on the page with the answer.
    page.get_by_role("button", name="Log out").click()
    dialog = page.locator("#logout-drafts")
    dialog.wait_for()
    snap(page, "log-out-asks")
    # One draft is not "They": the sentence after the count holds for one or many.
    assert "You have 1 draft not sent yet in this browser. Drafts are kept" in dialog.inner_text()
    page.get_by_role("button", name="Stay to send them").click()
    assert not dialog.is_visible() and page.url == task_url
    assert page.locator(CHECKED).count() == 1

    # Kept: the user is logged out and the draft stays, under this user's key only.
    page.get_by_role("button", name="Log out").click()
    with page.expect_navigation():
        page.get_by_role("button", name="Keep them and log out").click()
    page.wait_for_url("**/accounts/login/**")
    assert own_keys(page, first)

    # The next person of this browser sees none of it, and their log-out leaves it alone.
    log_in(page, second)
    page.goto("/annotate/")
    assert page.locator(".who").inner_text() == "second-at-the-desk"
    assert page.evaluate("window.draftStorage.keys('')") == []
    assert page.evaluate("window.draftStorage.unsent()") == 0
    start_next_task_with_keyboard(page)
    assert page.url != task_url and page.locator(CHECKED).count() == 0
    page.get_by_role("button", name="Log out").click()  # nothing unsent: out at once
    page.wait_for_url("**/accounts/login/**")
    assert own_keys(page, first) and not own_keys(page, second)

    # Back at the desk, the first user finds the answer; discarded, nothing of theirs is left.
    log_in(page, first)
    page.goto(task_url)
    assert page.locator(CHECKED).count() == 1
    page.get_by_role("button", name="Log out").click()
    with page.expect_navigation():
        page.get_by_role("button", name="Discard them and log out").click()
    page.wait_for_url("**/accounts/login/**")
    assert own_keys(page, first) == []
    assert Assignment.objects.filter(annotator__user=first).count() == 1  # nothing was sent


def test_drafts_from_before_they_were_per_user_go_to_their_works_page_only(page_for):
    """A draft kept without a user's prefix (before drafts were per user) is named by its
    task's address, whose page only the one who holds the task is served: that page takes it
    over (the unsent answer is back, under its user's key), where it was dropped unread, so an
    upgrade lost every unsent answer. Another user's old draft is listed and counted nowhere."""
    project_with_tasks(instructions=2, systems=2, questions=2)
    user = UserFactory(username="after-the-upgrade", roles=[ANNOTATOR])
    page = page_for(user)
    start_next_task_with_keyboard(page)
    task_url = page.url
    path = page.locator("#task-form").get_attribute("action") or urlsplit(task_url).path
    page.keyboard.press("y")
    mine = f"task-draft-{path}#questions"
    page.goto("/annotate/")  # the task page saves its draft as it goes
    draft = page.evaluate(f"window.localStorage.getItem('u{user.pk}:{mine}')")
    assert draft and '"answers"' in draft
    # As a browser kept it before the change: no prefix; and someone else's old draft beside it.
    page.evaluate(f"window.localStorage.removeItem('u{user.pk}:{mine}')")
    page.evaluate(f"window.localStorage.setItem({mine!r}, {draft!r})")
    others = "task-draft-/annotate/assignments/999999/#questions"
    page.evaluate(f"window.localStorage.setItem({others!r}, {draft!r})")
    page.reload()
    assert page.evaluate("window.draftStorage.keys('')") == []
    assert page.evaluate("window.draftStorage.unsent()") == 0
    page.goto(task_url)
    assert page.locator(CHECKED).count() == 1  # the unsent answer is back
    keys = page.evaluate(RAW_KEYS)
    assert f"u{user.pk}:{mine}" in keys and mine not in keys
    assert others in keys and f"u{user.pk}:{others}" not in keys  # never read


def test_a_revision_forms_unsent_text_is_asked_about_and_a_sent_one_is_not(
    page_for, settings, tmp_path
):
    """Each form's step counts once (its texts and choices together); a step the annotator sent
    leaves nothing to ask about, so log-out then goes at once and leaves nothing behind."""
    from tests.e2e.test_revision_session import start_session

    page, user = start_session(
        page_for, settings, tmp_path, study="e2e-logout", system="m", user="e2e-leaver"
    )
    page.fill("#instruction", "Shorter.")
    page.check("input[value=stylistic]")
    assert page.evaluate("window.draftStorage.unsent()") == 1
    page.get_by_role("button", name="Send instruction").click()
    page.locator("#rate-form").wait_for()
    page.wait_for_load_state()
    assert page.evaluate("window.draftStorage.unsent()") == 0  # sent: nothing to lose
    page.fill("#comment", "Not shorter.")
    page.get_by_role("button", name="Log out").click()
    page.locator("#logout-drafts").wait_for()
    assert "You have 1 draft not sent yet" in page.locator("#logout-drafts").inner_text()
    page.keyboard.press("3")  # the question has the keys: no rating is chosen behind it
    assert not page.is_checked("input[name=rating][value=bad]")
    page.get_by_role("button", name="Stay to send them").click()
    page.check("input[name=rating][value=bad]")
    with page.expect_navigation():
        page.get_by_role("button", name="Save rating").click()
    page.wait_for_load_state()
    page.get_by_role("button", name="Log out").click()  # nothing unsent: out at once
    page.wait_for_url("**/accounts/login/**")
    assert own_keys(page, user) == []
