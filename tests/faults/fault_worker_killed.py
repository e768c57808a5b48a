"""Fault: the Celery worker SIGKILLed in the middle of a judge run, a publish and bonus payments.

    .venv/bin/python tests/faults/fault_worker_killed.py [--stub-delay 0.2]

Starts its own PostgreSQL and Redis, the OpenAI-compatible stub (answers after --stub-delay s)
and the fake MTurk server (every CreateHIT and SendBonus slowed down), and a Celery worker
(2 processes; CELERY_VISIBILITY_TIMEOUT=10 so a dead worker's tasks come back within seconds
instead of production's 15 minutes). For each of the three jobs it kills the whole worker
(SIGKILL to its process group) once part of the work is done, starts a new one, and waits.
PASS when each job completes and nothing is doubled: one label and one stored call per question
and response, one HIT per task on the fake server, one bonus per bonus row, paid once.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections import Counter
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.harness import fill, setup_django, start_openai_stub  # noqa: E402
from tests.faults.private import (  # noqa: E402
    CeleryWorker,
    PrivatePostgres,
    PrivateRedis,
    verdict,
    wait_until,
)

HITS = 60
BONUSES = 12


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stub-delay", type=float, default=0.2)
    args = parser.parse_args()
    from tests.annotate.crowd.fake_mturk import FakeMTurkServer

    postgres, redis = PrivatePostgres(), PrivateRedis()
    workdir = Path(tempfile.mkdtemp(prefix="fault-worker-"))
    worker = CeleryWorker(workdir / "worker.log", concurrency=2)
    stub, stub_url = start_openai_stub(args.stub_delay)
    mturk = FakeMTurkServer().start()
    try:
        postgres.start()
        redis.start()
        prepare(postgres, redis, mturk, workdir)
        results = [
            kill_during_judge_run(worker, stub_url),
            kill_during_publish(worker, mturk),
            kill_during_bonuses(worker, mturk),
        ]
    finally:
        worker.stop()
        mturk.stop()
        stub.terminate()
        stub.wait()
        redis.close()
        postgres.close()
    failures = [failure for _, _, fails in results for failure in fails]
    details = [f"{name}: {line}" for name, lines, _ in results for line in lines]
    details.append(f"worker log: {worker.log}")
    return verdict("Celery worker killed mid-run", failures, details)


def prepare(postgres, redis, mturk, workdir: Path) -> None:
    import psycopg

    with psycopg.connect(postgres.url("postgres"), autocommit=True) as conn:
        conn.execute("CREATE DATABASE faults")
    setup_django(
        {
            "DATABASE_URL": postgres.url("faults"),
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DJANGO_DEBUG": "false",
            "CELERY_BROKER_URL": redis.url(),
            "CELERY_VISIBILITY_TIMEOUT": "10",
            # The killed publish's lease is stale as soon as its task comes back (production:
            # 600 s, shorter than the 900 s visibility timeout).
            "CROWD_PUBLISH_STALE_SECONDS": "10",
            "CROWD_BACKEND": "mturk",
            "MTURK_ENDPOINT_URL": mturk.url,
            "MTURK_MAX_ATTEMPTS": "2",
            "AWS_ACCESS_KEY_ID": "AKIDFAKEFAKEFAKE",
            "AWS_SECRET_ACCESS_KEY": "fake-secret",
            "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
            "VAR_DIR": str(workdir),
            "LOG_LEVEL": "WARNING",
        }
    )
    fill(0, HITS)


def kill_and_restart(worker: CeleryWorker, progress, at_least: int, timeout: float = 120) -> int:
    """Start the worker, SIGKILL it once `progress()` reaches `at_least`, start a new one."""
    worker.stop()  # the previous job's worker, if any
    worker.start()
    if not wait_until(lambda: progress() >= at_least, timeout=timeout, step=0.1):
        raise SystemExit(f"no progress before the kill ({progress()} of {at_least})")
    worker.kill()
    done_at_kill = progress()
    worker.start()
    return done_at_kill


def kill_during_judge_run(worker: CeleryWorker, stub_url: str):
    from django.db.models import Count

    from annotate.models import Benchmark, Label, Question, System
    from evaluation.models import JudgeCall
    from evaluation.services.judge_configs import judge_config_create
    from evaluation.services.judge_runs import judge_run_create, judge_run_start

    config = judge_config_create(
        name="fault-judge",
        backend="openai",
        base_url=stub_url,
        api_key_env="",
        requests_per_minute=1_000_000,
        tokens_per_minute=1_000_000_000,
    )
    run = judge_run_create(
        config=config,
        benchmark=Benchmark.objects.get(name="bench"),
        systems=System.objects.all(),
        sample=4,
    )
    judge_run_start(run=run)  # one task per conversation, sent at once (no transaction open)
    calls = JudgeCall.objects.filter(conversation__run=run)
    killed_at = kill_and_restart(worker, calls.count, at_least=40)
    wait_until(lambda: run_status(run) in ("done", "failed"), timeout=240)
    responses = list(run.conversations.values_list("response_id", flat=True))
    expected = sum(
        Question.objects.filter(instruction__responses__id=response_id).count()
        for response_id in responses
    )
    labels = Label.objects.filter(annotator=config.annotator, response_id__in=responses)
    doubled = (
        labels.values("question_id", "response_id").annotate(n=Count("id")).filter(n__gt=1).count()
    )
    lines = [
        f"killed with {killed_at} of {expected} calls stored; run {run_status(run)}, "
        f"labels {labels.count()}, stored calls {calls.count()}, doubled labels {doubled}",
    ]
    failures = []
    if run_status(run) != "done" or labels.count() != expected or calls.count() != expected:
        failures.append("judge run: not completed with one label and one call per question")
    if doubled:
        failures.append(f"judge run: {doubled} questions labelled twice")
    return "judge run", lines, failures


def run_status(run) -> str:
    run.refresh_from_db()
    return run.status


def slow_down(mturk, operation: str, seconds: float) -> None:
    original = getattr(mturk.api, operation)

    def slowly(body):
        time.sleep(seconds)
        return original(body)

    setattr(mturk.api, operation, slowly)


def kill_during_publish(worker: CeleryWorker, mturk):
    from annotate.crowd import tasks
    from annotate.crowd.models import Hit, HitStatus, Publication
    from annotate.crowd.services import publishing
    from annotate.models import Batch
    from annotate.services.deferred_tasks import task_send

    slow_down(mturk, "op_CreateHITWithHITType", 0.25)
    publication = publishing.publication_create(
        batch=Batch.objects.get(project__name="bench"),
        platform_name="mturk",
        chosen=publishing.PublishSettings(title="Fault", description="Kill the worker"),
        base_url="https://annotate.example.org",
    )
    task_send(task=tasks.publish_publication, args=(publication.pk,))
    killed_at = kill_and_restart(worker, lambda: len(mturk.state.hits), at_least=10)
    wait_until(
        lambda: Publication.objects.get(pk=publication.pk).status == "published", timeout=180
    )
    publication.refresh_from_db()
    ours = set(
        Hit.objects.filter(publication=publication, status=HitStatus.CREATED).values_list(
            "hit_id", flat=True
        )
    )
    with mturk.state.lock:
        on_server = set(mturk.state.hits)
        per_task = Counter(hit["RequesterAnnotation"] for hit in mturk.state.hits.values())
    doubled = sum(count - 1 for count in per_task.values())
    lines = [
        f"killed with {killed_at} of {HITS} HITs made; publication {publication.status}, "
        f"HITs on the server {len(on_server)}, ours {len(ours)}, doubled {doubled}",
    ]
    failures = []
    if publication.status != "published" or ours != on_server or len(on_server) != HITS:
        failures.append("publish: not one HIT per task, or ours differ from the server's")
    if doubled:
        failures.append(f"publish: {doubled} tasks have two HITs")
    return "publish", lines, failures


def kill_during_bonuses(worker: CeleryWorker, mturk):
    from annotate.crowd import tasks
    from annotate.crowd.models import Bonus, BonusStatus
    from annotate.services.deferred_tasks import task_send

    admin, bonuses = crowd_work_with_bonuses(mturk)
    balance_before = mturk.state.balance
    slow_down(mturk, "op_SendBonus", 0.6)
    for bonus in bonuses:
        task_send(task=tasks.pay_bonus, args=(bonus.pk, admin.pk))
    killed_at = kill_and_restart(worker, lambda: len(mturk.state.bonuses), at_least=3)
    paid = Bonus.objects.filter(pk__in=[b.pk for b in bonuses], status=BonusStatus.PAID)
    wait_until(lambda: paid.count() == BONUSES, timeout=120)
    with mturk.state.lock:
        sent = Counter(row["UniqueRequestToken"] for row in mturk.state.bonuses)
        spent = balance_before - mturk.state.balance
    expected_spend = Decimal("0.50") * BONUSES
    lines = [
        f"killed with {killed_at} of {BONUSES} bonuses sent; paid rows {paid.count()}, "
        f"bonuses on the server {sum(sent.values())}, spent ${spent} (expected ${expected_spend})",
    ]
    failures = []
    if paid.count() != BONUSES or sum(sent.values()) != BONUSES or max(sent.values()) > 1:
        failures.append("bonuses: not every bonus paid exactly once")
    if spent != expected_spend:
        failures.append(f"bonuses: spent ${spent}, expected ${expected_spend}")
    return "bonuses", lines, failures


def crowd_work_with_bonuses(mturk):
    """Have fake workers take some HITs and store one $0.50 bonus for each of them."""
    from django.contrib.auth.models import Group, User
    from django.utils import timezone

    from annotate.crowd.models import Bonus, Hit, HitStatus
    from annotate.models import Annotator, AnnotatorKind, Assignment, AssignmentStatus
    from annotate.roles import ADMIN

    admin = User.objects.create_superuser("fault-admin", password=None)
    admin.groups.add(Group.objects.get(name=ADMIN))
    now = timezone.now()
    bonuses = []
    for index, hit in enumerate(Hit.objects.filter(status=HitStatus.CREATED)[:BONUSES]):
        worker_id = f"AFAULTWORKER{index:04d}"
        assignment_id = mturk.api.worker_accept(hit.hit_id, worker_id)
        mturk.api.worker_submit(assignment_id, {"done": "yes"})
        annotator = Annotator.objects.create(
            name=f"mturk:{worker_id}",
            kind=AnnotatorKind.CROWD,
            platform="mturk",
            worker_id=worker_id,
        )
        assignment = Assignment.objects.create(
            task=hit.task,
            annotator=annotator,
            status=AssignmentStatus.SUBMITTED,
            claimed_at=now,
            expires_at=now,
            submitted_at=now,
            order_seed=index,
            platform_assignment_id=assignment_id,
            platform_hit_id=hit.hit_id,
        )
        bonuses.append(
            Bonus.objects.create(
                assignment=assignment,
                amount_usd=Decimal("0.50"),
                reason="Careful work",
                unique_request_token=uuid.uuid4().hex,
                created_by=admin,
            )
        )
    return admin, bonuses


if __name__ == "__main__":
    sys.exit(main())
