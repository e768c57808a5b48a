"""The annotator's hot-path statements run prepared on PostgreSQL (annotate.compiled.prepared_cursor).

What a user sees must not change: the task page, the claim and the submit give the same pages
and store the same rows with prepared statements as without, and the query log still shows
each statement with its values.
"""

import re

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from django.urls import reverse

from annotate.compiled import prepared_cursor
from annotate.models import Assignment, Label
from tests.factories import project_with_tasks

pytestmark = pytest.mark.django_db

on_postgresql = pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"), reason="PostgreSQL only"
)


@pytest.fixture(autouse=True)
def kept_connections(monkeypatch):
    """Connections kept between requests, as in production (prepared statements need them)."""
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)


def _prepared(fragment: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            [f"%{fragment}%"],
        )
        return cursor.fetchone()[0]


def _without_csrf(html: str) -> str:
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)


def _work_through(client, project) -> tuple[str, str]:
    """Claim a task, view it, submit it and open the next one; return both task pages."""
    started = client.post(reverse("work:start-next", args=[project.id]))
    page = client.get(started["Location"])
    assert page.status_code == 200
    assignment = Assignment.objects.get(pk=int(started["Location"].rstrip("/").split("/")[-1]))
    answers = {f"r{n}_q{m}": "yes" if (n + m) % 2 else "no" for n in (1, 2, 3) for m in (1, 2)}
    submitted = client.post(reverse("work:assignment", args=[assignment.id]), answers)
    following = client.get(submitted["Location"])
    assert following.status_code == 200
    return _without_csrf(page.text), _without_csrf(following.text)


@on_postgresql
def test_the_hot_path_runs_prepared_and_shows_and_stores_what_it_did_unprepared(
    client, annotator_user, django_user_model
):
    # Two projects over the same kind of tasks, one worked with prepared statements and one
    # without, by the same annotator: the pages and stored labels must match.
    prepared_project = project_with_tasks(instructions=3, systems=3, questions=2)
    plain_project = project_with_tasks(instructions=3, systems=3, questions=2)
    client.force_login(annotator_user)
    prepared_pages = _work_through(client, prepared_project)
    # "task N of M" (the claimable count) and the page's assignment read were prepared.
    assert _prepared("annotate_taskslots") >= 1
    assert _prepared("annotate_instruction") >= 1
    with override_settings(DATABASE_PREPARED_STATEMENTS=False):
        plain_pages = _work_through(client, plain_project)

    for prepared, plain in zip(prepared_pages, plain_pages, strict=True):
        # The same page but for the project's own ids and texts.
        assert re.findall(r"task \d+ of \d+", prepared) == re.findall(r"task \d+ of \d+", plain)
        assert prepared.count('type="radio"') == plain.count('type="radio"') == 3 * 2 * 3
    assert "task 1 of 3" in prepared_pages[0] and "task 2 of 3" in prepared_pages[1]
    for project in (prepared_project, plain_project):
        labels = Label.objects.filter(assignment__task__batch__project=project)
        assert labels.count() == 3 * 2


@on_postgresql
def test_turned_off_nothing_is_prepared(client, annotator_user):
    project = project_with_tasks(instructions=2, systems=2, questions=1)
    client.force_login(annotator_user)
    with override_settings(DATABASE_PREPARED_STATEMENTS=False):
        with prepared_cursor(connection) as cursor:
            cursor.execute("SELECT %s + 40 /* turned off */", [2])
            assert cursor.fetchone() == (42,)
        client.post(reverse("work:start-next", args=[project.id]))
    assert _prepared("turned off") == 0


@on_postgresql
def test_with_a_connection_per_request_nothing_is_prepared(client, annotator_user, monkeypatch):
    # Each statement would run once on its connection: preparing it only adds a round trip.
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    project = project_with_tasks(instructions=2, systems=2, questions=1)
    client.force_login(annotator_user)
    with prepared_cursor(connection) as cursor:
        cursor.execute("SELECT %s + 40 /* one connection a request */", [2])
        assert cursor.fetchone() == (42,)
    started = client.post(reverse("work:start-next", args=[project.id]))
    assert client.get(started["Location"]).status_code == 200
    assert _prepared("one connection a request") == 0


@on_postgresql
def test_a_prepared_statement_is_logged_with_its_values(client, annotator_user):
    project = project_with_tasks(instructions=2, systems=2, questions=1)
    client.force_login(annotator_user)
    started = client.post(reverse("work:start-next", args=[project.id]))
    client.get(started["Location"])  # prepared by now
    with CaptureQueriesContext(connection) as captured:
        client.get(started["Location"])
    standing = [q["sql"] for q in captured.captured_queries if "annotate_taskslots" in q["sql"]]
    assert len(standing) == 1
    annotator_id = Assignment.objects.get(annotator__user=annotator_user).annotator_id
    assert f"w.annotator_id = {annotator_id}" in standing[0]
    assert "%s" not in standing[0] and "$1" not in standing[0]


def test_elsewhere_it_is_djangos_own_cursor():
    with prepared_cursor(connection) as cursor:
        cursor.execute("SELECT %s + 40", [2])
        assert cursor.fetchone() == (42,)
    if connection.vendor != "postgresql":
        with prepared_cursor(connection) as cursor, connection.cursor() as plain:
            assert type(cursor.cursor) is type(plain.cursor)
