"""Report speed: the full report over 1,000,020 and 10,000,020 labels on PostgreSQL.

10,000 instructions × 5 systems × 6.67 questions × 3 expert annotators = 1,000,020 labels (and ten
times the instructions for 10,000,020), written by a binary COPY FROM into a scratch database of
their own. Then, in a fresh process each time:

- the time PostgreSQL needs to COPY the same label rows out (binary, to this process, which only
  counts the bytes): the floor of any read (issue 17: the read within 2x of it),
- the time to read the labels from the database into arrays (the floor for any report), and
- the time and the memory (peak RSS of the process, and above the process after start-up) of
  report_build: leaderboard with bootstrap CIs for 5 sources, Fleiss' kappa with CIs, sources
  against the expert majority, breakdowns, disagreement levels.

    python tests/bench/bench_report.py
    PG_URL=postgres://root@127.0.0.1:5432 ...     # where to create the scratch databases
    BENCH_KEEP=1 ...                              # keep the databases and reuse them next time
    BENCH_REPORT_DB=perf_report ...               # the 1 M database's name (bench_report)
    BENCH_REPORT_DB10=perf_report10 ...           # the 10 M database's name (<1 M name>_10m)
    BENCH_REPORT_SKIP_10M=1 ...                   # only the 1 M case (the 10 M one takes minutes)
    BENCH_REPORT_RUNS=1 ...                       # fresh processes per measurement at 1 M (3)
    BENCH_REPORT_BASELINE=/tmp/old ...            # also time the report of another checkout
                                                  # (`git archive main`), interleaved with this one
    BENCH_REPORT_SHAPE=crowd ...                  # crowd-shaped labels (below); databases
                                                  # <name>_crowd unless named

The default shape has every label without an assignment (in-house experts' imported labels), so
the report never reads an assignment. BENCH_REPORT_SHAPE=crowd writes the same labels, each on a
counted MTurk assignment instead: one batch of a task per instruction, 3 MTurk workers (crowd
kind) with an approved assignment of every task (30,000 at 1 M labels), each with its shuffled
display order and an Approved platform record on its task's production HIT; plus a sandbox
publication of a second batch's 10,000 HITs (no work), which the counting rule's sandbox test
reads. Same bulk path: the assignments, HITs and records by bulk_create, the labels by COPY FROM.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
# A child timing the baseline imports the code of that checkout instead (BENCH_REPORT_BASELINE).
sys.path.insert(0, os.environ.get("BENCH_REPORT_CODE") or str(ROOT))

from tests.bench import bench_import  # noqa: E402
from tests.bench.bench_import import PG_URL, SYSTEMS, fresh_pg, write_big  # noqa: E402
from tests.bench.bench_import import child as run_child  # noqa: E402

SHAPE = os.environ.get("BENCH_REPORT_SHAPE", "expert")  # "crowd": every label on an assignment
if SHAPE not in ("expert", "crowd"):
    raise SystemExit(f"BENCH_REPORT_SHAPE must be expert or crowd, not {SHAPE!r}")
DATABASE = os.environ.get(
    "BENCH_REPORT_DB", "bench_report" + ("_crowd" if SHAPE == "crowd" else "")
)
DATABASE_10M = os.environ.get("BENCH_REPORT_DB10", f"{DATABASE}_10m")
SKIP_10M = os.environ.get("BENCH_REPORT_SKIP_10M") == "1"
RUNS = int(os.environ.get("BENCH_REPORT_RUNS", "3"))  # fresh processes per measurement
BASELINE = os.environ.get("BENCH_REPORT_BASELINE", "")  # a checkout whose report is timed too
# BENCH_KEEP=1 keeps the scratch database and reuses it on the next run (skips the import).
KEEP = os.environ.get("BENCH_KEEP") == "1"


def inner(step: str, workdir: Path) -> None:
    """Run inside a child process with DATABASE_URL set."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    import django

    django.setup()
    from django.core.management import call_command

    if step == "prepare":
        from annotate.services.imports import instructions_import, responses_import

        call_command("migrate", verbosity=0)
        instructions_import(path=str(workdir / "instructions.jsonl"), benchmark_name="big")
        for s in range(SYSTEMS):
            responses_import(
                path=str(workdir / f"responses{s}.jsonl"),
                benchmark_name="big",
                system_name=f"sys{s}",
            )
        created = _copy_labels_in()
        with django.db.connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        print(json.dumps({"labels": created}))
        return

    from annotate.models import Benchmark
    from annotate.selectors.identities import OPERATOR
    from evaluation.services.reports import report_build

    code = os.environ.get("BENCH_REPORT_CODE")
    if code and not report_build.__code__.co_filename.startswith(code):
        raise SystemExit(f"the baseline's code is not in use: {report_build.__code__.co_filename}")

    benchmark = Benchmark.objects.get(name="big")
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started, cpu_started = time.perf_counter(), time.process_time()
    if step == "copy":
        result = {"bytes": _copy_out(benchmark.pk)}
    elif step == "read":
        from evaluation.selectors.report_data import fetch_label_columns

        result = {"rows": len(fetch_label_columns(benchmark.pk).value)}
    else:
        report = report_build(scope=OPERATOR, benchmark=benchmark)
        del report["generated_at"]
        result = {
            "leaderboard_rows": len(report["leaderboard"]),
            "kappa": [r["fleiss_kappa"] for r in report["agreement"]],
            "n_resamples": report["n_resamples"],
            "digest": hashlib.sha256(json.dumps(report, sort_keys=True).encode()).hexdigest(),
        }
    result["seconds"] = time.perf_counter() - started
    # CPU of this process (all its threads), not of the PostgreSQL backends it waits for.
    result["cpu_seconds"] = time.process_time() - cpu_started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result["extra_mb"] = (peak - baseline) / 1024
    result["peak_mb"] = peak / 1024
    print(json.dumps(result))


