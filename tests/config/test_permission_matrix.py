"""Who may open what: every URL of the URL conf × every role, against a table of expected answers.

The URL list is walked from the resolver, so a new URL without a line in RULES fails
test_every_url_has_a_rule. Roles: anonymous, "owner" (annotator one, who holds the assignment),
"other" (annotator two), "researcher" (not attached to the project), "attached" (a researcher
added to the project) and "admin". Crowd workers have no session: their pages take a signed token
in the URL and answer everyone who holds it (TOKEN_PAGE), and nobody who does not.

LOGIN in a rule means a redirect to the login page. Every 403 of a page (not an API) must be the
403 page in the site's layout (templates/403.html inside base.html), never a bare or DEBUG answer. For POST, every URL is sent an empty body as
every role: never a 5xx, and where the rule has a POST line, exactly that status; a POST refused
(4xx or LOGIN) writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from annotate.crowd.models import Bonus, Hit, Publication, WorkerBlock
from annotate.engine.models import EngineRun
from annotate.engine.services import engine_run_reopen, engine_run_stop
from annotate.models import Assignment, Batch, DirectScore, ImportJob, Label, Project
from evaluation.models import JudgeConfig, JudgeRun
from tests.config.world import ROLES, World, build_world
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

LOGIN = "login"
Statuses = tuple[int | str, int | str, int | str, int | str, int | str, int | str]


def by_role(anonymous, owner, other, researcher, attached, admin_) -> Statuses:
    """Return one expected answer per role, in the order of ROLES."""
    return (anonymous, owner, other, researcher, attached, admin_)


EVERYONE = by_role(200, 200, 200, 200, 200, 200)
LOGGED_IN = by_role(LOGIN, 200, 200, 200, 200, 200)
# A role error is the 403 page; "missing or not yours" (an object) stays 404.
ANNOTATORS = by_role(LOGIN, 200, 200, 403, 403, 403)
OWNER = by_role(LOGIN, 200, 404, 404, 404, 404)
RESEARCHERS = by_role(LOGIN, 403, 403, 200, 200, 200)
PROJECT_READERS = by_role(LOGIN, 404, 404, 404, 200, 200)
ADMINS = by_role(LOGIN, 403, 403, 403, 403, 200)
POST_ONLY = by_role(LOGIN, 405, 405, 405, 405, 405)
ADMIN_POST_ONLY = by_role(LOGIN, 403, 403, 403, 403, 405)
ADMIN_POST_REFUSED = by_role(LOGIN, 403, 403, 403, 403, 302)  # admins get the error as a message
# DRF: anonymous requests answer 401 with "WWW-Authenticate: Token" (knox, the first scheme).
API_RESEARCHERS = by_role(401, 404, 404, 200, 200, 200)
API_PROJECT_READERS = by_role(401, 404, 404, 404, 200, 200)
API_OWNER = by_role(401, 200, 404, 404, 404, 404)
API_POST_ONLY = by_role(401, 405, 405, 405, 405, 405)
API_ADMIN_POST_ONLY = by_role(401, 404, 404, 404, 404, 405)
TOKEN_PAGE = EVERYONE
TOKEN_GET_ONLY = by_role(405, 405, 405, 405, 405, 405)

# URL name (or route, for unnamed patterns) → (GET answers, POST-with-empty-body answers or None).
RULES: dict[str, tuple[Statuses, Statuses | None]] = {
    "home": (LOGGED_IN, None),
    "login": (EVERYONE, EVERYONE),  # an empty form is shown again with its errors
    # Each user's own API tokens; an empty POST names no action.
    "api-tokens": (LOGGED_IN, by_role(LOGIN, 400, 400, 400, 400, 400)),
    "logout": (by_role(405, 405, 405, 405, 405, 405), by_role(302, 302, 302, 302, 302, 302)),
    "health": (EVERYONE, by_role(405, 405, 405, 405, 405, 405)),
    "help": (LOGGED_IN, None),
    "help-page": (LOGGED_IN, None),
    # Logged in but not staff: the 403 page, not a second login form.
    "admin/login/": (by_role(302, 403, 403, 403, 403, 302), None),
    # The admin's own password change (it says when API tokens were revoked): staff only, the
    # others are sent to the admin login; an empty POST shows the form again with its errors.
    "admin/password_change/": (
        by_role(302, 302, 302, 302, 302, 200),
        by_role(302, 302, 302, 302, 302, 200),
    ),
    "api-schema": (EVERYONE, None),
    "api-docs": (EVERYONE, None),
    "api-redoc": (EVERYONE, None),
    "api-redoc-bundle": (EVERYONE, None),
    "favicon.ico": (by_role(301, 301, 301, 301, 301, 301), None),
    "annotate:benchmark-list": (RESEARCHERS, None),
    # An empty POST is an unbound form: the page again, nothing queued.
    "annotate:import-list": (RESEARCHERS, by_role(LOGIN, 403, 403, 200, 200, 200)),
    "annotate:import-detail": (RESEARCHERS, None),
    "annotate:benchmark-detail": (RESEARCHERS, None),
    "annotate:instruction-detail": (RESEARCHERS, None),
    "annotate:label-list": (RESEARCHERS, None),
    "work:dashboard": (ANNOTATORS, None),
    "work:project-done": (ANNOTATORS, None),
    # GET claims only with the token a submit signs (test_pages_work): without one, everyone
    # logged in is sent to the dashboard, whose own role check follows.
    "work:start-next": (
        by_role(LOGIN, 302, 302, 302, 302, 302),
        by_role(LOGIN, 302, 302, 403, 403, 403),
    ),
    "work:assignment": (OWNER, by_role(LOGIN, 400, 404, 404, 404, 404)),
    "work:assignment-return": (POST_ONLY, by_role(LOGIN, 302, 404, 404, 404, 404)),
    "work:project-list": (RESEARCHERS, None),
    "work:project-create": (ADMINS, by_role(LOGIN, 403, 403, 403, 403, 400)),
    "work:project-detail": (PROJECT_READERS, None),
    "work:batch-create": (POST_ONLY, ADMIN_POST_REFUSED),
    "work:labels-csv": (PROJECT_READERS, None),
    "crowd:mturk-task": (TOKEN_PAGE, by_role(405, 405, 405, 405, 405, 405)),
    "crowd:selfhosted-join": (TOKEN_PAGE, by_role(302, 302, 302, 302, 302, 302)),
    "crowd:work-task": (TOKEN_PAGE, by_role(400, 400, 400, 400, 400, 400)),
    # Self-hosted participants only: the world's token is a platform worker's (refused, 400).
    "crowd:work-return": (TOKEN_GET_ONLY, by_role(400, 400, 400, 400, 400, 400)),
    # The offline platform's externalSubmit: no assignment named, nothing to submit.
    "crowd:demo-external-submit": (TOKEN_GET_ONLY, by_role(404, 404, 404, 404, 404, 404)),
    # The world's publication is on the offline platform: the admin takes its HIT as a worker.
    "crowd:demo-worker": (ADMIN_POST_ONLY, by_role(LOGIN, 403, 403, 403, 403, 302)),
    "crowd:publish": (ADMINS, ADMINS),
    "crowd:publication-list": (ADMINS, None),
    "crowd:publication": (ADMINS, None),
    "crowd:publication-action": (ADMIN_POST_ONLY, ADMIN_POST_REFUSED),
    "crowd:review": (ADMINS, None),
    # An empty POST confirms no total: refused, as a message on the page.
    "crowd:replacements": (ADMINS, ADMIN_POST_REFUSED),
    # An empty POST names no addition nor outcome: refused, as a message on the page.
    "crowd:replacement-settle": (ADMIN_POST_ONLY, ADMIN_POST_REFUSED),
    # Admins: the sync runs and the review page says what changed (or why it could not).
    "crowd:review-sync": (ADMIN_POST_ONLY, ADMIN_POST_REFUSED),
    "crowd:assignment-action": (ADMIN_POST_ONLY, ADMIN_POST_REFUSED),
    "crowd:worker-action": (ADMIN_POST_ONLY, ADMIN_POST_REFUSED),
    "crowd:calls": (ADMINS, None),
    "crowd-api:preview": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 400)),
    "crowd-api:publish": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 400)),
    "crowd-api:publication": (by_role(401, 404, 404, 404, 404, 200), None),
    "crowd-api:sync": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 202)),
    "crowd-api:replacements": (
        by_role(401, 404, 404, 404, 404, 200),
        by_role(401, 404, 404, 404, 404, 400),
    ),
    # What the platform says each HIT still offers, and the cost: asked on a POST only.
    "crowd-api:replacements-check": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 200)),
    # The account balance, asked of the platform on a POST only (GETs show the last one).
    "crowd-api:balance": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 200)),
    # The additions of the publication in the URL (none): what is stored, no platform call.
    "crowd-api:additions": (by_role(401, 404, 404, 404, 404, 200), None),
    # An empty POST names no addition nor outcome: 400, nothing settled.
    "crowd-api:addition-settle": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 400)),
    # The publication in the URL has every HIT made: nothing to quote; no total sent: 400.
    "crowd-api:resume": (
        by_role(401, 404, 404, 404, 404, 200),
        by_role(401, 404, 404, 404, 404, 400),
    ),
    "crowd-api:review": (by_role(401, 404, 404, 404, 404, 200), None),
    # The publication in the URL is the MTurk-like one: it has no study link.
    "crowd-api:link": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 404)),
    # The assignment in the URL is an expert's, not a crowd worker's: there is nothing to pay.
    "crowd-api:approve": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 404)),
    "crowd-api:reject": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 400)),
    "crowd-api:bonus": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 404)),
    "crowd-api:block": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 400)),
    "crowd-api:unblock": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 200)),
    "crowd-api:notify": (API_ADMIN_POST_ONLY, by_role(401, 404, 404, 404, 404, 400)),
    "crowd-api:calls": (by_role(401, 404, 404, 404, 404, 200), None),
    "annotate-api:benchmark-list": (API_RESEARCHERS, None),
    # An empty POST sends no file: refused, nothing stored.
    "annotate-api:imports": (API_POST_ONLY, by_role(401, 404, 404, 400, 400, 400)),
    "annotate-api:import": (API_RESEARCHERS, None),
    "annotate-api:project-create": (API_POST_ONLY, by_role(401, 403, 403, 403, 403, 400)),
    "annotate-api:batch-create": (API_POST_ONLY, by_role(401, 403, 403, 403, 403, 400)),
    "annotate-api:project-progress": (API_PROJECT_READERS, None),
    "annotate-api:project-labels": (API_PROJECT_READERS, None),
    # The owner holds the world's live claim: asked again, it is answered (200), not made (201).
    "annotate-api:claim": (API_POST_ONLY, by_role(401, 200, 201, 404, 404, 404)),
    "annotate-api:assignment": (API_OWNER, None),
    "annotate-api:submit": (API_POST_ONLY, by_role(401, 400, 404, 404, 404, 404)),
    "annotate-api:return": (API_POST_ONLY, by_role(401, 200, 404, 404, 404, 404)),
    # An empty POST is an unbound form: the page again (400), nothing created.
    "judge:config-list": (RESEARCHERS, by_role(LOGIN, 403, 403, 400, 400, 400)),
    "judge:run-list": (RESEARCHERS, None),
    "judge:run-new": (RESEARCHERS, by_role(LOGIN, 403, 403, 400, 400, 400)),
    "judge:run-detail": (RESEARCHERS, None),
    "judge:run-resume": (POST_ONLY, by_role(LOGIN, 403, 403, 302, 302, 302)),
    "api-judge-run-progress": (API_RESEARCHERS, None),
    "api-judge-runs": (API_POST_ONLY, by_role(401, 404, 404, 400, 400, 400)),
    # The engine: endpoints are the admins'; runs are the researchers'. An empty POST is an
    # invalid form (400); the test connection of the world's fake endpoint answers offline; stop
    # and start of the world's run on the free fake endpoint are open to researchers.
    "engine:endpoint-list": (ADMINS, None),
    "engine:endpoint-new": (ADMINS, by_role(LOGIN, 403, 403, 403, 403, 400)),
    "engine:endpoint-edit": (ADMINS, by_role(LOGIN, 403, 403, 403, 403, 400)),
    "engine:endpoint-test": (POST_ONLY, by_role(LOGIN, 403, 403, 403, 403, 302)),
    "engine:run-list": (RESEARCHERS, None),
    "engine:run-detail": (RESEARCHERS, None),
    "engine:run-progress": (RESEARCHERS, None),
    "engine:run-stop": (POST_ONLY, by_role(LOGIN, 403, 403, 302, 302, 302)),
    "engine:run-resume": (POST_ONLY, by_role(LOGIN, 403, 403, 302, 302, 302)),
    "engine:generation-new": (RESEARCHERS, by_role(LOGIN, 403, 403, 400, 400, 400)),
    "api-engine-run": (API_RESEARCHERS, None),
    "api-engine-run-stop": (API_POST_ONLY, by_role(401, 404, 404, 200, 200, 200)),
    "api-engine-run-resume": (API_POST_ONLY, by_role(401, 404, 404, 202, 202, 202)),
    "api-engine-generation-runs": (API_POST_ONLY, by_role(401, 404, 404, 400, 400, 400)),
    # Creating an endpoint is the admins' (an empty POST: 400 naming its fields).
    "api-engine-endpoints": (API_POST_ONLY, by_role(401, 403, 403, 403, 403, 400)),
    "reports:list": (RESEARCHERS, None),
    "reports:detail": (RESEARCHERS, None),
    "reports:download": (RESEARCHERS, None),
    "reports:table": (RESEARCHERS, None),
    "reports:figure": (RESEARCHERS, None),
    "reports:aggregated-labels": (RESEARCHERS, None),
    # An empty POST asks for the default export; the task runs after the commit.
    "reports:export": (POST_ONLY, by_role(LOGIN, 403, 403, 302, 302, 302)),
    "api-report": (API_RESEARCHERS, None),
    "api-report-download": (API_RESEARCHERS, None),
    "api-report-figure": (API_RESEARCHERS, None),
    # An empty POST is an unbound form: the page again, nothing written.
    "verbalizer:overview": (RESEARCHERS, by_role(LOGIN, 403, 403, 400, 400, 400)),
    "verbalizer:set-detail": (RESEARCHERS, by_role(LOGIN, 403, 403, 200, 200, 200)),
    "verbalizer:set-prompts": (RESEARCHERS, by_role(LOGIN, 405, 405, 405, 405, 405)),
    # A study's progress and who answered: researchers only (annotators see their own work).
    "verbalizer:study-detail": (RESEARCHERS, by_role(LOGIN, 405, 405, 405, 405, 405)),
    "verbalizer:work-list": (ANNOTATORS, by_role(LOGIN, 405, 405, 405, 405, 405)),
    "verbalizer:work-next": (ANNOTATORS, by_role(LOGIN, 405, 405, 405, 405, 405)),
    "verbalizer:work-answer": (POST_ONLY, by_role(LOGIN, 400, 400, 403, 403, 403)),
    "verbalizer:work-answer-change": (POST_ONLY, by_role(LOGIN, 400, 400, 403, 403, 403)),
    # A human study on the crowd: admins publish and review; the world's tokens are a batch's
    # (HIT, link) or an InFoBench assignment's, so the study's worker pages know none of them.
    "verbalizer:study-publish": (ADMINS, ADMINS),
    "verbalizer:crowd-review": (ADMINS, None),
    "verbalizer:answer-action": (ADMIN_POST_ONLY, ADMIN_POST_REFUSED),
    # Nothing ticked: the page again with the refusal as a message.
    "verbalizer:crowd-review-approve": (ADMIN_POST_ONLY, ADMIN_POST_REFUSED),
    "verbalizer:crowd-mturk": (by_role(404, 404, 404, 404, 404, 404), TOKEN_GET_ONLY),
    "verbalizer:crowd-mturk-answer": (TOKEN_GET_ONLY, by_role(404, 404, 404, 404, 404, 404)),
    "verbalizer:crowd-link-join": (by_role(404, 404, 404, 404, 404, 404), None),
    "verbalizer:crowd-link-work": (by_role(404, 404, 404, 404, 404, 404), None),
    "verbalizer-reports:agreement-download": (RESEARCHERS, None),
    "verbalizer-reports:slices-download": (RESEARCHERS, None),
    "verbalizer-reports:human-answers": (RESEARCHERS, None),
    "verbalizer-reports:detail": (RESEARCHERS, None),
    "verbalizer-reports:download": (RESEARCHERS, None),
    "verbalizer-reports:figure": (RESEARCHERS, None),
    "verbalizer-reports:replies": (RESEARCHERS, None),
    "api-verbalizer-report": (API_RESEARCHERS, None),
    "api-verbalizer-report-download": (API_RESEARCHERS, None),
    "api-verbalizer-human-answers": (API_RESEARCHERS, None),
    "api-verbalizer-figure": (API_RESEARCHERS, None),
    "api-verbalizer-items": (API_POST_ONLY, by_role(401, 404, 404, 400, 400, 400)),
    "api-verbalizer-runs": (API_POST_ONLY, by_role(401, 404, 404, 400, 400, 400)),
    "revision:home": (ANNOTATORS, None),
    # An empty upload form is shown again with its error.
    "revision:upload": (RESEARCHERS, by_role(LOGIN, 403, 403, 400, 400, 400)),
    # The owner continues their session; the other annotator gets the free system.
    "revision:start": (POST_ONLY, by_role(LOGIN, 302, 302, 403, 403, 403)),
    "revision:session": (OWNER, by_role(LOGIN, 405, 405, 405, 405, 405)),
    "revision:session-state": (OWNER, by_role(LOGIN, 405, 405, 405, 405, 405)),
    # Any session, read only: researchers and admins; annotators (the owner too) get the 403
    # page and keep their own session's page above.
    "revision:session-read": (RESEARCHERS, by_role(LOGIN, 405, 405, 405, 405, 405)),
    "revision:turn-new": (POST_ONLY, by_role(LOGIN, 400, 404, 404, 404, 404)),
    # Nothing to rate or retry: the owner is sent back to the session with what was not done.
    "revision:turn-rate": (POST_ONLY, by_role(LOGIN, 302, 404, 404, 404, 404)),
    "revision:retry": (POST_ONLY, by_role(LOGIN, 302, 404, 404, 404, 404)),
    "revision:finish": (POST_ONLY, by_role(LOGIN, 302, 404, 404, 404, 404)),
    "revision:withdraw": (POST_ONLY, by_role(LOGIN, 302, 404, 404, 404, 404)),
    "revision:give-up": (POST_ONLY, by_role(LOGIN, 302, 404, 404, 404, 404)),
    # Researchers' action: the world's session is in progress, not given up, so the report
    # says it was not reopened (302, nothing changed); annotators get the 403 page.
    "revision:session-reopen": (POST_ONLY, by_role(LOGIN, 403, 403, 302, 302, 302)),
    "revision:rerating": (
        by_role(LOGIN, 404, 200, 404, 404, 404),
        by_role(LOGIN, 404, 400, 404, 404, 404),
    ),
    "revision-reports:list": (RESEARCHERS, None),
    "revision-reports:report": (RESEARCHERS, None),
    "revision-reports:download": (RESEARCHERS, None),
    "revision-reports:sessions-download": (RESEARCHERS, None),
    "revision-reports:figure": (RESEARCHERS, None),
    "api-revision-report": (API_RESEARCHERS, None),
    "api-revision-report-download": (API_RESEARCHERS, None),
    "api-revision-session-imports": (API_POST_ONLY, by_role(401, 404, 404, 400, 400, 400)),
    "api-revision-question-imports": (API_POST_ONLY, by_role(401, 404, 404, 400, 400, 400)),
    "api-revision-figure": (API_RESEARCHERS, None),
    # The researchers' KIWI actions answer a role error with the 403 page; an empty POST is an
    # invalid form (400), nothing sent or started.
    "revision:rerate": (RESEARCHERS, by_role(LOGIN, 403, 403, 400, 400, 400)),
    "revision-reports:judge-new": (RESEARCHERS, by_role(LOGIN, 403, 403, 400, 400, 400)),
    "api-revision-reratings": (API_POST_ONLY, by_role(401, 404, 404, 400, 400, 400)),
    "api-revision-judge-runs": (API_POST_ONLY, by_role(401, 404, 404, 400, 400, 400)),
    # An export is its requester's and the admins' (its raw labels name crowd workers as its
    # requester may see them); the world's has no requester left.
    "reports:export-status": (by_role(LOGIN, 403, 403, 404, 404, 200), None),
    "reports:export-download": (by_role(LOGIN, 403, 403, 404, 404, 404), None),  # not written
    "annotators:list": (RESEARCHERS, None),
    # An empty POST names no kind: the page again with the error as a message.
    "annotators:kind": (POST_ONLY, by_role(LOGIN, 403, 403, 302, 302, 302)),
    # The same for someone who has only KIWI work (no Annotator row yet).
    "annotators:user-kind": (POST_ONLY, by_role(LOGIN, 403, 403, 302, 302, 302)),
}
PARAMETER = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")


def url_patterns() -> Iterator[tuple[str, str]]:
    """Yield (rule key, route) for every pattern: "namespace:name" (the route if unnamed)."""

    def walk(patterns, prefix: str, namespace: str) -> Iterator[tuple[str, str]]:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                inner = ":".join(part for part in (namespace, pattern.namespace or "") if part)
                yield from walk(pattern.url_patterns, route, inner)
            elif isinstance(pattern, URLPattern):
                name = pattern.name or route
                yield (f"{namespace}:{name}" if namespace else name), route

    yield from walk(get_resolver().url_patterns, "", "")


def site_patterns() -> list[tuple[str, str]]:
    """Return every pattern but the Django admin's, which test_admin_is_for_staff_only covers."""
    return [(key, route) for key, route in url_patterns() if not key.startswith("admin:")]


