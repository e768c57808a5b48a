"""The embedded default (SQLite file, `manage.py runserver` with a thread per request) under
parallel annotators: no "database is locked", and one live claim per annotator and project."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.annotate.embedded_server import CSRF, EmbeddedServer
from tests.threads import at_once

PARALLEL = 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    embedded = EmbeddedServer(tmp_path_factory.mktemp("embedded"), users=PARALLEL + 1, tasks=8)
    yield embedded
    embedded.stop()


def in_parallel(work, count: int = PARALLEL) -> list:
    """Run work(i) in `count` threads released at the same moment; return their results."""
    return at_once(*(lambda index=index: work(index) for index in range(count)), timeout=120)


def test_twenty_parallel_claims_and_submits_all_succeed(server):
    clients = [server.client(session) for session in server.sessions[:PARALLEL]]
    claim_url = f"/api/annotate/projects/{server.project_id}/claim/"
    claims = in_parallel(lambda i: clients[i].post(claim_url))
    assert Counter(getattr(claim, "status_code", repr(claim)) for claim in claims) == {
        201: PARALLEL
    }, server.log()[-3000:]

    def submit(index: int):
        body = claims[index].json()
        answers = {name: "yes" for name in body["fields"]}
        url = f"/api/annotate/assignments/{body['assignment']}/submit/"
        return clients[index].post(url, json={"answers": answers})

    submits = in_parallel(submit)
    assert Counter(getattr(answer, "status_code", repr(answer)) for answer in submits) == {
        200: PARALLEL
    }, server.log()[-3000:]
    assert "database is locked" not in server.log()
    assert server.query("SELECT count(*) FROM annotate_assignment WHERE status = 'submitted'") == [
        (PARALLEL,)
    ]


def live_claims(server: EmbeddedServer, username: str) -> int:
    [(count,)] = server.query(
        "SELECT count(*) FROM annotate_assignment a "
        "JOIN annotate_annotator n ON n.id = a.annotator_id "
        "JOIN auth_user u ON u.id = n.user_id "
        "WHERE a.status = 'claimed' AND u.username = ?",
        username,
    )
    return count


def test_twenty_parallel_start_next_from_one_session_give_one_claim(server):
    session = server.sessions[PARALLEL]  # an annotator of their own
    clients = [server.client(session) for _ in range(PARALLEL)]
    page_url = f"/annotate/projects/{server.project_id}/next/"
    pages = in_parallel(lambda i: clients[i].post(page_url, data={"csrfmiddlewaretoken": CSRF}))
    assert {getattr(page, "status_code", repr(page)) for page in pages} == {302}, server.log()[
        -3000:
    ]
    assert len({page.headers["location"] for page in pages}) == 1
    assert live_claims(server, f"annotator{PARALLEL}") == 1

    api_url = f"/api/annotate/projects/{server.project_id}/claim/"
    answers = in_parallel(lambda i: clients[i].post(api_url))
    # The claim the page made is live: each answers it (200), none makes one (201).
    assert {getattr(answer, "status_code", repr(answer)) for answer in answers} == {200}
    assert len({answer.json()["assignment"] for answer in answers}) == 1
    assert live_claims(server, f"annotator{PARALLEL}") == 1