# One label row of a binary COPY: field count, then (length, value) per column; the assignment is
# NULL (length -1, no value). Big-endian, as PostgreSQL's binary format wants.
_COPY_ROW = np.dtype(
    [
        ("fields", ">i2"),
        ("question_length", ">i4"),
        ("question", ">i8"),
        ("response_length", ">i4"),
        ("response", ">i8"),
        ("annotator_length", ">i4"),
        ("annotator", ">i8"),
        ("value_length", ">i4"),
        ("value", ">i2"),
        ("created_length", ">i4"),
        ("created", ">i8"),
        ("assignment_length", ">i4"),
    ]
)
# The same row with an assignment (length 8, value): the crowd shape.
_COPY_ROW_ASSIGNED = np.dtype(_COPY_ROW.descr + [("assignment", ">i8")])
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"


def _copy_labels_in() -> int:
    """Label every question of every response by each of 3 experts, as the label CSV of
    bench_import would (YES, YES, NO, UNKNOWN drawn at random), by a binary COPY FROM.

    Writing ten million labels as a CSV and importing them would take minutes; the rows are
    built in numpy instead, the label indexes dropped meanwhile and built again after.
    """
    from django.db import connection

    from annotate.models import Annotator, Label, Question, Response
    from annotate.services.label_imports import _rebuilt_indexes

    crowd = {"kind": "crowd", "platform": "mturk"} if SHAPE == "crowd" else {"kind": "expert"}
    annotators = [
        Annotator.objects.get_or_create(
            name=f"worker{a}",
            defaults={**crowd, "worker_id": f"W{a}" if crowd.get("platform") else ""},
        )[0].pk
        for a in range(bench_import.ANNOTATORS)
    ]
    questions = np.array(
        Question.objects.order_by("instruction_id", "position").values_list("id", "instruction_id"),
        dtype=np.int64,
    ).reshape(-1, 2)
    responses = np.array(
        Response.objects.order_by("instruction_id", "system__name").values_list(
            "id", "instruction_id"
        ),
        dtype=np.int64,
    ).reshape(-1, 2)
    instructions, first = np.unique(questions[:, 1], return_index=True)
    per_instruction = np.diff(np.append(first, len(questions)))
    rng = np.random.default_rng(7)
    # Per annotator and instruction (in id order): the assignment its labels come through.
    assignments = _crowd_assignments(instructions, annotators) if SHAPE == "crowd" else None
    created = 0
    with connection.cursor() as cursor:
        indexes = _rebuilt_indexes(cursor)
        for name, kind, _ in indexes:
            table = Label._meta.db_table
            drop = f'ALTER TABLE {table} DROP CONSTRAINT "{name}"'
            cursor.execute(drop if kind == "constraint" else f'DROP INDEX "{name}"')
        cursor.execute("SET session_replication_role = replica")  # no foreign key trigger per row
        columns = "question_id, response_id, annotator_id, value, created_at, assignment_id"
        with cursor.cursor.copy(
            f"COPY {Label._meta.db_table} ({columns}) FROM STDIN (FORMAT binary)"
        ) as copy:
            copy.write(_COPY_HEADER)
            for block in np.array_split(
                np.arange(len(responses)), max(1, len(responses) // 20_000)
            ):
                rows = _label_block(
                    responses[block], instructions, first, per_instruction, questions[:, 0]
                )
                created += _write_block(copy, rows, annotators, rng, assignments)
            copy.write(_COPY_TRAILER)
        cursor.execute("SET session_replication_role = DEFAULT")
        cursor.execute("SET maintenance_work_mem = '512MB'")
        for name, kind, definition in indexes:
            table = Label._meta.db_table
            add = f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}'
            cursor.execute(add if kind == "constraint" else definition)
    return created


