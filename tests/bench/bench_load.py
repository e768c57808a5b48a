"""Load: 64 annotators claiming and submitting in one batch for 60 s, then an integrity check.

    .venv/bin/python tests/bench/bench_load.py [--annotators 64] [--seconds 60] [--workers 4]

Real gunicorn (sync workers, 127.0.0.1, a free port) + PostgreSQL + Redis (broker and cache).
It (re)creates its own database BENCH_LOAD_DATABASE_URL (default postgres://root@127.0.0.1:5432/
bench_load) and drops it at the end (--keep to keep it). Each annotator is a thread with its own
HTTP session going through the real pages: POST "Start next task", GET the task page, POST random
yes/no answers. Prints requests/s and p50/p95/p99 per endpoint, responses by status, then checks
the database: every accepted submission stored once with the labels sent, no task over its N
live-or-done assignments, no annotator twice on a task. Verdict: PASS needs no 5xx, no
connection error and a clean database; exit status 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.harness import (  # noqa: E402 - after the path is set
    Annotator,
    check_database,
    drop_database,
    fill,
    free_port,
    merge,
    print_latencies,
    recreate_database,
    setup_django,
    start_gunicorn,
)

DEFAULT_URL = "postgres://root@127.0.0.1:5432/bench_load"
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/6")


def work_until(annotator: Annotator, deadline: float) -> None:
    while time.monotonic() < deadline:
        if annotator.one_task() == "no-work":
            return


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--instructions", type=int, default=1200)
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()
    url = os.environ.get("BENCH_LOAD_DATABASE_URL", DEFAULT_URL)
    if url.rstrip("/").rsplit("/", 1)[-1] in {"test", "postgres"}:
        raise SystemExit(f"Refusing to use {url}: give the benchmark a database of its own.")
    recreate_database(url)
    setup_django(
        {
            "DATABASE_URL": url,
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DJANGO_DEBUG": "false",
            "DATABASE_CONN_MAX_AGE": "60",
            "CELERY_BROKER_URL": REDIS_URL,
            "CACHE_URL": REDIS_URL,
            "LOG_LEVEL": "WARNING",
        }
    )
    try:
        return run(args, url)
    finally:
        if not args.keep:
            from django.db import connections

            connections.close_all()
            drop_database(url)


def run(args: argparse.Namespace, url: str) -> int:
    project_id, keys = fill(args.annotators, args.instructions)
    port = free_port()
    server = start_gunicorn(port, args.workers)
    base = f"http://127.0.0.1:{port}"
    annotators = [Annotator(base, key, project_id, seed) for seed, key in enumerate(keys)]
    try:
        for annotator in annotators:  # log in and load each worker's templates off the clock
            annotator.one_task(warm_up=True)
        deadline = time.monotonic() + args.seconds
        threads = [threading.Thread(target=work_until, args=(a, deadline)) for a in annotators]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    outcomes = merge([annotator.outcomes for annotator in annotators])
    print(
        f"load: {args.annotators} annotators, one batch of {args.instructions} tasks x 3 "
        f"assignments, {args.seconds:.0f} s, gunicorn {args.workers} sync workers + PostgreSQL "
        f"+ Redis, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
    )
    print_latencies(outcomes, wall)
    server_errors = sum(n for (_, s), n in outcomes.statuses.items() if not s.isdigit() or s >= "5")
    problems = check_database(project_id, outcomes.accepted)
    print(f"accepted submissions: {len(outcomes.accepted)}; database problems: {len(problems)}")
    for problem in problems[:20]:
        print("  " + problem)
    if outcomes.bodies_5xx:
        print("first 5xx body: " + outcomes.bodies_5xx[0][:500])
    verdict = "PASS" if not server_errors and not problems and outcomes.accepted else "FAIL"
    print(
        f"VERDICT {verdict}: {server_errors} 5xx or connection errors, "
        f"{len(problems)} integrity problems, {len(outcomes.accepted)} submissions stored"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