def concrete_url(route: str, ids: dict) -> str:
    def fill(match: re.Match) -> str:
        name = match.group("name")
        assert name in ids, f"No object for URL parameter <{name}>: add it to tests/config/world.py"
        return str(ids[name])

    return "/" + PARAMETER.sub(fill, route)


def request_as(world: World, role: str, method: str, url: str):
    client = Client()
    user = world.users[role]
    if user is not None:
        client.force_login(user)
    return getattr(client, method)(url)


def is_api(key: str) -> bool:
    """API URLs ("crowd-api:…", "api-report", …) answer role errors as JSON, not as a page."""
    return "api" in key.split(":")[0].split("-")


def layout_problem(key: str, response) -> str | None:
    """Return why a page's 403 is not the 403 page in the site's layout, or None."""
    if response.status_code != 403 or is_api(key):
        return None
    templates = {t.name for t in getattr(response, "templates", []) or []}
    if not {"403.html", "base.html"} <= templates:
        return f"403 without the layout (templates {sorted(templates)})"
    text = response.content.decode()
    if "This page is not for your role" not in text or 'id="main"' not in text:
        return "403 page without its heading or the layout's main landmark"
    return None


def answer_of(response) -> int | str:
    """Return the status, or LOGIN for a redirect to the login page."""
    if response.status_code == 302 and response["Location"].startswith(reverse("login") + "?"):
        return LOGIN
    return response.status_code


