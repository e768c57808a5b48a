"""Benchmark: KIWI revision sessions (issue 14).

1. import: a generated KIWI-size study (234 sessions, 1,260 turns, ~300-word answers) through
   `import_sessions`; target < 2 s.
2. report: the full revision report (Tables 2-5, Figure 2 data, 1,000 bootstrap resamples) on
   it, with classifier and judge predictions and a 65-turn human re-rating in place; < 2 s.
3. judge: the Table 5 rating judge (10-shot, BM25-nearest examples) over the 186 test turns
   through the engine, against the stub OpenAI server answering in 100 ms, concurrency 32.
   Ideal = 6 rounds of 0.1 s = 0.6 s (186 calls, 32 at a time: tests.bench.harness.ideal_seconds);
   target within 1.15x.
4. pages: 16 annotators each doing a 10-turn session through gunicorn (4 sync workers) on
   PostgreSQL (DATABASE_URL, default postgres://root@127.0.0.1:5432/h_kiwi, dropped and
   recreated), with the fake model answering in a background thread of the worker; p95 latency
   of the session page and of a submitted turn (instruction or rating), model time excluded
   (clients poll the state as the page does: after 0.5 s, then backing off to 4 s; 1 s to rate).
   Target < 100 ms. The latency is measured by the client over loopback, which bounds the
   server time from above.

    .venv/bin/python tests/bench/bench_revision.py [import report judge pages]
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.bench_annotator import cpu_spent, server_cpu  # noqa: E402
from tests.bench.harness import (  # noqa: E402 - after the path is set
    free_port,
    ideal_seconds,
    percentile,
    recreate_database,
    start_gunicorn,
    start_openai_stub,
)

WORDS = [
    "retrieval",
    "passages",
    "models",
    "answer",
    "citation",
    "evidence",
    "attention",
    "context",
    "length",
    "training",
    "evaluation",
    "benchmark",
    "judge",
    "instruction",
    "revision",
    "paragraph",
    "summary",
    "method",
    "results",
    "data",
]
CATEGORIES = [
    "asking for more information",
    "expand answer coverage",
    "asking for clarification",
    "categorization",
    "condense",
    "remove",
    "reorganize",
    "direct verbatim edit",
    "others",
]
ERRORS = [
    "added information but made answer less coherent/correct",
    "instruction is ignored",
    "introduced unrequested changes",
    "failed to follow hard constraint",
    "others",
]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)) + "."


def kiwi_file(path: Path, seed: int = 0) -> int:
    """Write 78 questions x 3 systems = 234 sessions with 1,260 turns; return the turns."""
    rng = random.Random(seed)
    total = 0
    with path.open("w") as out:
        for index in range(234):
            turns = 6 if index < 90 else 5
            interaction = []
            for position in range(turns):
                rating = rng.choices(["good", "neutral", "bad"], [45, 30, 25])[0]
                turn = {
                    "instruction": f"Turn {position}: " + text(rng, 20),
                    "answer_1": text(rng, 300),
                    "answer_2": text(rng, 280) if rating != "good" and rng.random() < 0.4 else "",
                    "rating": rating.upper() if rng.random() < 0.1 else rating,
                    "comment": text(rng, 15),
                    "instruction_type": rng.choice(["information-seeking", "stylistic"]),
                }
                if rng.random() < 0.1:
                    turn["instruction_category"] = rng.choice(CATEGORIES)
                if rating != "good" and rng.random() < 0.1:
                    turn["error_category"] = rng.choice(ERRORS)
                interaction.append(turn)
            total += turns
            session = {
                "original_question": f"Question {index // 3}: " + text(rng, 12),
                "model_name": ["gpt-4", "gpt-3.5", "llama2"][index % 3],
                "initial_answer": text(rng, 300),
                "interaction": interaction,
            }
            out.write(json.dumps(session) + "\n")
    return total


def setup_sqlite(tmp: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["VAR_DIR"] = tmp
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def bench_import_report(tmp: str, results: dict) -> None:
    from django.contrib.auth.models import User
    from django.utils import timezone

    from annotate.revision.models import Rerating, Study
    from annotate.revision.services.imports import sessions_import
    from annotate.revision.services.reratings import reratings_sample
    from evaluation.revision.judges import judge_run_create, judge_run_execute
    from evaluation.revision.reports import revision_report_build

    path = Path(tmp) / "kiwi.jsonl"
    turns = kiwi_file(path)
    started = time.perf_counter()
    summary = sessions_import(path=str(path), study_name="KIWI bench")
    results["import_s"] = time.perf_counter() - started
    print(
        f"import: {summary.created} sessions, {turns} turns, "
        f"{path.stat().st_size / 1e6:.1f} MB in {results['import_s']:.2f} s (target < 2 s)"
    )
    study = Study.objects.get(name="KIWI bench")
    now = timezone.now()
    for task in ("instruction-category", "error-category"):
        judge_run_execute(run_id=judge_run_create(study=study, task=task, now=now).pk)
    for mode in ("zero-shot", "k-shot"):
        run = judge_run_create(study=study, task="rating-judge", mode=mode, shots=10, now=now)
        judge_run_execute(run_id=run.pk)
    users = [User.objects.create(username=f"rerater{i}") for i in range(2)]
    for rerating in reratings_sample(study=study, annotators=users, size=65, seed=0, now=now):
        Rerating.objects.filter(pk=rerating.pk).update(status="done", rating="good", comment="c")
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        report = revision_report_build(study=study, n_resamples=1000)
        timings.append(time.perf_counter() - started)
    results["report_s"] = min(timings)
    print(
        f"report: {report['turns']} turns, {len(report['table5']['rows'])} Table 5 rows, "
        f"best of 3 {min(timings):.2f} s, worst {max(timings):.2f} s (target < 2 s)"
    )


def judge_floor(base_url: str, bodies: list[dict], concurrency: int) -> float:
    """Send the bodies with the bare `openai` client from `concurrency` threads started
    beforehand: no database, no engine. What this machine and stub allow right now."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    import openai

    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    encoded = [json.dumps(b, ensure_ascii=False, separators=(",", ":")).encode() for b in bodies]

    def send(content: bytes) -> None:
        client.post("/chat/completions", content=content, cast_to=object)

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(send, encoded[:concurrency]))  # threads and connections up
        started = time.perf_counter()
        list(pool.map(send, encoded))
        return time.perf_counter() - started


