"""Benchmark: a paper-size verbalizer run, 9 datasets x 12 mappings x 100 items = 10,800 prompts,
one system, direct prompting, against the stub OpenAI-compatible server answering in 100 ms,
through the engine at concurrency 32; then the set's report.

Ideal lower bound = prompts x 100 ms / 32 = 33.75 s; the run must take at most 1.15x that. The
report (parse 10,800 replies, every table with bootstrap intervals) must take under 1 s.
Runs on a fresh SQLite database in a temporary directory (or DATABASE_URL if set). The stub runs
in its own process.

    .venv/bin/python tests/bench/bench_verbalizer.py [--concurrency 32] [--delay 0.1] [--items 100]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.harness import start_openai_stub  # noqa: E402 - after the path is set

LIMIT = 1.15
REPORT_LIMIT_SECONDS = 1.0


def setup_django(tmp: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["VAR_DIR"] = tmp
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def fill_datasets(items: int) -> list[str]:
    """Give each of the paper's nine (seeded) datasets `items` generated items, half positive."""
    from annotate.verbalizer.models import ClassificationDataset, ClassificationItem

    names = []
    for dataset in ClassificationDataset.objects.order_by("name"):
        pair = dataset.family in ("entailment", "paraphrase")
        ClassificationItem.objects.bulk_create(
            ClassificationItem(
                dataset=dataset, position=i, text=f"{dataset.name} sentence number {i}.",
                text_b=f"Second sentence {i}." if pair else "", is_positive=i % 2 == 0,
            )
            for i in range(1, items + 1)
        )  # fmt: skip
        names.append(dataset.name)
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--items", type=int, default=100)
    args = parser.parse_args()
    load_before = f"{os.getloadavg()[0]:.2f}"
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(tmp)
        from annotate.engine.services import endpoint_create
        from annotate.verbalizer.services.runs import verbalizer_run_create, verbalizer_run_execute
        from annotate.verbalizer.services.sets import evaluation_set_create
        from evaluation.verbalizer.report import verbalizer_report

        names = fill_datasets(args.items)
        built = time.perf_counter()
        summary = evaluation_set_create(
            name="bench", datasets=names, items=args.items, seed=1, mappings="all"
        )
        built = time.perf_counter() - built
        stub, base_url = start_openai_stub(args.delay)
        try:
            endpoint_create(
                name="bench-stub", model="stub", base_url=base_url, api_key_env="",
                concurrency=args.concurrency,
                requests_per_minute=1_000_000,  # raised for the bench: we measure concurrency
                tokens_per_minute=1_000_000_000,
            )  # fmt: skip
            system_run = verbalizer_run_create(
                evaluation_set=summary.evaluation_set, system="bench-model", endpoint="bench-stub"
            )
            started, cpu = time.perf_counter(), time.process_time()
            run = verbalizer_run_execute(system_run=system_run)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        finally:
            stub.terminate()
            stub.wait()
        report_started = time.perf_counter()
        report = verbalizer_report(evaluation_set=summary.evaluation_set)
        report_seconds = time.perf_counter() - report_started
        prompts = summary.prompts
        ideal = prompts * args.delay / args.concurrency
        ratio = wall / ideal
        print(f"prompts {prompts} (set built in {built:.2f} s), run status {run.status}, "
              f"answered {run.units_done}, failed {run.units_failed}")  # fmt: skip
        print(f"concurrency {args.concurrency}, stub delay {args.delay * 1000:.0f} ms")
        print(f"wall time            {wall:8.2f} s")
        print(f"ideal lower bound    {ideal:8.2f} s  (prompts x delay / concurrency)")
        print(f"ratio                {ratio:8.3f} x  (limit {LIMIT:.2f} x)")
        print(f"CPU time of the run  {cpu:8.2f} s ({cpu / prompts * 1000:.2f} ms a prompt)")
        print(f"report               {report_seconds:8.3f} s  ({len(report['rows'])} rows; "
              f"limit {REPORT_LIMIT_SECONDS:.1f} s)")  # fmt: skip
        print(f"load average before / after  {load_before} / {os.getloadavg()[0]:.2f}")
        failed = []
        if run.status != "done" or run.units_done != prompts:
            failed.append(f"the run ended {run.status} with {run.units_done} of {prompts}")
        if ratio > LIMIT:
            failed.append(f"slower than {LIMIT}x the ideal lower bound")
        if report_seconds > REPORT_LIMIT_SECONDS:
            failed.append(f"the report took more than {REPORT_LIMIT_SECONDS} s")
        if failed:
            print("FAIL: " + "; ".join(failed))
            sys.exit(1)
        print(f"OK: within {LIMIT}x of the ideal wall time; report under {REPORT_LIMIT_SECONDS} s")


if __name__ == "__main__":
    main()
