"""The annotator's hot path side by side with Turkle 3.1.0, same method, alternating (issue 17).

    .venv/bin/python tests/bench/bench_peer_turkle.py            # 2 rounds, wrk -d30s
    BENCH_WRK_DURATION=5s BENCH_ROUNDS=1 .venv/bin/python tests/bench/bench_peer_turkle.py

Each round runs both apps one after the other (Turkle first in odd rounds, this app first in
even ones), with the load average printed before every step. Both are served by gunicorn with 4
sync workers on PostgreSQL and measured with `wrk -t2 -c16 -d30s` after a 5 s unrecorded
warm-up, once with CONN_MAX_AGE=0 (a new database connection per request) and once with 60
(kept connections), over 500 tasks of one instruction with 6 questions x 5 systems' responses
of ~150 words (Turkle's own generator, so the same text):

- Turkle: ../../../shared/peers/turkle/turkle_bench.sh (its README says what it measures: task
  view = outer page + the iframe with the form; submit = POST of 30 answers to a different
  accepted assignment each), then "accept next task" (`turkle_claims.py`): each request a
  different worker's session, a batch of 500 open tasks.
- This app, the same steps: the task page (`GET /annotate/assignments/<id>/`, each of the 500
  its own annotator's claimed assignment), submit (`POST` of 30 answers, each to a different
  claimed assignment, 302 not followed: like Turkle's, it redirects to the project's next-task
  address, which claims and shows the next task), claim (`POST /annotate/projects/<id>/next/`, each
  request a different annotator, 500 open tasks). After each submit run the stored labels are
  counted (30 per newly submitted assignment, every submission at most once); after each claim
  run, the new assignments against the requests and the fullest task against its limit.
  Queries per page / submit / claim are counted in-process (Django's test client), and the
  server's CPU per request (gunicorn workers + PostgreSQL backends, from /proc; kept
  connections only, as backends that exit take their CPU time with them).

Knobs (environment): BENCH_WRK_DURATION (30s), BENCH_ROUNDS (2), BENCH_TARGETS_PER_CONFIG
(one-use submits and claims per connection setting; default 600 per second of the duration,
above the fastest submit seen, 409/s),
BENCH_PEER_DATABASE_URL (postgres://root@127.0.0.1:5432/perf_app, recreated, dropped after
unless BENCH_KEEP=1), BENCH_BASE_DIR (another checkout of this app, e.g. `git archive` of the
commit before a change with these three bench files copied in: measured as "base" between the
two, for old-vs-new in the same run; its database is the app's name + _base), TURKLE_DIR (the peer folder), TURKLE_VENV / TURKLE_WORK (under /tmp).
Needs PostgreSQL on this machine and wrk (installed from Debian when missing, like `make
chromium`). Exit status 1 on an error response, a lost or doubled submission, an over-assigned
task, or a run that ran out of one-use targets; targets not met are reported, not errors.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
TURKLE_DIR = Path(os.environ.get("TURKLE_DIR", ROOT.parent.parent / "shared/peers/turkle"))
if not TURKLE_DIR.is_dir():
    TURKLE_DIR = Path("/work/shared/peers/turkle")
TURKLE_VENV = os.environ.get("TURKLE_VENV", "/tmp/turkle-venv")
TURKLE_WORK = os.environ.get("TURKLE_WORK", "/tmp/turkle-bench")
DEFAULT_URL = "postgres://root@127.0.0.1:5432/perf_app"
AGES = (0, 60)
WORKERS, THREADS, CONNS = 4, 2, 16
N_TASKS, SYSTEMS, QUESTIONS = 500, 5, 6
CSRF_SECRET = "perfbenchcsrfsecret0123456789abc"  # 32 characters, as Django's cookie holds
RESULT = re.compile(r"(\w+)=([-\d.]+)")
FAILURES: list[str] = []


def duration_seconds() -> int:
    text = os.environ.get("BENCH_WRK_DURATION", "30s")
    return int(text[:-1]) * (60 if text.endswith("m") else 1) if text[-1] in "sm" else int(text)


def per_config() -> int:
    default = max(1000, 600 * duration_seconds())
    return int(os.environ.get("BENCH_TARGETS_PER_CONFIG", default))


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] load {load()} | {text}", flush=True)


def ensure_wrk() -> None:
    if shutil.which("wrk"):
        return
    print("Installing wrk from Debian for the side-by-side benchmark", flush=True)
    subprocess.run(
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk",
        shell=True,
        check=False,
    )
    if not shutil.which("wrk"):
        raise SystemExit("wrk is needed (apt-get install wrk)")


def wrk(base: str, requests_file: str, duration: str, latency: bool = True) -> dict[str, float]:
    """Run wrk over a file of requests (wrk_requests.lua); return its RESULT fields."""
    command = ["wrk", f"-t{THREADS}", f"-c{CONNS}", f"-d{duration}"]
    command += ["--latency"] if latency else []
    command += ["-s", str(HERE / "wrk_requests.lua"), base, "--", requests_file, str(THREADS)]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    line = next(line for line in output.splitlines() if line.startswith("RESULT"))
    return {key: float(value) for key, value in RESULT.findall(line)}


def lines_in(path: str) -> int:
    with open(path) as fh:
        return sum(1 for _ in fh)


# --- Turkle ----------------------------------------------------------------------------------


def turkle_env(age: int | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(TURKLE_DIR),
        DJANGO_SETTINGS_MODULE="turkle_bench_settings",
        TURKLE_BENCH_DB=os.environ.get("TURKLE_DB", "turkle_bench"),
        PYTHONPYCACHEPREFIX="/tmp/turkle-pycache",
        VENV=TURKLE_VENV,
        WORK=TURKLE_WORK,
        DB=os.environ.get("TURKLE_DB", "turkle_bench"),
    )
    if age is not None:
        env["TURKLE_BENCH_CONN_MAX_AGE"] = str(age)
    return env


def turkle_side(round_no: int) -> list[dict]:
    """Run the peer's script (page, iframe, submit), then the claims; return result rows."""
    duration = os.environ.get("BENCH_WRK_DURATION", "30s")
    env = turkle_env()
    env.update(WRK_DURATION=duration, POST_PER_CONFIG=str(per_config()), CONN_AGES="0 60")
    log(f"Turkle: turkle_bench.sh (WRK_DURATION={duration}, POST_PER_CONFIG={per_config()})")
    done = subprocess.run(
        ["bash", str(TURKLE_DIR / "turkle_bench.sh")],
        env=env,
        capture_output=True,
        text=True,
    )
    Path(TURKLE_WORK, "bench_stderr.txt").write_text(done.stderr)
    if done.returncode:
        print(done.stdout[-3000:], done.stderr[-3000:])
        raise SystemExit("turkle_bench.sh failed")
    rows, printed = [], set()
    for line in done.stdout.splitlines():
        if line.startswith("QUERIES") and line not in printed:
            printed.add(line)  # the peer prints its query counts twice
            print("  Turkle " + line)
        match = re.match(r"conn_max_age=(\d+) endpoint=(\w+) (.*)", line)
        if match:
            fields = {key: float(value) for key, value in RESULT.findall(match.group(3))}
            rows.append(
                dict(side="turkle", round=round_no, age=int(match[1]), kind=match[2], **fields)
            )
        if (line.startswith("check submit") or line.startswith("WARNING")) and line not in printed:
            printed.add(line)
            print("  Turkle " + line)
            if line.startswith("WARNING"):
                FAILURES.append(f"Turkle round {round_no}: {line}")
    rows += turkle_claims(round_no)
    return rows


