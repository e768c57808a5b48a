"""Report speed: the full report over 1,000,000 labels on PostgreSQL, against merely reading them.

10,000 instructions × 5 systems × 6.67 questions × 3 expert annotators = 1,000,000 labels, imported
through the label import into a scratch database. Then, in a fresh process each time:

- the time PostgreSQL needs to COPY the same label rows out (binary, to this process, which only
  counts the bytes): the floor of any read (issue 17: the read within 2x of it),
- the time to read the labels from the database into arrays (the floor for any report), and
- the time and the extra memory (peak RSS above the process after start-up) of report_build:
  leaderboard with bootstrap CIs for 5 sources, Fleiss' kappa with CIs, sources against the
  expert majority, breakdowns, disagreement levels.

    python tests/bench/bench_report.py
    PG_URL=postgres://root@127.0.0.1:5432 ...     # where to create the scratch database
    BENCH_KEEP=1 ...                              # keep the database and reuse it next time
    BENCH_REPORT_DB=perf_report ...               # the scratch database's name (bench_report)
    BENCH_REPORT_SCALE=10 ...                     # 10x the instructions: 10,000,200 labels
    BENCH_REPORT_RUNS=1 ...                       # fresh processes per measurement (3)
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench import bench_import  # noqa: E402
from tests.bench.bench_import import PG_URL, SYSTEMS, fresh_pg, write_big  # noqa: E402
from tests.bench.bench_import import child as run_child  # noqa: E402

DATABASE = os.environ.get("BENCH_REPORT_DB", "bench_report")
SCALE = int(os.environ.get("BENCH_REPORT_SCALE", "1"))
RUNS = int(os.environ.get("BENCH_REPORT_RUNS", "3"))  # fresh processes per measurement
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
        from annotate.services.label_imports import labels_import

        call_command("migrate", verbosity=0)
        instructions_import(path=str(workdir / "instructions.jsonl"), benchmark_name="big")
        for s in range(SYSTEMS):
            responses_import(
                path=str(workdir / f"responses{s}.jsonl"),
                benchmark_name="big",
                system_name=f"sys{s}",
            )
        summary = labels_import(
            path=str(workdir / "labels.csv"), benchmark_name="big", kind="expert"
        )
        with django.db.connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        print(json.dumps({"labels": summary.created}))
        return

    from annotate.models import Benchmark
    from evaluation.selectors.report_data import fetch_label_rows
    from evaluation.services.reports import report_build

    benchmark = Benchmark.objects.get(name="big")
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    if step == "copy":
        result = {"bytes": _copy_out(benchmark.pk)}
    elif step == "read":
        rows = fetch_label_rows(benchmark.pk)
        result = {"rows": len(rows)}
    else:
        report = report_build(benchmark=benchmark)
        result = {
            "leaderboard_rows": len(report["leaderboard"]),
            "kappa": [r["fleiss_kappa"] for r in report["agreement"]],
            "n_resamples": report["n_resamples"],
        }
    result["seconds"] = time.perf_counter() - started
    result["extra_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - baseline) / 1024
    print(json.dumps(result))


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


def _runs(results: list[dict]) -> str:
    return ", ".join(f"{r['seconds']:.2f}" for r in results)


def main() -> None:
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if KEEP and _database_exists():
            url = f"{PG_URL}/{DATABASE}"
            print(f"reusing the database {DATABASE} (BENCH_KEEP=1)")
        else:
            bench_import.INSTRUCTIONS *= SCALE
            write_big(workdir)
            url = fresh_pg(DATABASE)
            prepared = child("prepare", url, workdir)
            print(f"imported {prepared['labels']:,} labels into PostgreSQL")
        copies = [child("copy", url, workdir) for _ in range(RUNS)]
        reads = [child("read", url, workdir) for _ in range(RUNS)]
        reports = [child("report", url, workdir) for _ in range(RUNS)]
        read = min(r["seconds"] for r in reads)
        best = min(reports, key=lambda r: r["seconds"])
        print(
            f"read {reads[0]['rows']:,} labels into arrays: {read:.2f} s "
            f"(runs: {_runs(reads)}), "
            f"+{max(r['extra_mb'] for r in reads):.0f} MB"
        )
        print(
            f"full report ({best['n_resamples']} bootstrap resamples, "
            f"{best['leaderboard_rows']} leaderboard rows): {best['seconds']:.2f} s "
            f"(runs: {_runs(reports)}), "
            f"+{max(r['extra_mb'] for r in reports):.0f} MB peak"
        )
        floor = min(r["seconds"] for r in copies)
        print(
            f"PostgreSQL COPY of the same rows out (binary, {copies[0]['bytes'] / 1e6:.0f} MB): "
            f"{floor:.2f} s (runs: {_runs(copies)})"
        )
        print(f"report / read ratio: {best['seconds'] / read:.1f} (goal <= 2)")
        print(f"read / COPY ratio: {read / floor:.1f} (goal <= 2)")
        seconds, megabytes = (3, 300) if SCALE == 1 else (30, 2048)  # issue 4 / issue 17
        peak = max(r["extra_mb"] for r in reports)
        print(
            f"targets: under {seconds} s: {'met' if best['seconds'] < seconds else 'NOT met'}; "
            f"under {megabytes} MB extra: {'met' if peak < megabytes else 'NOT met'}"
        )
    if not KEEP:
        subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "root", "--if-exists", DATABASE])


def _database_exists() -> bool:
    found = subprocess.run(
        [
            "psql",
            "-h",
            "127.0.0.1",
            "-U",
            "root",
            "-d",
            "postgres",
            "-tAc",
            f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'",
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
