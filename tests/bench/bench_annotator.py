"""Annotator pages under load: gunicorn + PostgreSQL, 16 annotators claiming, reading, submitting.

Run: .venv/bin/python tests/bench/bench_annotator.py [--annotators 16] [--tasks-each 10]

It (re)creates the database BENCH_DATABASE_URL (default postgres://root@127.0.0.1:5432/
bench_annotator), fills it with a benchmark of 5 systems x 15 questions per instruction, starts
gunicorn on a free port, and has each annotator (a thread with its own HTTP session) do tasks
through the real pages: POST "Start next task", GET the task page, POST the answers. It prints
requests/s and p50/p95 latency for the task page and for submit. Needs PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.harness import (  # noqa: E402 - after the path is set
    CSRF,
    FIELD,
    QUESTIONS,
    SYSTEMS,
    fill,
    free_port,
    percentile,
    recreate_database,
    setup_django,
    start_gunicorn,
)

DEFAULT_URL = "postgres://root@127.0.0.1:5432/bench_annotator"


def annotate(base: str, session_key: str, project_id: int, tasks: int, timings: dict, errors: list):
    import requests

    http = requests.Session()
    http.cookies.set("sessionid", session_key)
    try:
        dashboard = http.get(f"{base}/annotate/")
        token = CSRF.search(dashboard.text).group(1)
        for _ in range(tasks):
            claim = http.post(
                f"{base}/annotate/projects/{project_id}/next/",
                data={"csrfmiddlewaretoken": token},
                headers={"Referer": base},
                allow_redirects=False,
            )
            location = claim.headers.get("Location", "")
            if "/assignments/" not in location:
                return
            started = time.perf_counter()
            page = http.get(base + location)
            timings["page"].append(time.perf_counter() - started)
            assert page.status_code == 200, page.status_code
            answers = {name: "yes" for name in FIELD.findall(page.text)}
            assert len(answers) == SYSTEMS * QUESTIONS
            answers["csrfmiddlewaretoken"] = CSRF.search(page.text).group(1)
            started = time.perf_counter()
            submitted = http.post(
                base + location, data=answers, headers={"Referer": base}, allow_redirects=False
            )
            timings["submit"].append(time.perf_counter() - started)
            assert submitted.status_code == 302, submitted.status_code
    except Exception as error:  # reported by the main thread
        errors.append(error)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=16)
    parser.add_argument("--tasks-each", type=int, default=10)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
    recreate_database(url)
    env = {
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DJANGO_DEBUG": "false",
        "DATABASE_CONN_MAX_AGE": "60",
        "LOG_LEVEL": "WARNING",
    }
    load_before = os.getloadavg()[0]
    setup_django(env)
    instructions = args.annotators * args.tasks_each // 3 + 10
    project_id, keys = fill(args.annotators, instructions)
    port = free_port()
    server = start_gunicorn(port, args.workers)
    timings: dict[str, list[float]] = {"page": [], "submit": []}
    errors: list = []
    try:
        threads = [
            threading.Thread(
                target=annotate,
                args=(
                    f"http://127.0.0.1:{port}",
                    key,
                    project_id,
                    args.tasks_each,
                    timings,
                    errors,
                ),
            )
            for key in keys
        ]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=10)
    if errors:
        raise SystemExit(f"{len(errors)} annotators failed, first: {errors[0]!r}")
    print(
        f"annotator pages: gunicorn {args.workers} sync workers + PostgreSQL, "
        f"{args.annotators} concurrent annotators, {SYSTEMS} responses x {QUESTIONS} questions, "
        f"{os.cpu_count()} CPUs"
    )
    print(f"{'endpoint':<10}{'requests':>9}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    for name, values in timings.items():
        print(
            f"{name:<10}{len(values):>9}{len(values) / wall:>9.1f}"
            f"{statistics.median(values) * 1000:>9.1f}{percentile(values, 0.95) * 1000:>9.1f}"
            f"{max(values) * 1000:>9.1f}"
        )
    total = len(timings["page"]) + len(timings["submit"])
    print(
        f"page + submit together: {total / wall:.1f} req/s over {wall:.1f} s (claims not counted)"
    )
    # The machine is shared: a load above the core count means other work competed for the CPUs.
    print(f"load average before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
