"""Every page runs under the one Content-Security-Policy of the site (django-csp) and still
works in Chromium: the browser reports no violation (an inline script or style, anything from
elsewhere), the page's own script and style sheet load, and the API docs render from our static
files. Add a page with a script or a widget of its own to CSP_PAGES."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from tests.config.world import World, build_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Recorded before any page script runs: every violation the browser reports.
WATCH_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (event) {
  window.__cspViolations.push(event.violatedDirective + " " + (event.blockedURI || "inline"));
});
"""


@dataclass(frozen=True)
class CspPage:
    name: str
    role: str  # a key of World.users, "superuser", or "anonymous"
    url: Callable[[World], str]
    ready: str = "body"  # an element that shows the page's script has done its work


CSP_PAGES = [
    CspPage("login", "anonymous", lambda w: reverse("login")),
    CspPage(
        "annotator task page",
        "owner",
        lambda w: reverse("work:assignment", args=[w.assignment.pk]),
        ready="#answered-count",
    ),
    CspPage(
        "crowd worker task page",
        "anonymous",
        lambda w: reverse("crowd:work-task", args=[w.worker_token]),
    ),
    CspPage(
        "crowd HIT preview",
        "anonymous",
        lambda w: (
            reverse("crowd:mturk-task", args=[w.ids["hit_token"]])
            + "?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE"
        ),
    ),
    CspPage(
        "crowd self-hosted join page",
        "anonymous",
        lambda w: reverse("crowd:selfhosted-join", args=[w.ids["link_token"]]),
    ),
    CspPage(
        "crowd publish page", "admin", lambda w: reverse("crowd:publish", args=[w.ids["batch_id"]])
    ),
    CspPage(
        "crowd review page",
        "admin",
        lambda w: reverse("crowd:review", args=[w.ids["publication_id"]]),
    ),
    CspPage(
        "crowd replacements page",
        "admin",
        lambda w: reverse("crowd:replacements", args=[w.ids["publication_id"]]),
    ),
    CspPage(
        "report", "researcher", lambda w: reverse("reports:detail", args=[w.ids["benchmark_id"]])
    ),
    CspPage("judge run", "attached", lambda w: reverse("judge:run-detail", args=[w.judge_run.pk])),
    CspPage("admin index", "superuser", lambda w: "/admin/"),
    CspPage("admin judge form", "superuser", lambda w: "/admin/evaluation/judgeconfig/add/"),
    CspPage("admin user list", "superuser", lambda w: "/admin/auth/user/"),
    CspPage("API docs", "researcher", lambda w: reverse("api-docs"), ready=".swagger-ui .opblock"),
]


@pytest.fixture
def world(settings, tmp_path, live_server) -> World:
    settings.MEDIA_ROOT = tmp_path
    world = build_world()
    world.users["superuser"] = get_user_model().objects.create_superuser(
        "root", "root@example.org", "pw"
    )
    return world


@pytest.mark.parametrize("csp_page", CSP_PAGES, ids=lambda p: p.name)
def test_pages_work_under_the_content_security_policy(
    world, browser, page_for, live_server, csp_page
):
    user = world.users[csp_page.role]
    if user is None:
        page = browser.new_context(base_url=live_server.url).new_page()
    else:
        page = page_for(user)
    page.add_init_script(WATCH_VIOLATIONS)
    console, elsewhere = [], []
    page.on("console", lambda message: console.append(message.text))
    page.on(
        "request",
        lambda request: (
            None
            if request.url.startswith((live_server.url, "data:"))
            else elsewhere.append(request.url)
        ),
    )
    response = page.goto(csp_page.url(world))
    assert response is not None and response.status == 200
    assert "default-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_load_state("load")
    page.locator(csp_page.ready).first.wait_for(state="attached")
    assert page.evaluate("window.__cspViolations") == []
    assert not [text for text in console if "Content Security Policy" in text]
    assert page.evaluate("document.styleSheets.length") >= 1
    assert elsewhere == []  # nothing from a CDN
    if user is None:
        page.context.close()