def _crowd_assignments(instructions: np.ndarray, annotators: list[int]) -> np.ndarray:
    """Write the crowd shape's batches, tasks, assignments, publications, HITs and platform
    records; return the assignment ids as an (annotator, instruction index) array."""
    from datetime import timedelta

    from django.utils import timezone

    from annotate.crowd.models import Hit, PlatformAssignment, Publication
    from annotate.models import (
        Assignment,
        AssignmentStatus,
        Batch,
        Benchmark,
        Project,
        System,
        Task,
    )

    benchmark = Benchmark.objects.get(name="big")
    systems = list(System.objects.filter(responses__instruction__benchmark=benchmark).distinct())
    system_ids = np.array(sorted(s.pk for s in systems), dtype=np.int64)
    project = Project.objects.create(name="crowd", benchmark=benchmark)
    project.systems.set(systems)
    now = timezone.now()
    rng = np.random.default_rng(11)
    size = 2_000
    assignments = np.zeros((len(annotators), len(instructions)), dtype=np.int64)
    for sandbox in (False, True):
        batch = Batch.objects.create(project=project, name="sandbox" if sandbox else "production")
        tasks = Task.objects.bulk_create(
            [
                Task(batch=batch, instruction_id=int(i), position=n)
                for n, i in enumerate(instructions)
            ],
            batch_size=size,
        )
        publication = Publication.objects.create(
            batch=batch,
            platform="mturk",
            sandbox=sandbox,
            status="published",
            title="bench",
            description="bench",
            reward_usd=1,
            assignments_per_task=len(annotators),
            assignment_duration_seconds=3600,
            auto_approval_delay_seconds=3600,
            lifetime_seconds=86400,
            task_base_url="https://example.org",
            link_token=f"bench-{'sandbox' if sandbox else 'production'}",
        )
        prefix = "S" if sandbox else "H"
        hits = Hit.objects.bulk_create(
            [
                Hit(
                    publication=publication,
                    task=task,
                    unique_request_token=f"{prefix}{task.pk}",
                    max_assignments=len(annotators),
                    hit_id=f"{prefix}{task.pk}",
                    status="created",
                )
                for task in tasks
            ],
            batch_size=size,
        )
        if sandbox:
            break
        for a, annotator in enumerate(annotators):
            made = Assignment.objects.bulk_create(
                [
                    Assignment(
                        task=task,
                        annotator_id=annotator,
                        status=AssignmentStatus.APPROVED,
                        claimed_at=now - timedelta(hours=2),
                        expires_at=now - timedelta(hours=1),
                        submitted_at=now - timedelta(hours=1, minutes=30),
                        order_seed=n,
                        display_order=rng.permutation(system_ids).tolist(),
                        platform_assignment_id=f"A{a}-{task.pk}",
                        platform_hit_id=hit.hit_id,
                    )
                    for n, (task, hit) in enumerate(zip(tasks, hits, strict=True))
                ],
                batch_size=size,
            )
            assignments[a] = [m.pk for m in made]
            PlatformAssignment.objects.bulk_create(
                [
                    PlatformAssignment(
                        hit=hit,
                        platform_assignment_id=m.platform_assignment_id,
                        worker_id=f"W{a}",
                        status="Approved",
                        submitted_at=m.submitted_at,
                        assignment=m,
                        synced_at=now,
                    )
                    for m, hit in zip(made, hits, strict=True)
                ],
                batch_size=size,
            )
    return assignments


