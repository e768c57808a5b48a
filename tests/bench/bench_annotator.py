"""Annotator pages under load: gunicorn + PostgreSQL, 16 annotators claiming, reading, submitting.

Run: .venv/bin/python tests/bench/bench_annotator.py [--annotators 16] [--tasks-each 10]
         [--think 1-3 0] [--workers 4] [--seed 0]

It (re)creates the database BENCH_DATABASE_URL (default postgres://root@127.0.0.1:5432/
bench_annotator), fills it with a benchmark of 5 systems x 15 questions per instruction, starts
gunicorn (sync workers) on a free loopback port, and has each annotator (a thread with its own
HTTP session) do tasks through the real pages: think (so that they start at different times),
POST "Start next task", GET the task page, think, POST random yes/no answers, think, and again.

Each value of --think is one profile, run with its own annotators on the same server:
- "1-3" (the default's first): a think time drawn uniformly from 1 to 3 s (seeded by --seed)
  before each submit and before each next claim. Far faster than a person, who needs minutes
  for 5 responses x 15 questions, so it still loads the server more than 16 people would.
  The targets of issue 3 are judged on this profile.
- "0": no pause, 16 requests always in flight on the CPUs: a stress number (saturated
  requests/s), not what an annotator sees. Its latencies are printed against the targets too,
  for information.
For each profile it prints requests/s and p50/p95/p99 per endpoint, responses by status, errors,
the server's CPU time per request (gunicorn workers and their PostgreSQL backends, from /proc),
and each target with met / NOT met. Then it checks that every accepted submission is stored as
sent. Exit status 1 on any error or integrity problem; a missed latency target is reported, not
an error. Needs PostgreSQL on this machine.

Targets (issue 3), with 16 concurrent annotators: p95 under 100 ms for the task page and under
150 ms for submit.
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
    Outcomes,
    check_database,
    fill,
    free_port,
    merge,
    percentile,
    print_latencies,
    recreate_database,
    setup_django,
    start_gunicorn,
)

DEFAULT_URL = "postgres://root@127.0.0.1:5432/bench_annotator"
DEFAULT_THINK = ["1-3", "0"]
TARGETS = {"task page": 0.100, "submit": 0.150}  # p95, seconds


def think_range(text: str) -> tuple[float, float]:
    """Parse "1-3" (uniform from 1 to 3 s), "2" (always 2 s) or "0" (no pause)."""
    low, _, high = text.partition("-")
    bounds = (float(low), float(high or low))
    if bounds[0] < 0 or bounds[1] < bounds[0]:
        raise argparse.ArgumentTypeError(f"think time {text!r}: expected LOW-HIGH seconds")
    return bounds


def _proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(master: int, database: str) -> dict[int, float]:
    """Return CPU seconds so far of each gunicorn worker and each backend of the database."""
    seconds = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == master:
                seconds[int(stat.parent.name)] = _proc_cpu(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [database],
        )
        # Negative keys keep PostgreSQL's pids apart from gunicorn's.
        seconds.update({-pid: _proc_cpu(pid) for (pid,) in cursor.fetchall()})
    return seconds


def cpu_spent(before: dict[int, float], after: dict[int, float]) -> list[float]:
    """Return [gunicorn workers, PostgreSQL] CPU seconds between two server_cpu() readings.

    A process that exited in between is missed (undercounted), never counted negative.
    """
    spent = [0.0, 0.0]
    for pid, seconds in after.items():
        spent[pid < 0] += seconds - before.get(pid, 0.0)
    return spent


def run_profile(
    args: argparse.Namespace, index: int, base: str, keys: list[str], project_id: int, server
) -> Outcomes:
    """Warm the annotators up, run them for --tasks-each tasks, print the profile's results."""
    from django.db import connection

    think = args.think[index]
    seed = args.seed * 1000 + len(keys) * index
    annotators = [
        Annotator(base, key, project_id, seed + index, think=think)
        for index, key in enumerate(keys)
    ]
    # Off the clock, all at once so that every worker serves some: open the dashboard.
    warm_ups = [threading.Thread(target=a.one_task, kwargs={"warm_up": True}) for a in annotators]
    for thread in warm_ups:
        thread.start()
    for thread in warm_ups:
        thread.join()
    database = connection.settings_dict["NAME"]
    cpu_before = server_cpu(server.pid, database)
    threads = [threading.Thread(target=work, args=(a, args.tasks_each)) for a in annotators]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    cpu_after = server_cpu(server.pid, database)
    outcomes = merge([annotator.outcomes for annotator in annotators])
    report(args, think, outcomes, wall, cpu_spent(cpu_before, cpu_after))
    return outcomes