def written(world: World) -> tuple:
    """Return what a refused request must leave unchanged: row counts and assignment states."""
    counts = tuple(
        model.objects.count()
        for model in (
            Project,
            Batch,
            Assignment,
            Label,
            DirectScore,
            ImportJob,
            Publication,
            Hit,
            Bonus,
            WorkerBlock,
            JudgeConfig,
            JudgeRun,
        )
    )
    states = tuple(Assignment.objects.order_by("pk").values_list("pk", "status", "submitted_at"))
    return counts, states


@pytest.fixture
def world(settings, tmp_path) -> World:
    settings.MEDIA_ROOT = tmp_path
    return build_world()


def test_every_url_has_a_rule():
    missing = sorted({key for key, _ in site_patterns()} - set(RULES))
    assert not missing, (
        f"URLs without an access rule: {missing}. Add each to RULES in "
        "tests/config/test_permission_matrix.py with the answer every role should get."
    )
    stale = sorted(set(RULES) - {key for key, _ in site_patterns()})
    assert not stale, f"Rules for URLs that no longer exist: {stale}"


def test_get_answers_match_the_rules(world):
    mismatches = []
    for key, route in site_patterns():
        if key not in RULES:
            continue
        url = concrete_url(route, world.ids)
        for role, expected in zip(ROLES, RULES[key][0], strict=True):
            response = request_as(world, role, "get", url)
            got = answer_of(response)
            if got != expected:
                mismatches.append(f"GET {url} ({key}) as {role}: expected {expected}, got {got}")
            if problem := layout_problem(key, response):
                mismatches.append(f"GET {url} ({key}) as {role}: {problem}")
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.parametrize("key", sorted(RULES))
def test_empty_posts_are_refused_or_harmless_and_never_a_server_error(world, key):
    """Each URL gets a fresh site: one role's accepted POST must not change the next one's."""
    routes = dict(site_patterns())
    if key not in routes:
        pytest.skip(f"{key} is no longer in the URL conf (test_every_url_has_a_rule says so)")
    url = concrete_url(routes[key], world.ids)
    mismatches = []
    for role, expected in zip(ROLES, RULES[key][1] or (None,) * len(ROLES), strict=True):
        before = written(world)
        response = request_as(world, role, "post", url)
        got = answer_of(response)
        where = f"POST {url} ({key}) as {role}"
        if problem := layout_problem(key, response):
            mismatches.append(f"{where}: {problem}")
        if got != LOGIN and got >= 500:
            mismatches.append(f"{where}: server error {got}")
        elif expected is not None and got != expected:
            mismatches.append(f"{where}: expected {expected}, got {got}")
        if (got == LOGIN or 400 <= got < 500) and written(world) != before:
            mismatches.append(f"{where}: refused with {got} but wrote rows")
        if key in STARTS_THE_RUN and got != LOGIN and got < 400:
            # A started run refuses a second start until its first ends: the next role
            # meets it stopped, as the first did.
            engine_run_stop(run=EngineRun.objects.get(pk=world.ids["engine_run_id"]))
        if key in STOPS_THE_RUN and got != LOGIN and got < 400:
            # A stopped run refuses a second stop (it has ended): the next role meets it
            # pending again, as the first did.
            engine_run_reopen(run=EngineRun.objects.get(pk=world.ids["engine_run_id"]))
    assert not mismatches, "\n".join(mismatches)


