"""Shared machinery of the benchmark and fault scripts: a database of their own, a filled
annotation project, gunicorn on a free loopback port, annotators driving the real pages."""

from __future__ import annotations

import os
import random
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
SYSTEMS, QUESTIONS = 5, 15
FIELD = re.compile(r'name="(r\d+_q\d+)"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
ASSIGNMENT_URL = re.compile(r"/annotate/assignments/(\d+)/")


def _admin_url(url: str) -> tuple[str, str]:
    parsed = urlparse(url)
    return url.replace(parsed.path, "/postgres"), parsed.path.lstrip("/")


def recreate_database(url: str) -> None:
    """Drop and create the database named in `url` (never one the caller did not name)."""
    import psycopg

    admin_url, name = _admin_url(url)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    import psycopg

    admin_url, name = _admin_url(url)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(env: dict) -> None:
    """Set the environment, migrate the database in a child process, set Django up here."""
    os.environ.update(env)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=os.environ,
        check=True,
    )
    import django

    django.setup()


def fill(
    annotators: int, instructions: int, assignments_per_task: int = 3
) -> tuple[int, list[str]]:
    """Create the benchmark, one project (one batch), annotators; return project id, sessions."""
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
        assignments_per_task=assignments_per_task,
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


def wait_for_port(port: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def start_gunicorn(port: int, workers: int, log=None) -> subprocess.Popen:
    """Start gunicorn (sync workers) on 127.0.0.1:port with this process's environment."""
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
        stdout=log,
        stderr=subprocess.STDOUT if log else None,
    )
    if not wait_for_port(port):
        server.kill()
        raise SystemExit("gunicorn did not start")
    return server


def ideal_seconds(calls: int, delay: float, concurrency: int) -> float:
    """Return the least time `calls` calls of `delay` seconds each can take, `concurrency` at a time.

    Each of the `concurrency` slots runs its calls one after another, so some slot runs
    ceil(calls / concurrency) of them: 186 calls of 0.1 s, 32 at a time, need 6 rounds, 0.6 s.
    (calls x delay / concurrency, 0.58 s there, is below what any client could reach.)
    """
    return -(-calls // concurrency) * delay


def start_openai_stub(delay: float) -> tuple[subprocess.Popen, str]:
    """Start tests/evaluation/openai_stub.py in its own process; return it and its base URL."""
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/evaluation/openai_stub.py"), "--delay", str(delay)],
        stdout=subprocess.PIPE,
        text=True,
    )
    return process, process.stdout.readline().strip()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


@dataclass
class Outcomes:
    """What one simulated annotator saw: timings and statuses per endpoint, accepted work."""

    timings: dict[str, list[float]] = field(default_factory=dict)
    statuses: dict[tuple[str, str], int] = field(default_factory=dict)
    accepted: dict[int, dict[str, str]] = field(default_factory=dict)  # assignment id -> answers
    bodies_5xx: list[str] = field(default_factory=list)
    events: list[tuple[float, str, str]] = field(default_factory=list)  # (monotonic end, ...)

    def record(self, endpoint: str, status: str, seconds: float) -> None:
        self.events.append((time.monotonic(), endpoint, status))
        self.timings.setdefault(endpoint, []).append(seconds)
        self.statuses[endpoint, status] = self.statuses.get((endpoint, status), 0) + 1


class Annotator:
    """One annotator with its own HTTP session: claim, read the task page, submit; repeat.

    `think` (low, high): seconds spent on the page before submitting and again before the next
    claim, uniformly random from the annotator's seeded generator; (0, 0) sends back to back.
    """

    def __init__(
        self,
        base: str,
        session_key: str,
        project_id: int,
        seed: int,
        think: tuple[float, float] = (0.0, 0.0),
    ) -> None:
        import requests

        self.base, self.project_id = base, project_id
        self.http = requests.Session()
        self.http.cookies.set("sessionid", session_key)
        self.rng = random.Random(seed)
        self.think = think
        self.outcomes = Outcomes()
        self.token = ""

    def pause(self) -> None:
        """Sleep for one think time (nothing when the think time is 0)."""
        low, high = self.think
        if high > 0:
            time.sleep(self.rng.uniform(low, high))

    def _call(self, endpoint: str, method: str, path: str, **kwargs):
        import requests

        started = time.perf_counter()
        try:
            answer = self.http.request(
                method, self.base + path, allow_redirects=False, timeout=60, **kwargs
            )
        except requests.RequestException as error:
            self.outcomes.record(endpoint, type(error).__name__, time.perf_counter() - started)
            return None
        self.outcomes.record(endpoint, str(answer.status_code), time.perf_counter() - started)
        if answer.status_code >= 500:
            self.outcomes.bodies_5xx.append(answer.text[:2000])
        return answer

    def one_task(self, warm_up: bool = False) -> str:
        """Do one task; return "done", "no-work" or "error". `warm_up`: only open the dashboard."""
        if not self.token:
            dashboard = self._call("dashboard", "GET", "/annotate/")
            if dashboard is None or dashboard.status_code != 200:
                return "error"
            self.token = CSRF.search(dashboard.text).group(1)
        if warm_up:
            self.outcomes = Outcomes()
            return "done"
        headers = {"Referer": self.base}
        claim = self._call(
            "claim",
            "POST",
            f"/annotate/projects/{self.project_id}/next/",
            data={"csrfmiddlewaretoken": self.token},
            headers=headers,
        )
        if claim is None or claim.status_code != 302:
            return "error"
        location = claim.headers.get("Location", "")
        match = ASSIGNMENT_URL.search(location)
        if not match:
            return "no-work"
        page = self._call("task page", "GET", location)
        if page is None or page.status_code != 200:
            return "error"
        answers = {name: self.rng.choice(("yes", "no")) for name in FIELD.findall(page.text)}
        data = {**answers, "csrfmiddlewaretoken": CSRF.search(page.text).group(1)}
        self.pause()
        submitted = self._call("submit", "POST", location, data=data, headers=headers)
        if submitted is None or submitted.status_code != 302:
            return "error"
        self.outcomes.accepted[int(match.group(1))] = answers
        self.pause()
        return "done"