def turkle_claims(round_no: int) -> list[dict]:
    python = f"{TURKLE_VENV}/bin/python"
    helper = str(HERE / "turkle_claims.py")
    subprocess.run(
        [python, helper, "setup", TURKLE_WORK, str(per_config()), str(len(AGES))],
        env=turkle_env(),
        check=True,
        cwd=TURKLE_WORK,
    )
    rows = []
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    for index, age in enumerate(AGES):
        server = subprocess.Popen(
            [f"{TURKLE_VENV}/bin/gunicorn", "--workers", str(WORKERS), "--worker-class", "sync"]
            + ["--bind", f"127.0.0.1:{port}", "--log-level", "warning"]
            + ["turkle_bench_wsgi:application"],
            env=turkle_env(age),
            cwd=TURKLE_WORK,
        )
        try:
            wait_for(port)
            wrk(base, f"{TURKLE_WORK}/warm.txt", "5s", latency=False)
            before = turkle_count()
            log(f"Turkle: wrk claim (accept_next_task), CONN_MAX_AGE={age}")
            result = wrk(
                base,
                f"{TURKLE_WORK}/claims_{index}.txt",
                os.environ.get("BENCH_WRK_DURATION", "30s"),
            )
            after = turkle_count()
        finally:
            stop(server)
        made = after["assignments"] - before["assignments"]
        check = (
            f"new assignments {made:.0f} for {result['requests']:.0f} requests, fullest task "
            f"{after['most_per_task']:.0f} of {after['limit']:.0f}, twice {after['twice']:.0f}"
        )
        print(f"  Turkle claim check (CONN_MAX_AGE={age}): {check}")
        if result["requests"] > per_config():
            FAILURES.append(f"Turkle round {round_no} claims ran out of workers")
        if after["most_per_task"] > after["limit"] or after["twice"]:
            FAILURES.append(f"Turkle round {round_no}: over-assigned ({check})")
        rows.append(dict(side="turkle", round=round_no, age=age, kind="claim", **result))
    files = {"page": "warm.txt", "iframe": "iframes.txt", "submit": "submits_cpu.txt"}
    files["claim"] = f"claims_{len(AGES) - 1}.txt"
    for kind, name in files.items():
        rows.append(
            inprocess(
                "turkle",
                round_no,
                kind,
                f"{TURKLE_VENV}/bin/python",
                f"{TURKLE_WORK}/{name}",
                turkle_env(60),
                TURKLE_WORK,
            )
        )
    return rows