STARTS_THE_RUN = {"engine:run-resume", "api-engine-run-resume", "judge:run-resume"}
STOPS_THE_RUN = {"engine:run-stop", "api-engine-run-stop"}


@pytest.mark.parametrize("kind", ["work-task", "mturk-task", "selfhosted-join"])
def test_forged_or_tampered_worker_tokens_are_404(world, client, kind):
    token = {
        "work-task": world.worker_token,
        "mturk-task": world.ids["hit_token"],
        "selfhosted-join": world.ids["link_token"],
    }[kind]
    before = written(world)
    for bad in ("forged", token[:-1] + ("A" if token[-1] != "A" else "B"), token + "x"):
        url = reverse(f"crowd:{kind}", args=[bad])
        assert client.get(url).status_code == 404, url
        assert client.post(url, {"r1_q1": "yes"}).status_code in (404, 405), url
    assert written(world) == before


def admin_sample() -> list[str]:
    """Return the admin index and each registered model's changelist."""
    changelists = [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in admin.site._registry
    ]
    return [reverse("admin:index"), *changelists]


def test_admin_is_for_staff_only(world):
    """Anonymous and non-staff users are sent to log in. The admin role's users are staff but
    hold no model permission: they see the index and get 403 on changelists; superusers get all.
    """
    superuser = UserFactory(username="root-user", is_staff=True, is_superuser=True)
    sample = admin_sample()
    assert len(sample) > 10
    mismatches = []
    for url in sample:
        for role in (*ROLES, "superuser"):
            client = Client()
            user = superuser if role == "superuser" else world.users[role]
            if user is not None:
                client.force_login(user)
            response = client.get(url)
            if role == "superuser" or (role == "admin" and url == sample[0]):
                expected = 200
            else:
                expected = 403 if role == "admin" else 302
            location = response.get("Location", "")
            if response.status_code != expected or (expected == 302 and "login" not in location):
                mismatches.append(f"GET {url} as {role}: {response.status_code} {location}")
    assert not mismatches, "\n".join(mismatches)


def test_a_bare_403_fails_the_layout_check(world):
    from django.http import HttpResponseForbidden

    assert layout_problem("revision:home", HttpResponseForbidden("no")) is not None
    assert layout_problem("api-report", HttpResponseForbidden("no")) is None
    page = request_as(world, "researcher", "get", reverse("revision:home"))
    assert page.status_code == 403 and layout_problem("revision:home", page) is None
    assert "Only annotators have revision sessions." in page.content.decode()
