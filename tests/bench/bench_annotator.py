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
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgres://root@127.0.0.1:5432/bench_annotator"
SYSTEMS, QUESTIONS = 5, 15
FIELD = re.compile(r'name="(r\d+_q\d+)"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def recreate_database(url: str) -> None:
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin_url = url.replace(parsed.path, "/postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def setup_django(url: str, env: dict) -> None:
    os.environ.update(env)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=os.environ,
        check=True,
    )
    import django

    django.setup()


def fill(annotators: int, instructions: int) -> tuple[int, list[str]]:
    """Create the benchmark, project and annotators; return the project id and session keys."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import Group, User
    from django.contrib.sessions.backends.db import SessionStore

    from annotate import models
    from annotate.roles import ANNOTATOR
    from annotate.services.projects import InstructionSelection, project_create

    benchmark = models.Benchmark.objects.create(name="bench")
    systems = [models.System.objects.create(name=f"bench-system-{i}") for i in range(SYSTEMS)]
    for index in range(instructions):
        instruction = models.Instruction.objects.create(
            benchmark=benchmark,
            external_id=f"bench_{index}",
            subset=models.Subset.HARD,
            text=f"Write a 10-paragraph story number {index}, with a title.",
            position=index,
        )
        models.Question.objects.bulk_create(
            models.Question(
                instruction=instruction,
                position=position,
                text=f"Does the story satisfy requirement {position}?",
                constraint_mask=models.ConstraintType.CONTENT,
            )
            for position in range(1, QUESTIONS + 1)
        )
        models.Response.objects.bulk_create(
            models.Response(
                instruction=instruction, system=system, text=("A fairly long paragraph. " * 60)
            )
            for system in systems
        )
    project = project_create(
        name="bench",
        benchmark=benchmark,
        systems=systems,
        selection=InstructionSelection(),
        assignments_per_task=3,
    )
    group = Group.objects.get(name=ANNOTATOR)
    keys = []
    for index in range(annotators):
        user = User.objects.create_user(f"bench{index}", password=None)
        user.groups.add(group)
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        keys.append(session.session_key)
    return project.id, keys


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(port: int, workers: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")),
            "config.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=os.environ,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("gunicorn did not start")


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


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


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
    setup_django(url, env)
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