def _label_block(responses, instructions, first, per_instruction, question_ids) -> np.ndarray:
    """Return (question id, response id, instruction index) rows: every question of each
    response's instruction."""
    where = np.searchsorted(instructions, responses[:, 1])
    counts = per_instruction[where]
    response = np.repeat(responses[:, 0], counts)
    start = np.repeat(first[where], counts)
    rank = np.arange(len(response)) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.column_stack([question_ids[start + rank], response, np.repeat(where, counts)])


# Microseconds from PostgreSQL's epoch (2000-01-01 UTC) to the labels' creation time.
_CREATED = int((time.time() - 946_684_800) * 1_000_000)


def _write_block(copy, rows: np.ndarray, annotators: list[int], rng, assignments=None) -> int:
    """Write the rows once per annotator, each with a value drawn as the label CSV draws it
    (and, given `assignments`, on the annotator's assignment of the row's instruction)."""
    assigned = assignments is not None
    block = np.zeros(
        len(rows) * len(annotators), dtype=_COPY_ROW_ASSIGNED if assigned else _COPY_ROW
    )
    block["fields"] = 6
    for name, size in (("question", 8), ("response", 8), ("annotator", 8), ("value", 2)):
        block[f"{name}_length"] = size
    block["created_length"] = 8
    block["assignment_length"] = 8 if assigned else -1
    if assigned:
        block["assignment"] = assignments[:, rows[:, 2]].reshape(-1)
    block["question"] = np.tile(rows[:, 0], len(annotators))
    block["response"] = np.tile(rows[:, 1], len(annotators))
    block["annotator"] = np.repeat(annotators, len(rows))
    block["value"] = rng.choice(np.array([1, 1, 0, 2], dtype=np.int16), size=len(block))
    block["created"] = _CREATED
    copy.write(block.tobytes())
    return len(block)


def _copy_out(benchmark_id: int) -> int:
    """COPY the benchmark's labels (question, response, annotator, value) out in binary; return
    the bytes received. Rows are selected exactly as the report's read selects them."""
    import psycopg
    from django.db import connection

    from evaluation.selectors.report_data import _label_columns_sql

    sql, params = _label_columns_sql(
        benchmark_id, "l.question_id, l.response_id, l.annotator_id, l.value"
    )
    connection.ensure_connection()
    received = 0
    # COPY takes no server-side parameters: the client-side cursor binds them into the text.
    with (
        psycopg.ClientCursor(connection.connection) as cursor,
        cursor.copy(f"COPY ({sql}) TO STDOUT (FORMAT binary)", params) as copy,
    ):
        for block in copy:
            received += len(block)
    return received


def child(step: str, database_url: str, workdir: Path) -> dict:
    return run_child(step, database_url, workdir, script=__file__)


