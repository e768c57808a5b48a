"""The SQL of one task page view and one submit, as Django sends it at CONN_MAX_AGE=0, written
as pgbench scripts, with the tables and indexes they open (issue 17, docs/benchmarks.md,
"Relations per request").

    .venv/bin/python tests/bench/hot_path_sql.py fill /tmp/hot-sql       # database + targets
    .venv/bin/python tests/bench/hot_path_sql.py capture /tmp/hot-sql    # page.sql, submit.sql
    pgbench -n -C -c1 -T5 -f /tmp/hot-sql/page.sql perf_sql              # a new connection each

`fill` recreates the database (HOT_SQL_DATABASE_URL, default
postgres://root@127.0.0.1:5432/perf_sql) with `bench_peer_turkle.py`'s data (500 tasks of 6
questions x 5 systems) and writes its request files into the folder. `capture` replays the
second page target and the first submit target through Django's test client and writes what
they sent: page.sql as sent, submit.sql with ROLLBACK for COMMIT (so pgbench can repeat it;
the captured submit itself is undone afterwards), submit_checked.sql the same with
`SET CONSTRAINTS ALL IMMEDIATE` after BEGIN (the foreign-key checks Django defers to COMMIT,
which a rolled-back submit.sql never runs: one per label row and key), and prints the
relations each opens (its statements in one transaction, then its rows of pg_locks). Run
`capture` from another checkout (e.g. a `git archive` of the commit before a change, with this
file copied in) against the same database for old against new; the database stays until you
drop it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgres://root@127.0.0.1:5432/perf_sql"

OPENED = """SELECT DISTINCT c.relkind, c.relname FROM pg_locks l
    JOIN pg_class c ON c.oid = l.relation
    WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation'
        AND c.relnamespace = 'public'::regnamespace"""


def settings_env(url: str) -> dict[str, str]:
    return {
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DJANGO_DEBUG": "false",
        "DATABASE_CONN_MAX_AGE": "0",
        "LOG_LEVEL": "WARNING",
        # One key for fill and capture, whichever checkout runs them (each has its own under
        # var/): the sessions written by fill must read back.
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY", "hot-path-sql-bench-only-key"),
        "BENCH_TARGETS_PER_CONFIG": os.environ.get("BENCH_TARGETS_PER_CONFIG", "300"),
    }


def fill(url: str, folder: Path) -> None:
    from tests.bench import bench_peer_turkle as peer
    from tests.bench.harness import recreate_database, setup_django

    recreate_database(url)
    setup_django(settings_env(url))
    (folder / "ids.json").write_text(json.dumps(peer.app_fill(folder)))


def capture(url: str, folder: Path) -> None:
    os.environ.update(settings_env(url))
    import django

    django.setup()
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from tests.bench.bench_peer_turkle import CSRF_SECRET

    def target(name: str, index: int) -> tuple[Client, list[str]]:
        fields = (folder / name).read_text().splitlines()[index].split("\t")
        client = Client()
        client.cookies["sessionid"] = fields[2].split(";")[0].split("=")[1]
        client.cookies["csrftoken"] = CSRF_SECRET
        return client, fields

    client, (_, path, _) = target("pages.txt", 1)
    client.get(path)  # the first view of a process warms its caches up
    with CaptureQueriesContext(connection) as page:
        assert client.get(path).status_code == 200
    client, (_, path, _, body) = target("submits_0.txt", 0)
    with CaptureQueriesContext(connection) as submit:
        answer = client.post(path, body, content_type="application/x-www-form-urlencoded")
        assert answer.status_code == 302, answer.status_code
    _undo_submit(connection, int(path.rstrip("/").split("/")[-1]))
    scripts = {
        "page": [query["sql"] for query in page.captured_queries],
        "submit": [
            "ROLLBACK" if query["sql"] == "COMMIT" else query["sql"]
            for query in submit.captured_queries
        ],
    }
    begin = scripts["submit"].index("BEGIN")
    scripts["submit_checked"] = [
        *scripts["submit"][: begin + 1],
        "SET CONSTRAINTS ALL IMMEDIATE",
        *scripts["submit"][begin + 1 :],
    ]
    for name, statements in scripts.items():
        (folder / f"{name}.sql").write_text("".join(f"{sql.strip()};\n" for sql in statements))
        tables, indexes = _opened(connection, statements)
        print(f"{name}: {len(statements)} statements, {tables} tables, {indexes} indexes")


def _undo_submit(connection, assignment_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM annotate_label WHERE assignment_id = %s", [assignment_id])
        cursor.execute(
            "UPDATE annotate_assignment SET status = 'claimed', submitted_at = NULL, "
            "submission = NULL, is_late = false, active_seconds = 0 WHERE id = %s",
            [assignment_id],
        )


def _opened(connection, statements: list[str]) -> tuple[int, int]:
    """Run the statements in one transaction, rolled back; count the relations they locked."""
    inner = [sql for sql in statements if sql not in ("BEGIN", "COMMIT", "ROLLBACK")]
    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
        try:
            for sql in inner:
                cursor.execute(sql)
            cursor.execute(OPENED)
            kinds = [kind for kind, _ in cursor.fetchall()]
        finally:
            cursor.execute("ROLLBACK")
    return kinds.count("r"), kinds.count("i")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("fill", "capture"):
        raise SystemExit(__doc__)
    os.chdir(ROOT)
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    database = os.environ.get("HOT_SQL_DATABASE_URL", DEFAULT_URL)
    (fill if sys.argv[1] == "fill" else capture)(database, out)
