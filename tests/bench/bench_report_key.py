"""Benchmark: what the InFoBench report's cache key costs on every report page and figure request.

The key (evaluation.services.reports._fingerprint) reads the labels' and scores' aggregates, the
counted work, the kinds and, since the cache-key audit, a hash of the benchmark's instructions,
questions, responses and system names (layout_fingerprint) and of the name order of the
annotators who may count (annotator_kinds._name_order). Those two grow with the benchmark's
size and the number of annotators, not with its labels: timed here at ten times InFoBench's
size (5,000 instructions, 22,500 questions, 5 systems, 2,000 annotators), alone and as part of
the whole key, with a few labels only. Median of `--rounds`; machine load printed.

The counted work is hashed id by id (annotate.selectors.fingerprints.ids_fingerprint, since the
key audit of issue hkey), and the stamps of corrections and kind decisions are summed rather
than their maximum read: 20,000 submitted assignments (four per instruction), 1,000 annotators
with a decided kind's stamp and 25 corrected labels are made for those parts, timed alone
("counted work") as well. Run it on an older checkout to compare (the parts it does not have
are skipped there).

    .venv/bin/python tests/bench/bench_report_key.py [--rounds 7]
    DATABASE_URL=postgres://... .venv/bin/python tests/bench/bench_report_key.py  (a scratch DB)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

INSTRUCTIONS, QUESTIONS_EACH, SYSTEMS, ANNOTATORS = 5_000, 4.5, 5, 2_000
WORK_PER_INSTRUCTION = 4


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def build():
    from django.utils import timezone

    from annotate.models import (
        Annotator,
        Assignment,
        Batch,
        Benchmark,
        Instruction,
        Label,
        Project,
        Question,
        Response,
        Subset,
        System,
        Task,
    )

    benchmark = Benchmark.objects.create(name=f"bench-key-{time.time_ns()}")
    instructions = Instruction.objects.bulk_create(
        Instruction(
            benchmark=benchmark,
            external_id=f"i{n}",
            subset=Subset.EASY if n % 2 else Subset.HARD,
            category=f"Domain {n % 40}",
            text=f"Write {n} words about the sea.",
            position=n,
        )
        for n in range(INSTRUCTIONS)
    )
    questions = Question.objects.bulk_create(
        Question(instruction=instruction, position=p, text="?", constraint_mask=1)
        for n, instruction in enumerate(instructions)
        for p in range(1, 5 + n % 2)
    )
    systems = [System.objects.get_or_create(name=f"bench-sys-{s}")[0] for s in range(SYSTEMS)]
    responses = Response.objects.bulk_create(
        Response(instruction=i, system=s, text="r") for i in instructions for s in systems
    )
    stamp = time.time_ns()
    annotators = Annotator.objects.bulk_create(
        Annotator(name=f"bench-{stamp}-{n}", kind="crowd") for n in range(ANNOTATORS)
    )
    Label.objects.bulk_create(
        Label(question=questions[0], response=responses[0], annotator=a, value=1)
        for a in annotators[:50]
    )
    now = timezone.now()
    Label.objects.filter(annotator__in=annotators[:25]).update(changed_at=now)
    Annotator.objects.filter(pk__in=[a.pk for a in annotators[:1000]]).update(kind_changed_at=now)
    batch = Batch.objects.create(
        project=Project.objects.create(name=benchmark.name, benchmark=benchmark)
    )
    tasks = Task.objects.bulk_create(
        Task(batch=batch, instruction=instruction, position=n)
        for n, instruction in enumerate(instructions)
    )
    Assignment.objects.bulk_create(
        Assignment(
            task=task,
            annotator=annotators[(n * WORK_PER_INSTRUCTION + k) % ANNOTATORS],
            status="submitted",
            claimed_at=now,
            expires_at=now,
            submitted_at=now,
            order_seed=1,
        )
        for n, task in enumerate(tasks)
        for k in range(WORK_PER_INSTRUCTION)
    )
    return benchmark, len(questions), len(responses)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--interleaved", action="store_true", help="also time the old and new key parts in turn"
    )
    arguments = parser.parse_args()
    rounds = arguments.rounds
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ.setdefault("VAR_DIR", tempfile.mkdtemp(prefix="bench-key-"))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from annotate.selectors.annotator_kinds import _name_order
    from annotate.selectors.results import counted_work_fingerprint
    from evaluation.selectors.report_data import layout_fingerprint
    from evaluation.services.reports import _fingerprint

    benchmark, n_questions, n_responses = build()
    print(f"database: {connection.vendor}; load average: {os.getloadavg()}")
    print(
        f"{INSTRUCTIONS} instructions, {n_questions} questions, {n_responses} responses, "
        f"{ANNOTATORS} annotators, {INSTRUCTIONS * WORK_PER_INSTRUCTION} assignments"
    )
    for name, action in (
        ("layout_fingerprint", lambda: layout_fingerprint(benchmark.pk)),
        ("annotators' name order", lambda: _name_order(benchmark.pk)),
        ("counted work", lambda: counted_work_fingerprint(benchmark=benchmark)),
        ("whole key (_fingerprint)", lambda: _fingerprint(benchmark)),
    ):
        times = [timed(action) for _ in range(rounds)]
        print(f"{name}: median {statistics.median(times) * 1000:.1f} ms over {rounds} rounds")
    if arguments.interleaved:
        interleaved(benchmark, rounds)
    print(f"load average after: {os.getloadavg()}")


def _old_parts(benchmark):
    """The summaries the key read before issue hkey (count and sums of ids, latest stamps)."""
    from django.db.models import Count, F, Max, Sum

    from annotate.crowd.selectors import crowd_paid_work_q
    from annotate.models import Annotator, Assignment, Label
    from annotate.selectors.results import blocked_annotator_ids, counted_assignments

    counted = counted_assignments().filter(task__instruction__benchmark=benchmark)
    counted.aggregate(n=Count("id"), ids=Sum("id"), squares=Sum(F("id") * F("id")))
    sorted(blocked_annotator_ids().values_list("annotator_id", flat=True))
    paid = crowd_paid_work_q()
    Assignment.objects.filter(task__instruction__benchmark=benchmark).aggregate(
        paid=Count("id", distinct=True, filter=paid), ids=Sum("id", distinct=True, filter=paid)
    )
    Label.objects.filter(response__instruction__benchmark=benchmark).aggregate(
        changed=Max("changed_at"), n=Count("id"), total=Sum("value")
    )
    Annotator.objects.aggregate(last=Max("kind_changed_at"))


def _new_parts(benchmark):
    """The same parts as the key reads them now."""
    from django.db.models import Count, Sum

    from annotate.crowd.selectors import crowd_paid_work_q
    from annotate.models import Annotator, Assignment, Label
    from annotate.selectors.fingerprints import ids_fingerprint, stamps_sum
    from annotate.selectors.results import counted_work_fingerprint

    counted_work_fingerprint(benchmark=benchmark)
    assignments = Assignment.objects.filter(task__instruction__benchmark=benchmark)
    ids_fingerprint(assignments.filter(pk__in=assignments.filter(crowd_paid_work_q())))
    Label.objects.filter(response__instruction__benchmark=benchmark).aggregate(
        changed=Count("changed_at"),
        stamps=stamps_sum("changed_at"),
        n=Count("id"),
        total=Sum("value"),
    )
    Annotator.objects.aggregate(n=Count("kind_changed_at"), stamps=stamps_sum("kind_changed_at"))


def interleaved(benchmark, rounds: int) -> None:
    """Old and new summaries of the counted work, the paid work and the stamps, one after the
    other in each round on the same data, so the machine's load falls on both alike."""
    old, new = [], []
    for _ in range(rounds):
        old.append(timed(lambda: _old_parts(benchmark)))
        new.append(timed(lambda: _new_parts(benchmark)))
    o, n = statistics.median(old) * 1000, statistics.median(new) * 1000
    print(f"changed parts, old: median {o:.1f} ms; new: median {n:.1f} ms ({n / o - 1:+.0%})")
    # The hash alone: every assignment of the benchmark, no counting rule around it.
    from django.db.models import Count, F, Sum

    from annotate.models import Assignment
    from annotate.selectors.fingerprints import ids_fingerprint

    rows = Assignment.objects.filter(task__instruction__benchmark=benchmark)
    old, new = [], []
    for _ in range(rounds):
        old.append(
            timed(lambda: rows.aggregate(Count("id"), Sum("id"), squares=Sum(F("id") * F("id"))))
        )
        new.append(timed(lambda: ids_fingerprint(rows)))
    o, n = statistics.median(old) * 1000, statistics.median(new) * 1000
    print(
        f"{rows.count()} ids, count and sums: median {o:.1f} ms; ids_fingerprint: median "
        f"{n:.1f} ms ({n / o - 1:+.0%})"
    )


if __name__ == "__main__":
    main()