def _baseline_child(database_url: str, workdir: Path) -> dict:
    """Time the report of the BENCH_REPORT_BASELINE checkout in a fresh process, run from that
    checkout (Celery puts the working directory first on sys.path)."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_DEBUG": "false",
        "BENCH_REPORT_CODE": BASELINE,
    }
    out = subprocess.run(
        [sys.executable, __file__, "--inner", "report", str(workdir)],
        env=env,
        cwd=BASELINE,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def _runs(results: list[dict]) -> str:
    return ", ".join(
        f"{r['seconds']:.2f}" + (f" (CPU {r['cpu_seconds']:.2f})" if "cpu_seconds" in r else "")
        for r in results
    )


def _database(name: str, scale: int, workdir: Path) -> str:
    """Return the URL of the scratch database for `scale`, writing its data unless kept."""
    if KEEP and _database_ready(name):
        print(f"reusing the database {name} (BENCH_KEEP=1)")
        return f"{PG_URL}/{name}"
    bench_import.INSTRUCTIONS = 10_000 * scale
    write_big(workdir, labels=False)
    url = fresh_pg(name)
    started = time.perf_counter()
    prepared = child("prepare", url, workdir)
    print(
        f"wrote {prepared['labels']:,} labels into {name} "
        f"in {time.perf_counter() - started:.0f} s (import of instructions, responses; COPY FROM)"
    )
    return url


def _measure(url: str, workdir: Path, runs: int) -> dict[str, list[dict]]:
    """Time COPY, read and report (and the baseline's report), alternating old and new."""
    results: dict[str, list[dict]] = {"copy": [], "read": [], "report": [], "baseline": []}
    for run in range(runs):
        results["copy"].append(child("copy", url, workdir))
        results["read"].append(child("read", url, workdir))
        order = ["report", "baseline"] if run % 2 == 0 else ["baseline", "report"]
        for which in order:
            if which == "report":
                results["report"].append(child("report", url, workdir))
            elif BASELINE:
                results["baseline"].append(_baseline_child(url, workdir))
    return results


def _print_case(labels: str, results: dict[str, list[dict]]) -> tuple[float, float]:
    copies, reads, reports = results["copy"], results["read"], results["report"]
    floor = min(r["seconds"] for r in copies)
    read = min(r["seconds"] for r in reads)
    best = min(reports, key=lambda r: r["seconds"])
    peak = max(r.get("peak_mb", 0) for r in reports)
    print(f"--- {labels} labels; load average now {os.getloadavg()[0]:.2f}")
    print(
        f"PostgreSQL COPY of the same rows out (binary, {copies[0]['bytes'] / 1e6:.0f} MB): "
        f"{floor:.2f} s (runs: {_runs(copies)})"
    )
    print(
        f"read {reads[0]['rows']:,} labels into arrays: {read:.2f} s (runs: {_runs(reads)}), "
        f"+{max(r['extra_mb'] for r in reads):.0f} MB"
    )
    print(
        f"full report ({best['n_resamples']} bootstrap resamples, "
        f"{best['leaderboard_rows']} leaderboard rows): {best['seconds']:.2f} s "
        f"(runs: {_runs(reports)}), +{max(r['extra_mb'] for r in reports):.0f} MB, "
        f"peak RSS {peak:.0f} MB"
    )
    if results["baseline"]:
        old = min(r["seconds"] for r in results["baseline"])
        old_peak = max(r.get("peak_mb", 0) for r in results["baseline"])
        same = {r["digest"] for r in results["baseline"] + reports if "digest" in r}
        print(
            f"baseline report ({BASELINE}): {old:.2f} s (runs: {_runs(results['baseline'])}), "
            f"+{max(r['extra_mb'] for r in results['baseline']):.0f} MB"
            + (f", peak RSS {old_peak:.0f} MB" if old_peak else "")
            + (f"; same report as this code: {'yes' if len(same) == 1 else 'NO'}" if same else "")
        )
    print(f"report / read ratio: {best['seconds'] / read:.1f} (goal <= 2)")
    print(f"read / COPY ratio: {read / floor:.1f} (goal <= 2)")
    return best["seconds"], peak


def main() -> None:
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    print(f"load average before: {os.getloadavg()[0]:.2f} (the machine may be shared)")
    cases = [(1, DATABASE, RUNS)] + ([] if SKIP_10M else [(10, DATABASE_10M, 1)])
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for scale, name, runs in cases:
            url = _database(name, scale, workdir)
            results = _measure(url, workdir, runs)
            if not runs:  # BENCH_REPORT_RUNS=0: only write the databases
                continue
            seconds, peak = _print_case(f"{results['read'][0]['rows']:,}", results)
            if scale == 1:
                print(f"target (issue 4): under 3 s: {'met' if seconds < 3 else 'NOT met'}")
            else:
                print(
                    f"targets (issue 17): under 30 s: {'met' if seconds < 30 else 'NOT met'}; "
                    f"peak RSS under 2 GB: {'met' if peak < 2048 else 'NOT met'}"
                )
    if not KEEP:
        for _, name, _ in cases:
            subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "root", "--if-exists", name])
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def _database_ready(name: str) -> bool:
    """Tell whether the database `name` holds the benchmark a previous run wrote."""
    found = subprocess.run(
        [
            "psql",
            "-h",
            "127.0.0.1",
            "-U",
            "root",
            "-d",
            name,
            "-tAc",
            "SELECT 1 FROM annotate_benchmark WHERE name = 'big'",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip() == "1"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        inner(sys.argv[2], Path(sys.argv[3]))
    else:
        main()
