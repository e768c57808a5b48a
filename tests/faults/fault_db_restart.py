"""Fault: PostgreSQL restarted while annotators claim and submit through gunicorn.

    .venv/bin/python tests/faults/fault_db_restart.py [--annotators 16] [--seconds 35] [--gap 6]

Starts its own PostgreSQL and Redis (free ports, temporary directory), gunicorn on a free port,
and annotators working through the real pages. After 8 s it stops PostgreSQL (fast shutdown:
open transactions are cut), waits `--gap` seconds, starts it again. PASS when every failed
request was a clean 503 (Retry-After, no traceback) while the database was down, every request
from 3 s after it came back succeeded, and the database holds every accepted submission once and
no half-written one (each submitted assignment has all its labels or none).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.harness import (  # noqa: E402 - after the path is set
    Annotator,
    check_database,
    fill,
    free_port,
    merge,
    print_latencies,
    setup_django,
    start_gunicorn,
)
from tests.faults.private import (  # noqa: E402
    OK,
    PrivatePostgres,
    PrivateRedis,
    keep_working,
    verdict,
)

RECOVERY_GRACE = 3.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=35)
    parser.add_argument("--gap", type=float, default=6)
    args = parser.parse_args()
    postgres, redis = PrivatePostgres(), PrivateRedis()
    try:
        postgres.start()
        redis.start()
        return run(args, postgres, redis)
    finally:
        redis.close()
        postgres.close()


def run(args, postgres: PrivatePostgres, redis: PrivateRedis) -> int:
    import psycopg

    with psycopg.connect(postgres.url("postgres"), autocommit=True) as conn:
        conn.execute("CREATE DATABASE faults")
    workdir = tempfile.mkdtemp(prefix="fault-db-")
    setup_django(
        {
            "DATABASE_URL": postgres.url("faults"),
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DJANGO_DEBUG": "false",
            "DATABASE_CONN_MAX_AGE": "60",
            "CELERY_BROKER_URL": redis.url(),
            "CACHE_URL": redis.url(1),
            "VAR_DIR": workdir,
            "LOG_LEVEL": "CRITICAL",  # the expected database errors would flood the output
        }
    )
    project_id, keys = fill(args.annotators, 400)
    port = free_port()
    log = open(os.path.join(workdir, "gunicorn.log"), "w")  # noqa: SIM115 - closed below
    server = start_gunicorn(port, 4, log=log)
    annotators = [
        Annotator(f"http://127.0.0.1:{port}", key, project_id, seed)
        for seed, key in enumerate(keys)
    ]
    try:
        for annotator in annotators:
            annotator.one_task(warm_up=True)
        started = time.monotonic()
        deadline = started + args.seconds
        threads = [threading.Thread(target=keep_working, args=(a, deadline)) for a in annotators]
        for thread in threads:
            thread.start()
        time.sleep(8)
        down_at = time.monotonic()
        postgres.stop("fast")
        time.sleep(args.gap)
        postgres.start()
        up_at = time.monotonic()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    from django.db import connections

    connections.close_all()  # this process's connection died with the restart
    outcomes = merge([annotator.outcomes for annotator in annotators])
    print(f"fault: PostgreSQL stopped {args.gap:.0f} s under {args.annotators} annotators")
    print_latencies(outcomes, wall)
    return judge(outcomes, project_id, down_at, up_at)


def judge(outcomes, project_id: int, down_at: float, up_at: float) -> int:
    failed = [(t, endpoint, status) for t, endpoint, status in outcomes.events if status not in OK]
    in_gap = [e for e in failed if down_at <= e[0] <= up_at + RECOVERY_GRACE]
    outside = [e for e in failed if e not in in_gap]
    not_503 = sorted({status for _, _, status in failed if status != "503"})
    after = [e for e in outcomes.events if e[0] > up_at + RECOVERY_GRACE]
    leaked = [body for body in outcomes.bodies_5xx if "Traceback" in body or "psycopg" in body]
    problems = check_database(project_id, outcomes.accepted)
    details = [
        f"requests failed while the database was down: {len(in_gap)} (all 503: {not not_503})",
        f"requests failed outside the gap (+{RECOVERY_GRACE:.0f} s): {len(outside)}",
        f"requests after recovery: {len(after)}, all succeeded: {all(s in OK for _, _, s in after)}",
        f"accepted submissions: {len(outcomes.accepted)}, database problems: {len(problems)}",
        *problems[:10],
    ]
    failures = []
    if not in_gap:
        failures.append("no request failed during the gap: the fault did not bite")
    if not_503:
        failures.append(f"failures other than 503: {not_503}")
    if leaked:
        failures.append("an error page leaked a traceback or driver message")
    if outside or not after:
        failures.append("requests failed after PostgreSQL was back (or none were made)")
    if problems:
        failures.append(f"{len(problems)} integrity problems")
    return verdict("PostgreSQL restarted during load", failures, details)


if __name__ == "__main__":
    sys.exit(main())
