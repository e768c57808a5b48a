"""Benchmark: the label list of a benchmark at InFoBench scale (issue 16).

500 instructions x 5 systems x 6 questions, 8 annotators (4 experts, 3 crowd workers with
assignments, one of them rejected, and an LLM judge): 120,000 labels on PostgreSQL
(BENCH_DATABASE_URL, default postgres://root@127.0.0.1:5432/h_product3_bench, dropped and
recreated). A researcher not on the project (so crowd names go through the identity scope) opens
the list unfiltered (first and last page), filtered to crowd work that does not count, and
searched; each request 5 times through Django's test client, median and worst in ms, with the
number of queries.

    .venv/bin/python tests/bench/bench_label_list.py
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.harness import recreate_database, setup_django  # noqa: E402

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://root@127.0.0.1:5432/h_product3_bench")
INSTRUCTIONS, SYSTEMS, QUESTIONS = 500, 5, 6


def fill() -> int:
    from django.utils import timezone

    from annotate import models

    benchmark = models.Benchmark.objects.create(name="bench labels")
    systems = [models.System.objects.create(name=f"system-{i}") for i in range(SYSTEMS)]
    instructions = models.Instruction.objects.bulk_create(
        models.Instruction(
            benchmark=benchmark,
            external_id=f"bench_{i}",
            position=i,
            subset=models.Subset.EASY if i % 2 else models.Subset.HARD,
            category=("Email", "Poetry", "Code")[i % 3],
            text=f"Write story number {i}.",
        )
        for i in range(INSTRUCTIONS)
    )
    questions = models.Question.objects.bulk_create(
        models.Question(instruction=inst, position=p, text=f"Requirement {p}?", constraint_mask=1)
        for inst in instructions
        for p in range(1, QUESTIONS + 1)
    )
    responses = models.Response.objects.bulk_create(
        models.Response(instruction=inst, system=s, text="text")
        for inst in instructions
        for s in systems
    )
    project = models.Project.objects.create(name="bench", benchmark=benchmark)
    batch = models.Batch.objects.create(project=project)
    tasks = {
        inst.pk: t
        for inst, t in zip(
            instructions,
            models.Task.objects.bulk_create(
                models.Task(batch=batch, instruction=i) for i in instructions
            ),
            strict=True,
        )
    }
    annotators = [
        models.Annotator.objects.create(name=f"expert-{i}", kind=models.AnnotatorKind.EXPERT)
        for i in range(4)
    ]
    annotators.append(models.Annotator.objects.create(name="judge", kind=models.AnnotatorKind.LLM))
    now = timezone.now()
    crowd = []
    for i, status in enumerate(("approved", "approved", "rejected")):
        worker = models.Annotator.objects.create(
            name=f"selfhosted:W{i}", kind="crowd", platform="selfhosted", worker_id=f"W{i}"
        )
        assignments = models.Assignment.objects.bulk_create(
            models.Assignment(
                task=tasks[inst.pk],
                annotator=worker,
                status=status,
                claimed_at=now,
                expires_at=now,
                submitted_at=now,
                order_seed=1,
            )
            for inst in instructions
        )
        crowd.append((worker, {a.task.instruction_id: a.pk for a in assignments}))
    by_instruction: dict[int, list] = {}
    for question in questions:
        by_instruction.setdefault(question.instruction_id, []).append(question)
    labels = []
    for response in responses:
        for question in by_instruction[response.instruction_id]:
            for n, annotator in enumerate(annotators):
                labels.append(
                    models.Label(
                        question=question, response=response, annotator=annotator, value=n % 3
                    )
                )
            for worker, assignment_of in crowd:
                labels.append(
                    models.Label(
                        question=question,
                        response=response,
                        annotator=worker,
                        value=1,
                        assignment_id=assignment_of[response.instruction_id],
                    )
                )
    models.Label.objects.bulk_create(labels, batch_size=5000)
    return benchmark.pk


def _matching(page: str) -> str:
    found = re.search(r"\(([0-9]+) in all\)", page)
    return f"{int(found[1]):,}" if found else "one page"


def main() -> None:
    recreate_database(URL)
    setup_django(
        {
            "DATABASE_URL": URL,
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DJANGO_DEBUG": "false",
        }
    )
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from annotate.models import Label
    from annotate.roles import RESEARCHER
    from tests.factories import UserFactory

    started = time.perf_counter()
    benchmark_id = fill()
    print(f"filled {Label.objects.count():,} labels in {time.perf_counter() - started:.1f} s")
    client = Client()
    client.force_login(UserFactory(username="bench-researcher", roles=[RESEARCHER]))
    base = f"/benchmarks/{benchmark_id}/labels/"
    last = (Label.objects.count() + 49) // 50
    for name, query in (
        ("first page", ""),
        (f"last page ({last})", f"?page={last}"),
        ("crowd, not counted", "?kind=crowd&counted=no"),
        ("search + subset + value", "?q=story+42&subset=hard&value=1"),
    ):
        times = []
        for _ in range(5):
            with CaptureQueriesContext(connection) as queries:
                t0 = time.perf_counter()
                response = client.get(base + query)
                times.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 200, response.status_code
        print(
            f"{name:<28} median {statistics.median(times):7.1f} ms  worst {max(times):7.1f} ms"
            f"  queries {len(queries)}  matching {_matching(response.content.decode())}"
        )


if __name__ == "__main__":
    main()
