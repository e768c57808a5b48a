"""Publish 1,000 HITs to the fake MTurk server through the real boto3 client, with 10% of calls
throttled (ThrottlingException), and check that no HIT was made twice.

    .venv/bin/python tests/bench/bench_publish.py [--hits 1000] [--throttle 0.1] [--lost 0.0]

boto3 retries a throttled call itself (standard mode, MTURK_MAX_ATTEMPTS attempts in all, with
exponential backoff); when it gives up, the publication is marked partial and published again,
as the Celery task's own retry would. `--lost` also drops that share of CreateHIT replies after
the HIT is made, so retries meet HitAlreadyExists and must adopt the existing HIT.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def setup_django(workdir: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir}/bench.sqlite3"
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "AKIDFAKEFAKEFAKE")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "fake-secret")
    os.environ["AWS_CONFIG_FILE"] = os.environ["AWS_SHARED_CREDENTIALS_FILE"] = "/nonexistent"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def make_batch(hits: int):
    from annotate.models import Batch, Benchmark, Instruction, Project, Task

    benchmark = Benchmark.objects.create(name="bench")
    instructions = Instruction.objects.bulk_create(
        Instruction(benchmark=benchmark, external_id=f"i{n}", subset="easy", text=f"Do {n}.")
        for n in range(hits)
    )
    project = Project.objects.create(name="bench", benchmark=benchmark, assignments_per_task=3)
    batch = Batch.objects.create(project=project, name="all")
    Task.objects.bulk_create(
        Task(batch=batch, instruction=instruction, position=n)
        for n, instruction in enumerate(instructions)
    )
    return batch


def run(hits: int, throttle: float, lost: float) -> dict:
    from django.conf import settings
    from django.utils import timezone

    from annotate.crowd.models import HitStatus, PublicationStatus
    from annotate.crowd.services import publishing
    from annotate.errors import TransientPlatformError
    from tests.annotate.crowd.fake_mturk import FakeMTurkServer

    with FakeMTurkServer() as server:
        settings.CROWD_BACKEND = "mturk"
        settings.MTURK_ENDPOINT_URL = server.url
        batch = make_batch(hits)
        publication = publishing.publication_create(
            batch=batch,
            platform_name="mturk",
            chosen=publishing.PublishSettings(title="Bench", description="Bench"),
            base_url="https://annotate.example.org",
        )
        server.state.throttle_rate = throttle
        if lost:
            original = server.api.op_CreateHITWithHITType
            rng = random.Random(3)

            def sometimes_lose_reply(body):
                if rng.random() < lost:
                    server.state.lose_create_replies += 1
                return original(body)

            server.api.op_CreateHITWithHITType = sometimes_lose_reply
        started = time.perf_counter()
        rounds = 0
        while True:
            rounds += 1
            try:
                result = publishing.publication_publish(
                    publication_id=publication.pk, now=timezone.now()
                )
            except TransientPlatformError:
                continue  # what the Celery task's autoretry does, minus its wait
            if result.status == PublicationStatus.PUBLISHED or rounds > 20:
                break
        elapsed = time.perf_counter() - started
        tokens = Counter(h["RequesterAnnotation"] for h in server.state.hits.values())
        ours = publication.hits.filter(status=HitStatus.CREATED)
        return {
            "hits_on_server": len(server.state.hits),
            "duplicates": sum(count - 1 for count in tokens.values()),
            "hits_created_here": ours.count(),
            "ours_match_server": set(ours.values_list("hit_id", flat=True))
            == set(server.state.hits),
            "status": result.status,
            "publish_rounds": rounds,
            "calls": len(server.state.calls),
            "throttled_calls": server.state.throttled,
            "seconds": round(elapsed, 1),
            "hits_per_second": round(hits / elapsed, 1),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hits", type=int, default=1000)
    parser.add_argument("--throttle", type=float, default=0.1)
    parser.add_argument("--lost", type=float, default=0.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        setup_django(workdir)
        result = run(args.hits, args.throttle, args.lost)
    print(
        f"bench_publish: {args.hits} HITs, {args.throttle:.0%} of calls throttled, "
        f"{args.lost:.0%} of create replies lost"
    )
    for key, value in result.items():
        print(f"  {key}: {value}")
    if result["duplicates"] or not result["ours_match_server"] or result["status"] != "published":
        sys.exit("FAILED: duplicates or missing HITs")


if __name__ == "__main__":
    main()
