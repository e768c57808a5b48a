"""Every page runs under the one Content-Security-Policy of the site (django-csp) and still
works in Chromium: the browser reports no violation (an inline script or style, anything from
elsewhere), the page's own script and style sheet load, and the API docs render from our static
files. Add a page with a script or a widget of its own to CSP_PAGES."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

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


@pytest.mark.parametrize(
    "url_name, ready",
    [("api-docs", ".swagger-ui .opblock"), ("api-redoc", 'img[alt="redocly logo"]')],
)
def test_api_docs_load_everything_from_the_app(page_for, url_name, ready):
    """Every request of the API docs pages goes to the app, none fails, no CSP violation.

    ReDoc's sidebar once asked https://cdn.redoc.ly for its logo: blocked by the policy, it was a
    violation on every visit. The logo is ours now and loads.
    """
    page = page_for()
    page.add_init_script(WATCH_VIOLATIONS)
    requested, failed, console = [], [], []
    page.on("request", lambda request: requested.append(request.url))
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.on(
        "console",
        lambda message: console.append(message.text) if message.type == "error" else None,
    )
    response = page.goto(reverse(url_name))
    assert response is not None and response.status == 200
    page.wait_for_load_state("networkidle")
    assert page.evaluate("window.__cspViolations") == []
    assert console == []
    assert failed == []
    hosts = {urlsplit(url).hostname for url in requested if not url.startswith("data:")}
    assert hosts <= {"localhost", "127.0.0.1"}, requested
    page.locator(ready).first.wait_for()
    if url_name == "api-redoc":
        logo = page.locator(ready)
        assert urlsplit(logo.evaluate("img => img.src")).path == "/static/annotate/redoc-logo.svg"
        assert logo.evaluate("img => img.complete && img.naturalWidth > 0")
