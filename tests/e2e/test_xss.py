"""Markup in model output, instructions, questions and guidelines is inert in a real browser.

Every free-text field of the site (tests/config/world.py) holds PAYLOAD. Each page of XSS_PAGES
is opened in Chromium: no dialog may open, no element of the payload may exist in the DOM, its
scripts must not have run, and the payload must be visible as text. Add a page that shows
stored text to XSS_PAGES.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.urls import reverse

from tests.config.world import World, build_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PAYLOAD = (
    "<script>window.xss=1;alert(1)</script>"
    '<img src=x onerror="window.xss=2;alert(2)">'
    '"><svg onload="window.xss=3;alert(3)">'
)
# Anything the payload would add to the DOM if it were parsed as HTML.
INJECTED = "img[src='x'], [onerror], [onload], svg"


@dataclass(frozen=True)
class XssPage:
    name: str
    role: str  # a key of World.users; "anonymous" opens the page without logging in
    url: Callable[[World], str]


XSS_PAGES = [
    XssPage(
        "report of the benchmark",
        "researcher",
        lambda w: reverse("reports:detail", args=[w.ids["benchmark_id"]]),
    ),
    XssPage(
        "benchmark detail",
        "attached",
        lambda w: reverse("annotate:benchmark-detail", args=[w.ids["benchmark_id"]]),
    ),
    XssPage(
        "instruction detail",
        "attached",
        lambda w: reverse(
            "annotate:instruction-detail", args=[w.ids["benchmark_id"], w.ids["instruction_id"]]
        ),
    ),
    XssPage(
        "annotator task page",
        "owner",
        lambda w: reverse("work:assignment", args=[w.assignment.pk]),
    ),
    XssPage(
        "crowd worker task page",
        "anonymous",
        lambda w: reverse("crowd:work-task", args=[w.worker_token]),
    ),
    XssPage(
        "crowd HIT preview",
        "anonymous",
        lambda w: (
            reverse("crowd:mturk-task", args=[w.ids["hit_token"]])
            + "?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE"
        ),
    ),
    XssPage(
        "judge run detail",
        "attached",
        lambda w: reverse("judge:run-detail", args=[w.judge_run.pk]),
    ),
    XssPage(
        "researcher project page",
        "attached",
        lambda w: reverse("work:project-detail", args=[w.project.pk]),
    ),
    XssPage(
        "import detail",
        "attached",
        lambda w: reverse("annotate:import-detail", args=[w.import_job.pk]),
    ),
    XssPage("benchmark list", "attached", lambda w: reverse("annotate:benchmark-list")),
    XssPage("project list", "attached", lambda w: reverse("work:project-list")),
    XssPage("import list", "attached", lambda w: reverse("annotate:import-list")),
]


@pytest.fixture
def hostile_world(settings, tmp_path, live_server) -> World:
    settings.MEDIA_ROOT = tmp_path
    world = build_world(text=PAYLOAD)
    world.judge_run.conversations.update(status="failed", error=PAYLOAD)
    return world


@pytest.mark.parametrize("xss_page", XSS_PAGES, ids=lambda p: p.name)
def test_stored_markup_is_shown_as_text_and_never_runs(
    hostile_world, browser, page_for, live_server, xss_page
):
    user = hostile_world.users[xss_page.role]
    page = page_for() if user is None else page_for(user)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    response = page.goto(xss_page.url(hostile_world))
    assert response is not None and response.status == 200
    page.wait_for_load_state("load")
    assert dialogs == []
    assert page.evaluate("window.xss") is None
    assert page.locator(INJECTED).count() == 0
    assert PAYLOAD in page.locator("body").inner_text()
    if user is None:
        page.context.close()
