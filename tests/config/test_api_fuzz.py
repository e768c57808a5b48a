"""Fuzz every operation of the OpenAPI schema (drf-spectacular) with schemathesis: never a 5xx.

Requests go to the WSGI application in-process, as an admin (HTTP Basic, which DRF accepts and
which needs no CSRF token), or as the annotator who holds the assignment for the annotator's
own endpoints (claim, assignment, submit, return), over the small site of tests/config/world.py so that low ids hit real
objects. Each operation gets FUZZ_EXAMPLES valid-looking cases with its path parameters set to
real ids (schemathesis' positive generation) and FUZZ_EXAMPLES malformed ones with everything
generated (negative generation); the environment variable raises it for a longer run.

schemathesis' own pytest plugin (`schema.parametrize()` over a fixture) does not run under
pytest 9, so the operations are walked here and each gets a Hypothesis test of its own.
"""

from __future__ import annotations

import base64
import os
from collections import Counter

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from config.wsgi import application
from tests.config.world import build_world

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))


def basic_auth(username: str) -> dict[str, str]:
    """Return the header for one of build_world's users (the factories' password is "pw")."""
    return {"Authorization": "Basic " + base64.b64encode(f"{username}:pw".encode()).decode()}


def auth_for(operation) -> dict[str, str]:
    annotators_own = operation.path.startswith("/api/annotate/assignments/") or (
        operation.path.endswith("/claim/")
    )
    return basic_auth("annotator-one" if annotators_own else "site-admin")


def real_ids(operation, world) -> dict[str, int]:
    """Return the world's ids for the operation's path parameters (crowd ones for crowd paths)."""
    ids = dict(world.ids)
    if operation.path.startswith("/api/crowd/"):
        ids["assignment_id"] = world.crowd_assignment.pk
    names = {parameter.name for parameter in operation.path_parameters}
    return {name: ids[name] for name in names if name in ids}


def takes_input(operation) -> bool:
    """Whether the operation has a path or query parameter or a body to send malformed."""
    return any(len(part) for part in (operation.path_parameters, operation.query, operation.body))


def fuzz(operation, strategy, statuses: Counter) -> None:
    """Send the operation up to FUZZ_EXAMPLES generated cases; fail on the first 5xx."""

    @given(case=strategy)
    @settings(
        max_examples=FUZZ_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case) -> None:
        response = case.call(headers=auth_for(operation))
        statuses[(operation.label, response.status_code)] += 1
        case.validate_response(response, checks=[not_a_server_error])

    run()


@pytest.fixture
def connections_kept_open():
    """Keep the test's database connection across requests, as django.test.Client does.

    The WSGI application closes the connection at the end of each request when it is not in
    autocommit mode, which on PostgreSQL would end the test's transaction after one request.
    """
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


def test_no_operation_answers_a_server_error(db, settings, tmp_path, capsys, connections_kept_open):
    settings.MEDIA_ROOT = tmp_path
    world = build_world()
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 7
    statuses: Counter = Counter()
    for operation in operations:
        positive = operation.as_strategy(
            generation_mode=schemathesis.GenerationMode.POSITIVE,
            path_parameters=real_ids(operation, world),
        )
        fuzz(operation, positive, statuses)
        if takes_input(operation):  # nothing else can be malformed (the auth header is ours)
            negative = operation.as_strategy(generation_mode=schemathesis.GenerationMode.NEGATIVE)
            fuzz(operation, negative, statuses)
    with capsys.disabled():
        examples = sum(statuses.values())
        print(f"\nschemathesis: {len(operations)} operations, {examples} requests")
        for (label, status), count in sorted(statuses.items()):
            print(f"  {label}: {status} × {count}")
    assert not any(status >= 500 for _, status in statuses)
