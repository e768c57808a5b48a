"""CPU per view of the annotator's pages on the demo data: the InFoBench task page against the
pages added since (KIWI revision session, verbalizer human answer), issue 17.

    .venv/bin/python tests/bench/bench_pages_cpu.py [--views 200]
    BENCH_BASE_DIR=/tmp/base .venv/bin/python tests/bench/bench_pages_cpu.py   # + old code

Loads the demo (`manage.py load_demo`) into its own PostgreSQL database (BENCH_PAGES_DB, default
postgres://root@127.0.0.1:5432/perf_pages, recreated and dropped after unless BENCH_KEEP=1),
then, as the demo annotator `dev` through Django's full stack in one process (DEBUG off, kept
connections, the settings gunicorn uses): "Start next task" of the first demo InFoBench project
and GET of that task page; "Start" of the first KIWI study and GET of the session page (turn
1); GET of the first verbalizer human-answer page. Each page is viewed 20 times unmeasured,
then --views times: user+sys CPU per view of this process and of its PostgreSQL backend (from
/proc), and the queries of one view. Pages alternate within a round, rounds alternate the order,
so all three see the same machine. With BENCH_BASE_DIR the same runs for another checkout
(its own database, `_base` appended), after this one, for old-vs-new in one run. The goal:
each added page within 20 % of the task page's CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_URL = "postgres://root@127.0.0.1:5432/perf_pages"
PAGES = ("task page", "revision session", "verbalizer answer")


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure(views: int, rounds: int) -> dict:
    """The child process: fill, find the three pages, measure; return {page: figures}."""
    root = Path.cwd()  # this checkout or BENCH_BASE_DIR's: its own code, settings and key
    sys.path.insert(0, str(root))
    from tests.bench.harness import setup_django

    setup_django(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DJANGO_DEBUG": "false",
            "DATABASE_CONN_MAX_AGE": "60",
            "LOG_LEVEL": "WARNING",
        }
    )
    subprocess.run(
        [sys.executable, "manage.py", "load_demo", "--allow-production"],
        cwd=root,
        check=True,
        capture_output=True,
    )
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from tests.bench.inprocess_cpu import backend_cpu, own_cpu  # sets Django up: after setup

    client = Client()
    client.force_login(User.objects.get(username="dev"))
    paths = {name: path for name, path in zip(PAGES, page_paths(client), strict=True)}
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    figures = {name: {"app_ms": 0.0, "postgres_ms": 0.0} for name in PAGES}
    for name, path in paths.items():
        for _ in range(20):
            assert client.get(path).status_code == 200, path
        with CaptureQueriesContext(connection) as ctx:
            client.get(path)
        figures[name]["queries"] = len(ctx)
        figures[name]["path"] = path
    for round_no in range(rounds):
        order = PAGES if round_no % 2 == 0 else tuple(reversed(PAGES))
        for name in order:
            before = own_cpu(), backend_cpu(pid)
            for _ in range(views):
                client.get(paths[name])
            figures[name]["app_ms"] += (own_cpu() - before[0]) / views / rounds * 1000
            figures[name]["postgres_ms"] += (backend_cpu(pid) - before[1]) / views / rounds * 1000
    return figures


def page_paths(client) -> list[str]:
    from annotate.models import Project
    from annotate.revision.models import Study
    from annotate.verbalizer.models import HumanStudy

    for project in Project.objects.filter(practice=False).order_by("id"):
        claim = client.post(f"/annotate/projects/{project.id}/next/")
        if claim.status_code == 302 and "/assignments/" in claim.url:
            break  # the first demo project with a task left for dev (not every one is dev's)
    study = Study.objects.order_by("id").first()
    session = client.post(f"/revision/studies/{study.id}/start/")
    human = HumanStudy.objects.filter(active=True).order_by("id").first()
    for answer in (claim, session):
        assert answer.status_code == 302 and re.search(r"/\d+/$", answer.url), answer
    return [claim.url, session.url, f"/verbalizer/work/{human.id}/"]


def run_side(root: Path, url: str, views: int, rounds: int, label: str) -> dict:
    from tests.bench.harness import drop_database, recreate_database

    recreate_database(url)
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(root)}
    print(f"[load {load()}] {label}: {root}", flush=True)
    try:
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", str(views), str(rounds)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
        )
    finally:
        if os.environ.get("BENCH_KEEP") != "1":
            drop_database(url)
    line = next((x for x in done.stdout.splitlines() if x.startswith("PAGES ")), None)
    if line is None:
        raise SystemExit(f"{label} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    print(f"[load {load()}] {label} done", flush=True)
    return json.loads(line[6:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--views", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    url = os.environ.get("BENCH_PAGES_DB", DEFAULT_URL)
    print(f"machine: {os.cpu_count()} cores; load {load()}; {args.views} views x {args.rounds}")
    sides = [("this app", ROOT, url)]
    if os.environ.get("BENCH_BASE_DIR"):
        sides.append(("base", Path(os.environ["BENCH_BASE_DIR"]), url + "_base"))
    results = {
        label: run_side(root, db, args.views, args.rounds, label) for label, root, db in sides
    }
    print(
        "\n| page | "
        + " | ".join(f"{label}: CPU ms (app + PostgreSQL), queries" for label, *_ in sides)
        + " |"
    )
    print("|---|" + "---|" * len(sides))
    for name in PAGES:
        cells = []
        for label, *_ in sides:
            row, task = results[label][name], results[label]["task page"]
            total, base = row["app_ms"] + row["postgres_ms"], task["app_ms"] + task["postgres_ms"]
            against = (
                "" if name == "task page" else f", {100 * (total / base - 1):+.0f} % vs task page"
            )
            cells.append(
                f"{row['app_ms']:.2f} + {row['postgres_ms']:.2f} = {total:.2f}, "
                f"{row['queries']} queries{against}"
            )
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"load at the end: {load()}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print("PAGES " + json.dumps(measure(int(sys.argv[2]), int(sys.argv[3]))), flush=True)
    else:
        sys.exit(main())