def _messages(work) -> list[dict]:
    """A unit's messages from `protocol.load`: a (task, messages) pair before the prompts were
    built in the worker threads, a JudgeWork after (the script runs on both)."""
    return work[1] if isinstance(work, tuple) else work.messages()


def _digest(run) -> str:
    """SHA-256 of every request the run sent (as stored, by unit) and of its predictions: equal
    digests for the same seed = the same prompts and the same results."""
    import hashlib

    from annotate.engine.models import EngineCall

    digest = hashlib.sha256()
    calls = EngineCall.objects.filter(run=run.engine_run).order_by("unit_key", "pk")
    for unit_key, request in calls.values_list("unit_key", "request"):
        key = unit_key.rsplit(":turn", 1)[1]
        digest.update(f"{key}\n".encode() + json.dumps(request, sort_keys=True).encode())
    for row in run.predictions.order_by("turn_id").values_list("turn_id", "label", "reply"):
        digest.update(json.dumps(row).encode())
    return digest.hexdigest()


def bench_judge(tmp: str, results: dict, delay: float = 0.1, concurrency: int = 32) -> None:
    from django.utils import timezone

    from annotate.engine.services import endpoint_create
    from annotate.revision.models import Study
    from evaluation.revision.judges import judge_run_create, judge_run_execute, training_index
    from evaluation.revision.protocol import RevisionJudgeProtocol

    repeat = int(os.environ.get("BENCH_JUDGE_REPEAT", "3"))
    study = Study.objects.get(name="KIWI bench")
    stub, base_url = start_openai_stub(delay)
    try:
        endpoint_create(
            name="bench-judge-stub",
            model="stub",
            base_url=base_url,
            concurrency=concurrency,
            requests_per_minute=1_000_000,
            tokens_per_minute=1_000_000_000,
            max_retries=0,
        )
        for mode in ("zero-shot", "k-shot"):
            walls, floors, digests = [], [], []
            for attempt in range(repeat):
                run = judge_run_create(
                    study=study,
                    task="rating-judge",
                    mode=mode,
                    shots=10,
                    endpoint_name="bench-judge-stub",
                    seed=1 + attempt,
                    now=timezone.now(),
                )
                units = len(run.split["test"])
                handle = SimpleNamespace(params={"judge_run": run.pk})
                started = time.perf_counter()
                protocol = RevisionJudgeProtocol()
                work = protocol.load(handle, protocol.units(handle))
                prompt_s = time.perf_counter() - started
                messages = [_messages(w) for w in work.values()]
                size = sum(len(m[-1]["content"]) for m in messages) / len(messages)
                bodies = [{"model": "stub", "messages": m, "temperature": 0.0} for m in messages]
                floors.append(judge_floor(base_url, bodies, concurrency))
                # Building the floor's bodies ranked this split: the run builds its own index,
                # as the first run on a split does (judges.training_index).
                training_index.cache_clear()
                started = time.perf_counter()
                run = judge_run_execute(run_id=run.pk)
                walls.append(time.perf_counter() - started)
                engine = run.engine_run
                ideal = ideal_seconds(units, delay, concurrency)
                digests.append(_digest(run))
                print(
                    f"judge {mode} #{attempt + 1}: {units} test turns, {run.status}, "
                    f"{walls[-1]:.2f} s = {walls[-1] / ideal:.2f}x the ideal {ideal:.2f} s "
                    f"(target <= 1.15x); bare client, same bodies: {floors[-1]:.2f} s = "
                    f"{floors[-1] / ideal:.2f}x; prompts {size / 1000:.1f} kB, built alone in "
                    f"{prompt_s:.2f} s; engine run started -> finished "
                    f"{(engine.finished_at - engine.started_at).total_seconds():.2f} s; "
                    f"load {os.getloadavg()[0]:.1f}"
                )
            ideal = ideal_seconds(units, delay, concurrency)
            best, median = min(walls), sorted(walls)[len(walls) // 2]
            results[f"judge_{mode}_ratio"] = median / ideal
            print(
                f"judge {mode}: best {best / ideal:.2f}x, median {median / ideal:.2f}x the ideal; "
                f"bare client median {sorted(floors)[len(floors) // 2] / ideal:.2f}x"
            )
            print(f"judge {mode}: SHA-256 of requests sent and predictions, seeds 1-{repeat}:")
            for attempt, digest in enumerate(digests):
                print(f"  seed {attempt + 1}: {digest}")
    finally:
        stub.terminate()


# --- pages ---------------------------------------------------------------------------------

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def pages_setup(annotators: int) -> tuple[int, list[str]]:
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import Group, User
    from django.contrib.sessions.backends.db import SessionStore

    from annotate.revision.services.imports import study_upload
    from annotate.roles import ANNOTATOR

    path = Path(tempfile.mkdtemp()) / "study.jsonl"
    rng = random.Random(0)
    with path.open("w") as out:
        for index in range(annotators):
            documents = [
                {
                    "title": f"Paper {index}-{d}",
                    "text": "\n\n".join(text(rng, 80) for _ in range(6)),
                }
                for d in range(6)
            ]
            out.write(
                json.dumps({"question": f"Q{index}: " + text(rng, 12), "documents": documents})
                + "\n"
            )
    study_upload(path=str(path), study_name="pages bench", systems=["fake-system"])
    from annotate.revision.models import Study

    group = Group.objects.get(name=ANNOTATOR)
    cookies = []
    for index in range(annotators):
        user = User.objects.create(username=f"bench-annotator-{index}")
        user.groups.add(group)
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.save()
        cookies.append(session.session_key)
    return Study.objects.get(name="pages bench").pk, cookies


def annotator(base: str, study_id: int, cookie: str, turns: int, timings: dict, errors: list):
    polls = timings.setdefault("polls", [0])
    import requests

    http = requests.Session()
    http.cookies.set("sessionid", cookie)

    def timed(kind: str, method: str, url: str, detail: str = "", **kwargs):
        started = time.perf_counter()
        response = http.request(method, url, allow_redirects=False, timeout=30, **kwargs)
        elapsed = time.perf_counter() - started
        timings.setdefault(kind, []).append(elapsed)
        if detail:
            timings.setdefault(f"{kind}: {detail}", []).append(elapsed)
        if response.status_code >= 400:
            errors.append(f"{kind} {response.status_code}")
        return response

    def token(html: str) -> str:
        return CSRF.search(html).group(1)

    home = http.get(f"{base}/revision/").text
    started = timed(
        "submit",
        "POST",
        f"{base}/revision/studies/{study_id}/start/",
        detail="start",
        data={"csrfmiddlewaretoken": token(home)},
        headers={"Referer": base},
    )
    session_url = base + started.headers["Location"]
    state_url = session_url + "state/"

    def wait_model():
        # As the page does: the first look after 0.5 s, then every 0.5-4 s.
        delay = 0.5
        time.sleep(delay)
        polls[0] += 1
        while http.get(state_url).json()["waiting"]:
            polls[0] += 1
            delay = min(delay * 1.5, 4.0)
            time.sleep(delay)

    wait_model()
    for n in range(turns):
        page = timed("page", "GET", session_url).text
        kind = "information-seeking" if n % 2 == 0 else "stylistic"
        timed(
            "submit",
            "POST",
            session_url + "turns/",
            detail="instruction",
            data={
                "csrfmiddlewaretoken": token(page),
                "instruction": f"Instruction {n} " + " ".join(random.sample(WORDS, 5)),
                "instruction_type": kind,
            },
            headers={"Referer": base},
        )
        wait_model()
        page = timed("page", "GET", session_url).text
        time.sleep(1.0)  # reading and rating
        timed(
            "submit",
            "POST",
            session_url + "rate/",
            detail="rating",
            data={
                "csrfmiddlewaretoken": token(page),
                "rating": "neutral",
                "comment": "bench comment",
                "edited_answer": f"Edited answer {n}.",
            },
            headers={"Referer": base},
        )
    timed("page", "GET", session_url)


def workers_idle(master: int, database: str, timeout: float = 60) -> float:
    """Wait until gunicorn's workers have booted (their CPU stops growing); return the wait.

    The port is open as soon as the master listens, seconds before the workers have imported
    the app: annotators arriving then would measure the boot, not the pages.
    """
    started = time.monotonic()
    last = -1.0
    while time.monotonic() - started < timeout:
        spent = sum(s for pid, s in server_cpu(master, database).items() if pid > 0)
        if spent - last < 0.02:
            break
        last = spent
        time.sleep(0.5)
    return time.monotonic() - started


def bench_pages(results: dict, annotators: int = 16, turns: int = 10, workers: int = 4) -> None:
    url = os.environ.get("DATABASE_URL", "postgres://root@127.0.0.1:5432/h_kiwi")
    recreate_database(url)
    os.environ.update(
        DATABASE_URL=url,
        DJANGO_SETTINGS_MODULE="config.settings.base",
        DJANGO_DEBUG="false",
        REVISION_GENERATION="thread",
        DATABASE_CONN_MAX_AGE="600",
    )
    os.environ.pop("CELERY_BROKER_URL", None)
    import subprocess

    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=os.environ,
        check=True,
    )
    import django

    django.setup()
    study_id, cookies = pages_setup(annotators)
    port = free_port()
    server = start_gunicorn(port, workers)
    database = url.rsplit("/", 1)[1]
    booted = workers_idle(server.pid, database)
    cpu_before = server_cpu(server.pid, database)
    timings: dict[str, list[float]] = {}
    errors: list[str] = []
    try:
        base = f"http://127.0.0.1:{port}"
        threads = [
            threading.Thread(target=annotator, args=(base, study_id, c, turns, timings, errors))
            for c in cookies
        ]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
            time.sleep(0.05)
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        cpu = cpu_spent(cpu_before, server_cpu(server.pid, database))
    finally:
        server.terminate()
        server.wait()
    polls = timings.get("polls", [0])
    for kind in ("page", "submit", "submit: start", "submit: instruction", "submit: rating"):
        values = timings.get(kind, [])
        p50, p95 = percentile(values, 0.5) * 1000, percentile(values, 0.95) * 1000
        results[f"{kind}_p95_ms"] = p95
        target = "" if ":" in kind else " (target < 100 ms)"
        print(f"pages: {kind}: {len(values)} requests, p50 {p50:.0f} ms, p95 {p95:.0f} ms{target}")
    print(f"pages: {annotators} annotators x {turns} turns in {wall:.1f} s, errors: {errors[:5]}")
    requests = sum(len(timings.get(kind, [])) for kind in ("page", "submit")) + polls[0]
    print(
        f"pages: server CPU per request ({requests} with {polls[0]} state polls): gunicorn "
        f"workers {cpu[0] / requests * 1000:.1f} ms (with the background generation) + "
        f"PostgreSQL {cpu[1] / requests * 1000:.1f} ms (backends alive at the end); workers "
        f"booted and idle after {booted:.1f} s before the annotators started"
    )


def main(parts: list[str]) -> int:
    parts = parts or ["import", "report", "judge", "pages"]
    print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    results: dict = {}
    if {"import", "report", "judge"} & set(parts):
        tmp = tempfile.mkdtemp()
        setup_sqlite(tmp)
        bench_import_report(tmp, results)
        if "judge" in parts:
            bench_judge(tmp, results)
    if "pages" in parts:
        if "DJANGO_SETTINGS_MODULE" in os.environ and {"import", "judge"} & set(parts):
            import subprocess

            # Django is set up for SQLite in this process: the pages run in a fresh one.
            return subprocess.call([sys.executable, __file__, "pages"], cwd=ROOT)
        bench_pages(results)
    print(f"load average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
