"""CPU time per claim, task page view and submit, measured in-process (no HTTP server).

    .venv/bin/python tests/bench/profile_annotator.py [--tasks 60] [--cprofile claim|page|submit]

Wall-clock latency on a shared machine mostly measures the neighbours; CPU time per request does
not. This fills its own database (BENCH_DATABASE_URL, default postgres://root@127.0.0.1:5432/
bench_annotator, recreated) like bench_annotator.py, then for each task POSTs "Start next
task", GETs the task page and POSTs the answers through Django's full stack (middleware, session,
CSRF, templates) with the settings gunicorn uses (DEBUG off, kept connections). It
prints user+sys CPU time per claim, page and submit, of this process and of its PostgreSQL
backend (read from /proc, so only when the server runs on this machine). With --cprofile it
prints the 25 most expensive functions of one endpoint instead of timing it.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import sys
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.harness import (  # noqa: E402 - after the path is set
    CSRF,
    FIELD,
    QUESTIONS,
    SYSTEMS,
    fill,
    recreate_database,
    setup_django,
)

DEFAULT_URL = "postgres://root@127.0.0.1:5432/bench_annotator"


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def backend_cpu(pid: int | None) -> float:
    """Return the user+sys CPU seconds of a PostgreSQL backend on this machine (0 if unseen)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--cprofile", choices=("claim", "page", "submit"))
    args = parser.parse_args()
    url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
    recreate_database(url)
    setup_django(
        {
            "DATABASE_URL": url,
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DJANGO_DEBUG": "false",
            "DATABASE_CONN_MAX_AGE": "60",
            "LOG_LEVEL": "WARNING",
        }
    )
    from django.db import connection
    from django.test import Client

    project_id, keys = fill(1, args.tasks + 2, assignments_per_task=1)
    client = Client(enforce_csrf_checks=True)
    client.cookies["sessionid"] = keys[0]
    dashboard = client.get("/annotate/")  # warm up: templates, URL resolver, the annotator row
    token = CSRF.search(dashboard.content.decode()).group(1)
    spent = {"claim": [0.0, 0.0], "page": [0.0, 0.0], "submit": [0.0, 0.0]}
    profiler = cProfile.Profile()
    for index in range(args.tasks + 1):
        measure = index > 0  # the first task warms every cache up

        def step(name, call, *call_args, measure=measure):
            return timed(call, call_args, spent[name], measure, args.cprofile == name, profiler)

        claim = step(
            "claim",
            client.post,
            f"/annotate/projects/{project_id}/next/",
            urlencode({"csrfmiddlewaretoken": token}),
            "application/x-www-form-urlencoded",
        )
        path = claim.headers["Location"]
        assert "/assignments/" in path, path
        page = step("page", client.get, path)
        assert page.status_code == 200, page.status_code
        answers = {name: "yes" for name in FIELD.findall(page.content.decode())}
        assert len(answers) == SYSTEMS * QUESTIONS
        answers["csrfmiddlewaretoken"] = CSRF.search(page.content.decode()).group(1)
        posted = step(
            "submit",
            client.post,
            path,
            urlencode(answers),
            "application/x-www-form-urlencoded",
        )
        assert posted.status_code == 302, posted.status_code
    if args.cprofile:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    backend = connection.cursor().connection.info.backend_pid
    print(
        f"CPU per request over {args.tasks} tasks ({SYSTEMS} responses x {QUESTIONS} questions), "
        f"Django in-process + its PostgreSQL backend (pid {backend})"
    )
    for name, (django_cpu, pg_cpu) in spent.items():
        print(
            f"{name:<8} Django {django_cpu / args.tasks * 1000:6.1f} ms  "
            f"PostgreSQL {pg_cpu / args.tasks * 1000:6.1f} ms"
        )


def timed(call, call_args, into, measure, profile, profiler):
    """Call call(*call_args); add its own and its backend's CPU seconds to `into` if measured."""
    from django.db import connection

    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    before = own_cpu(), backend_cpu(pid)
    if measure and profile:
        profiler.enable()
    answer = call(*call_args)
    if measure and profile:
        profiler.disable()
    if measure:
        into[0] += own_cpu() - before[0]
        into[1] += backend_cpu(pid) - before[1]
    return answer


if __name__ == "__main__":
    main()