def inprocess(side, round_no, kind, python, file, env, cwd, follow=False) -> dict:
    """CPU per request in-process (inprocess_cpu.py) over the unused end of a requests file."""
    env = {**env, "PYTHONPATH": os.pathsep.join([env.get("PYTHONPATH", ""), str(ROOT)])}
    out = subprocess.run(
        [python, str(HERE / "inprocess_cpu.py"), kind, file, *(["--follow"] if follow else [])],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("CPU ")), None)
    if line is None:
        FAILURES.append(f"{side} in-process CPU of {kind} failed: {out.stderr[-1500:]}")
        return dict(side=side, round=round_no, age=60, kind=f"cpu {kind}")
    fields = {key: float(value) for key, value in RESULT.findall(line)}
    print(f"  {side} {line}")
    return dict(side=side, round=round_no, age=60, kind=f"cpu {kind}", **fields)


def turkle_count() -> dict[str, float]:
    out = subprocess.run(
        [f"{TURKLE_VENV}/bin/python", str(HERE / "turkle_claims.py"), "count"],
        env=turkle_env(),
        cwd=TURKLE_WORK,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(line for line in out.splitlines() if line.startswith("COUNT"))
    return {key: float(value) for key, value in RESULT.findall(line)}


# --- this app --------------------------------------------------------------------------------


def app_side(round_no: int, root: Path = ROOT, label: str = "app") -> list[dict]:
    """Run this app's side in a child process (its own Django and database); return rows.

    `root`/`label`: another checkout of the app (BENCH_BASE_DIR, the code before a change, with
    these bench files copied in) measured the same way as "base".
    """
    log(f"{label}: fill, count queries, serve, measure ({root})")
    env = dict(os.environ)
    if label != "app":
        url = os.environ.get("BENCH_PEER_DATABASE_URL", DEFAULT_URL)
        env["BENCH_PEER_DATABASE_URL"] = f"{url}_{label}"
        env["BENCH_PEER_WORK"] = f"/tmp/perf-bench-{label}"
    done = subprocess.run(
        [
            sys.executable,
            str(root / "tests/bench/bench_peer_turkle.py"),
            "--app-side",
            str(round_no),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    rows = []
    for line in done.stdout.splitlines():
        if line.startswith("APPROW "):
            rows.append({**json.loads(line[7:]), "side": label})
        elif line.startswith("FAIL: "):
            FAILURES.append(f"{label}: {line[6:]}")
            print("  " + line, flush=True)
        else:
            print(f"  {label}: " + line, flush=True)
    if done.returncode:
        print(done.stderr[-5000:])
        raise SystemExit(f"{label}'s side failed")
    return rows


def base_side(round_no: int) -> list[dict]:
    return app_side(round_no, Path(os.environ["BENCH_BASE_DIR"]), "base")


def app_measure(round_no: int) -> None:
    """The child process: fill the database, count queries, measure with wrk, check counts."""
    from tests.bench.bench_annotator import cpu_spent, server_cpu
    from tests.bench.harness import drop_database, recreate_database, setup_django

    url = os.environ.get("BENCH_PEER_DATABASE_URL", DEFAULT_URL)
    recreate_database(url)
    setup_django(
        {
            "DATABASE_URL": url,
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DJANGO_DEBUG": "false",
            "DATABASE_CONN_MAX_AGE": "0",
            "LOG_LEVEL": "WARNING",
        }
    )
    from django.db import connection

    work = Path(os.environ.get("BENCH_PEER_WORK", "/tmp/perf-bench-app"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    started = time.monotonic()
    ids = app_fill(work)
    print(f"filled in {time.monotonic() - started:.0f} s: {json.dumps(ids)}")
    for name, count in app_queries(ids).items():
        print(f"QUERIES {name:<8} {count}")
        print(
            "APPROW "
            + json.dumps(dict(side="app", round=round_no, kind=f"queries {name}", age=0, n=count))
        )
    connection.close()
    duration = os.environ.get("BENCH_WRK_DURATION", "30s")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    database = connection.settings_dict["NAME"]
    try:
        for index, age in enumerate(AGES):
            os.environ["DATABASE_CONN_MAX_AGE"] = str(age)
            server = start_app(port)
            try:
                wrk(base, str(work / "pages.txt"), "5s", latency=False)  # warm-up
                for kind in ("page", "submit", "claim"):
                    file = str(work / (f"{kind}s_{index}.txt" if kind != "page" else "pages.txt"))
                    before = app_counts(ids)
                    cpu_before = server_cpu(server.pid, database)
                    connection.close()
                    log(f"this app: wrk {kind}, CONN_MAX_AGE={age}")
                    time.sleep(2)
                    result = wrk(base, file, duration)
                    time.sleep(0.5)  # requests in flight when wrk stopped
                    worker, pg = cpu_spent(cpu_before, server_cpu(server.pid, database))
                    after = app_counts(ids)
                    connection.close()
                    result["cpu_worker_ms"] = worker / max(result["requests"], 1) * 1000
                    result["cpu_pg_ms"] = pg / max(result["requests"], 1) * 1000
                    app_check(kind, age, result, before, after, file, round_no)
                    row = dict(side="app", round=round_no, age=age, kind=kind, **result)
                    print("APPROW " + json.dumps(row), flush=True)
            finally:
                stop(server)
        env = {**os.environ, "DATABASE_CONN_MAX_AGE": "60"}
        for kind, name in (("page", "pages"), ("submit", "submits_1"), ("claim", "claims_1")):
            row = inprocess(
                "app", round_no, kind, sys.executable, str(work / f"{name}.txt"), env, str(ROOT)
            )
            print("APPROW " + json.dumps(row), flush=True)
        # The submit stores and redirects to the project's next-task address, as Turkle's
        # redirects to its "accept next" page; here the redirect is followed too (the claim and
        # the next task's page), over the unused end of the first setting's submits.
        row = inprocess(
            "app",
            round_no,
            "submit_and_next",
            sys.executable,
            str(work / "submits_0.txt"),
            env,
            str(ROOT),
            follow=True,
        )
        print("APPROW " + json.dumps(row), flush=True)
    finally:
        connection.close()
        if os.environ.get("BENCH_KEEP") != "1":
            drop_database(url)
    for failure in FAILURES:
        print(f"FAIL: {failure}")


def start_app(port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("gunicorn")), "config.wsgi"]
        + ["--bind", f"127.0.0.1:{port}", "--workers", str(WORKERS), "--worker-class", "sync"]
        + ["--log-level", "warning"],
        cwd=ROOT,
        env=os.environ,
    )
    wait_for(port)
    return server


def app_check(kind, age, result, before, after, file, round_no) -> None:
    """Print and check what the run stored: one submission per target, no over-assignment."""
    where = f"this app round {round_no} {kind} CONN_MAX_AGE={age}"
    if not result["requests"]:
        FAILURES.append(f"{where}: no answer at all during the run (run not valid)")
    if result["err_status"] or result["err_connect"] or result["err_read"]:
        FAILURES.append(f"{where}: error responses {result}")
    if result["err_timeout"]:
        # wrk gives up on a request after 2 s (the peer's setting too): on a loaded machine a
        # slow answer, not an error; the stored counts below still cover those requests.
        print(f"note {kind} (CONN_MAX_AGE={age}): {result['err_timeout']:.0f} answers over 2 s")
    if kind != "page" and result["requests"] > lines_in(file):
        FAILURES.append(f"{where}: ran out of one-use targets (raise BENCH_TARGETS_PER_CONFIG)")
    if kind == "submit":
        submitted = after["submitted"] - before["submitted"]
        labels = after["labels"] - before["labels"]
        check = (
            f"{result['requests']:.0f} requests, {submitted} assignments newly submitted, "
            f"{labels} labels stored ({labels / max(submitted, 1):.1f} each), "
            f"{after['doubled']} submitted twice"
        )
        if labels != submitted * SYSTEMS * QUESTIONS or after["doubled"]:
            FAILURES.append(f"{where}: {check}")
        if submitted < result["requests"]:
            FAILURES.append(f"{where}: fewer submissions stored than answered ({check})")
    elif kind == "claim":
        made = after["claimed"] - before["claimed"]
        check = (
            f"{result['requests']:.0f} requests, {made} new assignments, fullest task "
            f"{after['fullest']} of {after['limit']}, annotators with two live claims "
            f"{after['two_live']}"
        )
        if after["fullest"] > after["limit"] or after["two_live"] or made < result["requests"]:
            FAILURES.append(f"{where}: {check}")
    else:
        return
    print(f"check {kind} (CONN_MAX_AGE={age}): {check}")


def app_fill(work: Path) -> dict:
    """500 instructions of 6 questions x 5 responses (~150 words), three projects over them,
    one annotator (with a logged-in session) per page target, submit target and claim."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import Group, User
    from django.contrib.sessions.backends.db import SessionStore
    from django.contrib.sessions.models import Session
    from django.utils import timezone
    from django.utils.crypto import get_random_string

    from annotate import models
    from annotate.roles import ANNOTATOR
    from annotate.services.assignments import display_order_for
    from annotate.services.projects import InstructionSelection, project_create

    sys.path.insert(0, str(TURKLE_DIR))
    from turkle_setup import text  # the peer's generator: the same words and lengths

    rng = random.Random(1)
    benchmark = models.Benchmark.objects.create(name="perf")
    systems = [models.System.objects.create(name=f"system-{s}") for s in "abcde"]
    instructions = models.Instruction.objects.bulk_create(
        models.Instruction(
            benchmark=benchmark,
            external_id=f"perf_{n}",
            subset=models.Subset.HARD,
            text=text(rng, 40),
            position=n,
        )
        for n in range(N_TASKS)
    )
    questions, responses = [], []
    for instruction in instructions:
        for position in range(1, QUESTIONS + 1):
            wording = "Does the response " + text(rng, 10).lower().rstrip(".") + "?"
            questions.append(
                models.Question(
                    instruction=instruction,
                    position=position,
                    text=wording,
                    constraint_mask=models.ConstraintType.CONTENT,
                )
            )
        responses += [
            models.Response(instruction=instruction, system=system, text=text(rng, 150))
            for system in systems
        ]
    models.Question.objects.bulk_create(questions, batch_size=2000)
    models.Response.objects.bulk_create(responses, batch_size=2000)
    targets = per_config()
    submit_slots = targets * len(AGES) + 1
    projects = {
        "pages": project_create(
            name="pages",
            benchmark=benchmark,
            systems=systems,
            selection=InstructionSelection(),
            assignments_per_task=1,
            allotted_minutes=1440,
        ),
        "submit": project_create(
            name="submit",
            benchmark=benchmark,
            systems=systems,
            selection=InstructionSelection(),
            assignments_per_task=math.ceil(submit_slots / N_TASKS),
            allotted_minutes=1440,
        ),
        "claim": project_create(
            name="claim",
            benchmark=benchmark,
            systems=systems,
            selection=InstructionSelection(),
            assignments_per_task=math.ceil((targets * len(AGES) + 1) / N_TASKS) + 1,
            allotted_minutes=1440,
        ),
    }
    tasks = {
        name: list(models.Task.objects.filter(batch__project=p).order_by("position", "id"))
        for name, p in projects.items()
    }
    counts = {"pages": N_TASKS, "submit": submit_slots, "claim": targets * len(AGES) + 1}
    password = make_password(None)
    users = {
        name: User.objects.bulk_create(
            [User(username=f"{name}{n}", password=password) for n in range(count)],
            batch_size=2000,
        )
        for name, count in counts.items()
    }
    every_user = [user for group in users.values() for user in group]
    group = Group.objects.get(name=ANNOTATOR)
    User.groups.through.objects.bulk_create(
        [User.groups.through(user_id=user.id, group_id=group.id) for user in every_user],
        batch_size=5000,
    )
    annotators = models.Annotator.objects.bulk_create(
        [
            models.Annotator(user=user, name=user.username, kind=models.AnnotatorKind.EXPERT)
            for user in every_user
        ],
        batch_size=5000,
    )
    annotator_of = {annotator.user_id: annotator for annotator in annotators}
    expires = timezone.now() + timedelta(days=2)
    session_of = {}
    sessions = []
    store = SessionStore()
    for user in every_user:
        key = get_random_string(32, "abcdefghijklmnopqrstuvwxyz0123456789")
        data = {
            SESSION_KEY: str(user.pk),
            BACKEND_SESSION_KEY: "django.contrib.auth.backends.ModelBackend",
            HASH_SESSION_KEY: user.get_session_auth_hash(),
        }
        sessions.append(
            Session(session_key=key, session_data=store.encode(data), expire_date=expires)
        )
        session_of[user.id] = key
    Session.objects.bulk_create(sessions, batch_size=5000)
    system_ids = [system.id for system in systems]
    now = timezone.now()
    claimed = {}
    for name in ("pages", "submit"):
        rows = []
        for n, user in enumerate(users[name]):
            seed = random.Random(n).getrandbits(62)
            rows.append(
                models.Assignment(
                    task=tasks[name][n % N_TASKS],
                    annotator=annotator_of[user.id],
                    status=models.AssignmentStatus.CLAIMED,
                    claimed_at=now,
                    expires_at=now + timedelta(minutes=1440),
                    order_seed=seed,
                    display_order=display_order_for(system_ids=system_ids, seed=seed),
                )
            )
        claimed[name] = models.Assignment.objects.bulk_create(rows, batch_size=5000)

    def cookie(user) -> str:
        return f"sessionid={session_of[user.id]}; csrftoken={CSRF_SECRET}"

    answers = "&".join(
        f"r{r}_q{q}=yes" for r in range(1, SYSTEMS + 1) for q in range(1, QUESTIONS + 1)
    )
    body = f"csrfmiddlewaretoken={CSRF_SECRET}&active_seconds=30&{answers}"
    with open(work / "pages.txt", "w") as fh:
        for assignment, user in zip(claimed["pages"], users["pages"], strict=True):
            fh.write(f"GET\t/annotate/assignments/{assignment.id}/\t{cookie(user)}\n")
    submits = list(zip(claimed["submit"], users["submit"], strict=True))
    claims = users["claim"]
    for index in range(len(AGES)):
        with open(work / f"submits_{index}.txt", "w") as fh:
            for assignment, user in submits[index * targets : (index + 1) * targets]:
                fh.write(f"POST\t/annotate/assignments/{assignment.id}/\t{cookie(user)}\t{body}\n")
        with open(work / f"claims_{index}.txt", "w") as fh:
            for user in claims[index * targets : (index + 1) * targets]:
                path = f"/annotate/projects/{projects['claim'].id}/next/"
                fh.write(f"POST\t{path}\t{cookie(user)}\tcsrfmiddlewaretoken={CSRF_SECRET}\n")
    return {
        "projects": {name: p.id for name, p in projects.items()},
        "page": [claimed["pages"][0].id, session_of[users["pages"][0].id]],
        "submit": [claimed["submit"][-1].id, session_of[users["submit"][-1].id]],
        "claim": session_of[users["claim"][-1].id],
        "body": body,
    }


def app_queries(ids: dict) -> dict[str, int]:
    """Count the SQL queries of one page view, submit and claim (users no wrk run uses)."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    def client(session: str) -> Client:
        c = Client()
        c.cookies["sessionid"] = session
        c.cookies["csrftoken"] = CSRF_SECRET
        return c

    counts = {}
    page_client = client(ids["page"][1])
    path = f"/annotate/assignments/{ids['page'][0]}/"
    page_client.get(path)  # the first view of a worker warms caches up
    with CaptureQueriesContext(connection) as ctx:
        assert page_client.get(path).status_code == 200
    counts["page"] = len(ctx)
    submit_path = f"/annotate/assignments/{ids['submit'][0]}/"
    with CaptureQueriesContext(connection) as ctx:
        answer = client(ids["submit"][1]).post(
            submit_path, ids["body"], content_type="application/x-www-form-urlencoded"
        )
        assert answer.status_code == 302, answer.status_code
    counts["submit"] = len(ctx)
    with CaptureQueriesContext(connection) as ctx:
        answer = client(ids["claim"]).post(
            f"/annotate/projects/{ids['projects']['claim']}/next/",
            f"csrfmiddlewaretoken={CSRF_SECRET}",
            content_type="application/x-www-form-urlencoded",
        )
        assert "/annotate/assignments/" in answer.headers["Location"], answer.headers
    counts["claim"] = len(ctx)
    return counts


def app_counts(ids: dict) -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT
              (SELECT count(*) FROM annotate_assignment a JOIN annotate_task t ON t.id = a.task_id
                 JOIN annotate_batch b ON b.id = t.batch_id
                 WHERE b.project_id = %(submit)s AND a.submitted_at IS NOT NULL),
              (SELECT count(*) FROM annotate_label l JOIN annotate_assignment a
                 ON a.id = l.assignment_id JOIN annotate_task t ON t.id = a.task_id
                 JOIN annotate_batch b ON b.id = t.batch_id WHERE b.project_id = %(submit)s),
              (SELECT count(*) FROM (SELECT assignment_id FROM annotate_label
                 WHERE assignment_id IS NOT NULL GROUP BY assignment_id
                 HAVING count(*) > %(per)s) AS d),
              (SELECT count(*) FROM annotate_assignment a JOIN annotate_task t ON t.id = a.task_id
                 JOIN annotate_batch b ON b.id = t.batch_id WHERE b.project_id = %(claim)s),
              (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM annotate_assignment a
                 JOIN annotate_task t ON t.id = a.task_id JOIN annotate_batch b
                 ON b.id = t.batch_id WHERE b.project_id = %(claim)s GROUP BY a.task_id) AS c),
              (SELECT assignments_per_task FROM annotate_project WHERE id = %(claim)s),
              (SELECT count(*) FROM (SELECT a.annotator_id FROM annotate_assignment a
                 JOIN annotate_task t ON t.id = a.task_id JOIN annotate_batch b
                 ON b.id = t.batch_id WHERE b.project_id = %(claim)s AND a.status = 'claimed'
                 GROUP BY a.annotator_id HAVING count(*) > 1) AS w)
            """,
            {**ids["projects"], "per": SYSTEMS * QUESTIONS},
        )
        row = cursor.fetchone()
    keys = ("submitted", "labels", "doubled", "claimed", "fullest", "limit", "two_live")
    return dict(zip(keys, row, strict=True))


# --- both ------------------------------------------------------------------------------------


def free_port() -> int:
    from tests.bench.harness import free_port as harness_free_port

    return harness_free_port()


def wait_for(port: int) -> None:
    from tests.bench.harness import wait_for_port

    if not wait_for_port(port, timeout=60):
        raise SystemExit(f"no server on port {port}")


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def summarise(rows: list[dict]) -> None:
    """Print, per round, each figure of both apps and the ratio, against issue 17's goals."""

    def get(side, round_no, age, kind, key="rps"):
        for row in rows:
            if (row["side"], row["round"], row["age"], row["kind"]) == (side, round_no, age, kind):
                return row.get(key)
        return None

    sides = ["app"] + (["base"] if any(row["side"] == "base" for row in rows) else [])
    print("\n==================== this app / Turkle 3.1.0, side by side ====================")
    print(
        f"gunicorn {WORKERS} sync workers, wrk -t{THREADS} -c{CONNS} "
        f"-d{os.environ.get('BENCH_WRK_DURATION', '30s')}, {N_TASKS} tasks, "
        f"{SYSTEMS} x {QUESTIONS} answers"
    )
    extra = " before (base) | base / Turkle |" if "base" in sides else ""
    print(f"| round | figure | CONN_MAX_AGE | Turkle | this app | app / Turkle | goal |{extra}")
    print("|---|---|---|---|---|---|---|" + ("---|---|" if extra else ""))
    for round_no in sorted({row["round"] for row in rows}):
        for age in (60, 0):
            page = get("turkle", round_no, age, "page")
            frame = get("turkle", round_no, age, "iframe")
            turkle_views = 1 / (1 / page + 1 / frame) if page and frame else None
            figures = [
                ("task views/s", turkle_views, "page", "rps", 2.0),
                ("submit req/s", get("turkle", round_no, age, "submit"), "submit", "rps", 1.2),
                ("claim req/s", get("turkle", round_no, age, "claim"), "claim", "rps", 2.0),
            ]
            for figure, turkle, kind, key, goal in figures:
                values = [get(side, round_no, age, kind, key) for side in sides]
                line(round_no, figure, age, turkle, values, goal)
            t95 = get("turkle", round_no, age, "page", "p95_ms")
            f95 = get("turkle", round_no, age, "iframe", "p95_ms")
            values = [get(side, round_no, age, "page", "p95_ms") for side in sides]
            if t95 and f95 and values[0]:
                verdict = "met" if values[0] < t95 else "NOT met"
                more = f" {values[1]:.0f} | |" if len(values) > 1 and values[1] else ""
                print(
                    f"| {round_no} | task view p95 ms (Turkle: page / page + iframe) | {age} | "
                    f"{t95:.0f} / {t95 + f95:.0f} | {values[0]:.0f} | | below page's: "
                    f"{verdict} |{more}"
                )
        for side in sides:
            queries = [
                get(side, round_no, 0, f"queries {k}", "n") for k in ("page", "submit", "claim")
            ]
            print(
                f"| {round_no} | queries page / submit / claim ({side}) | | 7+7 / 11 / 13 | "
                f"{' / '.join(str(q) for q in queries)} | | |"
            )
    print("\nCPU per request in-process (app + PostgreSQL ms; DEBUG off, kept connections)")
    print("| round | request | Turkle | " + " | ".join(sides) + " | Turkle / app |")
    print("|---|---|---|" + "---|" * len(sides) + "---|")
    for round_no in sorted({row["round"] for row in rows}):
        for kind in ("page", "submit", "claim", "submit_and_next"):

            def cpu(side, kind=kind, round_no=round_no):
                app_ms = get(side, round_no, 60, f"cpu {kind}", "app_ms")
                pg_ms = get(side, round_no, 60, f"cpu {kind}", "postgres_ms")
                return None if app_ms is None else (app_ms, pg_ms)

            if kind == "submit_and_next":  # Turkle: submit, accept next, its page and iframe
                parts = [cpu("turkle", part) for part in ("submit", "claim", "page", "iframe")]
                turkle = None if None in parts else tuple(map(sum, zip(*parts, strict=True)))
            else:
                turkle = cpu("turkle")
            if kind == "page" and turkle and cpu("turkle", "iframe"):
                frame = cpu("turkle", "iframe")
                turkle = (turkle[0] + frame[0], turkle[1] + frame[1])  # a view: page + iframe
            ours = [cpu(side) for side in sides]
            if turkle is None or ours[0] is None:
                continue
            cells = " | ".join(f"{o[0]:.2f} + {o[1]:.2f}" if o else "" for o in ours)
            ratio = sum(turkle) / max(sum(ours[0]), 1e-9)
            name = {
                "page": "task view",
                "submit": "submit (stores, then redirects to the next task, as Turkle's)",
                "submit_and_next": "submit + next task opened (Turkle: submit, accept, "
                "page, iframe)",
            }.get(kind, kind)
            print(
                f"| {round_no} | {name} | {turkle[0]:.2f} + {turkle[1]:.2f} | {cells} | "
                f"{ratio:.2f}x |"
            )
    print("\nper request, kept connections: CPU in the gunicorn workers + PostgreSQL backends")
    for row in rows:
        if row["side"] != "turkle" and row["age"] == 60 and "cpu_worker_ms" in row:
            print(
                f"  round {row['round']} {row['side']:<4} {row['kind']:<7} "
                f"{row['cpu_worker_ms']:5.1f} + {row['cpu_pg_ms']:4.1f} ms"
            )
    print("\nevery run: req/s, p50 / p95 / p99 ms")
    for row in rows:
        if "p95_ms" in row:
            print(
                f"  round {row['round']} {row['side']:<6} {row['kind']:<7} age {row['age']:>2}: "
                f"{row['rps']:7.1f} req/s  {row['p50_ms']:.0f} / {row['p95_ms']:.0f} / "
                f"{row['p99_ms']:.0f}"
            )


def line(round_no, figure, age, turkle, values, goal) -> None:
    if turkle is None or values[0] is None:
        return
    ratio = values[0] / turkle
    verdict = "met" if ratio >= goal else "NOT met"
    text = (
        f"| {round_no} | {figure} | {age} | {turkle:.1f} | {values[0]:.1f} | {ratio:.2f}x | "
        f">= {goal}x {verdict} |"
    )
    if len(values) > 1 and values[1] is not None:
        text += f" {values[1]:.1f} | {values[1] / turkle:.2f}x |"
    print(text)


def main() -> int:
    ensure_wrk()
    rounds = int(os.environ.get("BENCH_ROUNDS", "2"))
    print(
        f"machine: {os.cpu_count()} cores; load {load()}; wrk "
        f"{os.environ.get('BENCH_WRK_DURATION', '30s')}; {per_config()} one-use targets per run"
    )
    rows: list[dict] = []
    for round_no in range(1, rounds + 1):
        order = [turkle_side, app_side]
        if os.environ.get("BENCH_BASE_DIR"):
            order.insert(1, base_side)
        for side in order if round_no % 2 else reversed(order):
            rows += side(round_no)
    summarise(rows)
    log("done")
    if FAILURES:
        print("\nFAILED:\n" + "\n".join(FAILURES))
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--app-side":
        app_measure(int(sys.argv[2]))
    else:
        sys.exit(main())