def merge(outcomes: list[Outcomes]) -> Outcomes:
    total = Outcomes()
    for one in outcomes:
        for endpoint, values in one.timings.items():
            total.timings.setdefault(endpoint, []).extend(values)
        for key, count in one.statuses.items():
            total.statuses[key] = total.statuses.get(key, 0) + count
        total.accepted.update(one.accepted)
        total.bodies_5xx.extend(one.bodies_5xx)
        total.events.extend(one.events)
    return total


def print_latencies(outcomes: Outcomes, wall: float) -> None:
    print(f"{'endpoint':<11}{'requests':>9}{'req/s':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
    for name, values in outcomes.timings.items():
        print(
            f"{name:<11}{len(values):>9}{len(values) / wall:>8.1f}"
            f"{percentile(values, 0.50) * 1000:>9.1f}{percentile(values, 0.95) * 1000:>9.1f}"
            f"{percentile(values, 0.99) * 1000:>9.1f}"
        )
    total = sum(len(values) for values in outcomes.timings.values())
    print(f"all        {total:>9}{total / wall:>8.1f}  over {wall:.1f} s")
    by_status: dict[str, int] = {}
    for (_, status), count in outcomes.statuses.items():
        by_status[status] = by_status.get(status, 0) + count
    print("responses by status: " + ", ".join(f"{s}: {n}" for s, n in sorted(by_status.items())))


def check_database(project_id: int, accepted: dict[int, dict[str, str]]) -> list[str]:
    """Return the integrity problems found: lost or doubled submissions, overfull tasks,
    annotators twice on a task, half-written submissions. Empty means all is well."""
    from django.db.models import Count, Q

    from annotate.models import Assignment, AssignmentStatus, Label, Project, Task

    problems = []
    project = Project.objects.get(pk=project_id)
    value_of = {"yes": 1, "no": 0, "unknown": 2}
    assignments = Assignment.objects.filter(task__batch__project=project)
    for assignment in assignments.filter(pk__in=accepted):
        expected = {}
        for name, answer in accepted[assignment.pk].items():
            position, question = (int(part) for part in name[1:].split("_q"))
            expected[assignment.display_order[position - 1], question] = value_of[answer]
        stored = list(
            Label.objects.filter(assignment=assignment).values_list(
                "response__system_id", "question__position", "value"
            )
        )
        if assignment.status != AssignmentStatus.SUBMITTED:
            problems.append(f"assignment {assignment.pk} accepted but {assignment.status}")
        if len(stored) != len(expected) or {(s, q): v for s, q, v in stored} != expected:
            problems.append(
                f"assignment {assignment.pk}: {len(stored)} labels stored, "
                f"{len(expected)} submitted, or values differ"
            )
    missing = set(accepted) - set(assignments.filter(pk__in=accepted).values_list("pk", flat=True))
    problems += [f"accepted assignment {pk} not in the database" for pk in sorted(missing)]
    live = [AssignmentStatus.CLAIMED, AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED]
    overfull = (
        Task.objects.filter(batch__project=project)
        .annotate(live=Count("assignments", filter=Q(assignments__status__in=live)))
        .filter(live__gt=project.assignments_per_task)
    )
    problems += [f"task {task.pk} has {task.live} live or done assignments" for task in overfull]
    twice = assignments.values("task_id", "annotator_id").annotate(n=Count("id")).filter(n__gt=1)
    problems += [f"annotator {r['annotator_id']} twice on task {r['task_id']}" for r in twice]
    half = (
        assignments.annotate(n_labels=Count("labels"))
        .exclude(n_labels=0)
        .exclude(n_labels=SYSTEMS * QUESTIONS)
    )
    problems += [f"assignment {a.pk} half-written: {a.n_labels} labels" for a in half]
    return problems