def work(annotator: Annotator, tasks: int) -> None:
    annotator.pause()  # people do not all start in the same millisecond
    for _ in range(tasks):
        if annotator.one_task() != "done":
            return


def report(args, think, outcomes: Outcomes, wall: float, cpu: list[float]) -> None:
    if think[1] > 0:
        pause = f"think time {think[0]:g}-{think[1]:g} s uniform (seed {args.seed})"
        kind = "annotators: the issue's targets are judged here"
    else:
        pause = "think time 0 (requests back to back)"
        kind = "stress: saturated throughput, not what an annotator sees"
    print(
        f"\n--- profile: {pause}; {kind}\n"
        f"{args.annotators} concurrent annotators x {args.tasks_each} tasks, 5 responses x 15 "
        f"questions, gunicorn {args.workers} sync workers + PostgreSQL, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print_latencies(outcomes, wall)
    requests = sum(len(values) for values in outcomes.timings.values())
    errors = error_count(outcomes)
    print(f"errors (neither 200 nor 302, or no answer): {errors}")
    if requests:
        print(
            f"server CPU per request (all endpoints): gunicorn workers "
            f"{cpu[0] / requests * 1000:.1f} ms + PostgreSQL {cpu[1] / requests * 1000:.1f} ms"
        )
    for endpoint, target in TARGETS.items():
        values = outcomes.timings.get(endpoint, [])
        p95 = percentile(values, 0.95) if values else float("inf")
        verdict = "met" if p95 < target else "NOT met"
        print(f"target {endpoint} p95 < {target * 1000:.0f} ms: {p95 * 1000:.1f} ms, {verdict}")


def error_count(outcomes: Outcomes) -> int:
    return sum(n for (_, status), n in outcomes.statuses.items() if status not in {"200", "302"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=16)
    parser.add_argument("--tasks-each", type=int, default=10)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument(
        "--think",
        nargs="+",
        type=think_range,
        default=[think_range(value) for value in DEFAULT_THINK],
        help="one profile per value, LOW-HIGH seconds; default: 1-3 0",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the think times and answers")
    args = parser.parse_args()
    url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
    if url.rstrip("/").rsplit("/", 1)[-1] in {"test", "postgres"}:
        raise SystemExit(f"Refusing to use {url}: give the benchmark a database of its own.")
    recreate_database(url)
    env = {
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DJANGO_DEBUG": "false",
        # Longer than a run, so that no backend (and its CPU time) goes away in the middle.
        "DATABASE_CONN_MAX_AGE": "600",
        "LOG_LEVEL": "WARNING",
    }
    load_before = os.getloadavg()[0]
    setup_django(env)
    profiles = len(args.think)
    # Each annotator does an instruction once; 3 assignments per task; some to spare.
    instructions = profiles * args.annotators * args.tasks_each // 3 + 10
    project_id, keys = fill(args.annotators * profiles, instructions)
    port = free_port()
    server = start_gunicorn(port, args.workers)
    results = []
    try:
        for index in range(profiles):
            own_keys = keys[index * args.annotators : (index + 1) * args.annotators]
            base = f"http://127.0.0.1:{port}"
            results.append(run_profile(args, index, base, own_keys, project_id, server))
    finally:
        server.terminate()
        server.wait(timeout=30)
    everything = merge(results)
    problems = check_database(project_id, everything.accepted)
    errors = error_count(everything)
    print(
        f"\naccepted submissions: {len(everything.accepted)}, all stored as sent: "
        f"{'yes' if not problems else 'NO'}; errors: {errors}"
    )
    for problem in problems[:20]:
        print("  " + problem)
    if everything.bodies_5xx:
        print("first 5xx body: " + everything.bodies_5xx[0][:500])
    # The machine is shared: a load above the core count means other work competed for the CPUs.
    print(f"load average before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f}")
    return 1 if errors or problems or not everything.accepted else 0


if __name__ == "__main__":
    sys.exit(main())
