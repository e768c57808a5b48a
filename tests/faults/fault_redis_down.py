"""Fault: Redis stopped while annotators submit, and work queued while it is down.

    .venv/bin/python tests/faults/fault_redis_down.py [--annotators 16] [--gap 10]

Starts its own PostgreSQL and Redis, gunicorn (Redis as broker and cache) and a Celery worker
with an embedded beat (expiry and deferred-task sends every 2 s). Annotators work through the
real pages; after 5 s Redis is stopped. While it is down a judge run is started (its tasks cannot
reach the broker) and an old claim is left to expire. Then Redis is started again. PASS when
every annotator request succeeded, the database holds every accepted submission once, the judge
run finished with one label per question and response, no deferred task is left, and the old
claim was expired by the beat after Redis returned (not before).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from datetime import timedelta
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
    CeleryWorker,
    PrivatePostgres,
    PrivateRedis,
    keep_working,
    verdict,
    wait_until,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=16)
    parser.add_argument("--gap", type=float, default=10)
    args = parser.parse_args()
    postgres, redis = PrivatePostgres(), PrivateRedis()
    workdir = Path(tempfile.mkdtemp(prefix="fault-redis-"))
    worker = CeleryWorker(workdir / "worker.log", beat=True)
    try:
        postgres.start()
        redis.start()
        return run(args, postgres, redis, worker, workdir)
    finally:
        worker.stop()
        redis.close()
        postgres.close()


def start_judge_run():
    """Start a judge run of 3 instructions x 5 systems (15 conversations) on the fake back-end."""
    from django.db import transaction

    from annotate.models import Benchmark, System
    from evaluation.services.judge_configs import judge_config_create
    from evaluation.services.judge_runs import judge_run_create, judge_run_start

    config = judge_config_create(
        name="fault-judge",
        backend="fake",
        requests_per_minute=1_000_000,  # the fake answers at once; the default limit would pace it
        tokens_per_minute=1_000_000_000,
    )
    with transaction.atomic():
        run = judge_run_create(
            config=config,
            benchmark=Benchmark.objects.get(name="bench"),
            systems=System.objects.all(),
            sample=3,
        )
        judge_run_start(run=run)
    return run


def leave_an_old_claim(project_id: int):
    """Claim a task as of a day ago: its time is long up, so the expiry beat must free it."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from annotate.models import Project
    from annotate.services.assignments import annotator_for_user, assignment_claim_next

    user = User.objects.create_user("left-for-lunch", password=None)
    return assignment_claim_next(
        annotator=annotator_for_user(user=user),
        project=Project.objects.get(pk=project_id),
        now=timezone.now() - timedelta(days=1),
    )


def run(args, postgres, redis, worker, workdir: Path) -> int:
    import psycopg

    with psycopg.connect(postgres.url("postgres"), autocommit=True) as conn:
        conn.execute("CREATE DATABASE faults")
    setup_django(
        {
            "DATABASE_URL": postgres.url("faults"),
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DJANGO_DEBUG": "false",
            "DATABASE_CONN_MAX_AGE": "60",
            "CELERY_BROKER_URL": redis.url(),
            "CACHE_URL": redis.url(1),
            "JUDGE_BACKEND": "fake",
            "ASSIGNMENT_EXPIRY_INTERVAL": "2",
            "DEFERRED_TASK_INTERVAL": "2",
            "VAR_DIR": str(workdir),
            "LOG_LEVEL": "WARNING",
        }
    )
    project_id, keys = fill(args.annotators, 400)
    worker.start()
    port = free_port()
    log = (workdir / "gunicorn.log").open("w")
    server = start_gunicorn(port, 4, log=log)
    annotators = [
        Annotator(f"http://127.0.0.1:{port}", key, project_id, seed)
        for seed, key in enumerate(keys)
    ]
    try:
        for annotator in annotators:
            annotator.one_task(warm_up=True)
        started = time.monotonic()
        deadline = started + 10 + args.gap
        threads = [threading.Thread(target=keep_working, args=(a, deadline)) for a in annotators]
        for thread in threads:
            thread.start()
        time.sleep(5)
        redis.stop()
        judge_run = start_judge_run()
        claim = leave_an_old_claim(project_id)
        time.sleep(max(0.0, args.gap - 2))
        claim.refresh_from_db()
        claimed_during_gap = claim.status
        from annotate.models import DeferredTask

        deferred_during_gap = DeferredTask.objects.count()
        redis.start()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - started
        recovered = wait_until(lambda: finished(judge_run, claim), timeout=120)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    outcomes = merge([annotator.outcomes for annotator in annotators])
    print(f"fault: Redis stopped {args.gap:.0f} s under {args.annotators} annotators")
    print_latencies(outcomes, wall)
    failed = [e for e in outcomes.events if e[2] not in OK]
    problems = check_database(project_id, outcomes.accepted)
    judge_run.refresh_from_db()
    claim.refresh_from_db()
    labels, expected = judge_labels(judge_run)
    details = [
        f"annotator requests: {len(outcomes.events)}, failed: {len(failed)}",
        f"accepted submissions: {len(outcomes.accepted)}, database problems: {len(problems)}",
        f"tasks deferred while Redis was down: {deferred_during_gap}, left afterwards: "
        f"{DeferredTask.objects.count()}",
        f"judge run started during the gap: {judge_run.status}, labels {labels} of {expected}",
        f"old claim: {claimed_during_gap} while Redis was down, {claim.status} after",
        f"worker log: {worker.log}",
    ]
    failures = []
    if failed:
        failures.append(
            f"{len(failed)} annotator requests failed: {sorted({e[2] for e in failed})}"
        )
    if problems:
        failures.append(f"{len(problems)} integrity problems")
    if not deferred_during_gap:
        failures.append("nothing was deferred: the judge run did not meet the outage")
    if not recovered or judge_run.status != "done" or labels != expected:
        failures.append("the work queued during the outage did not complete once Redis was back")
    if claimed_during_gap != "claimed" or claim.status != "expired":
        failures.append("the expiry beat did not resume after Redis returned")
    return verdict("Redis stopped while annotators submit", failures, details)


def finished(judge_run, claim) -> bool:
    from annotate.models import DeferredTask

    judge_run.refresh_from_db()
    claim.refresh_from_db()
    return (
        judge_run.status in ("done", "failed")
        and claim.status == "expired"
        and not DeferredTask.objects.exists()
    )


def judge_labels(judge_run) -> tuple[int, int]:
    """Return (labels stored under the judge for the run's responses, questions asked)."""
    from annotate.models import Label, Question

    conversations = judge_run.conversations.select_related("response")
    expected = sum(
        Question.objects.filter(instruction_id=c.response.instruction_id).count()
        for c in conversations
    )
    labels = Label.objects.filter(
        annotator=judge_run.config.annotator,
        response_id__in=[c.response_id for c in conversations],
    ).count()
    return labels, expected


if __name__ == "__main__":
    sys.exit(main())
