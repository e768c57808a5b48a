"""Benchmark: judge 500 InFoBench instructions x 1 system (2,250 questions) against the stub
OpenAI-compatible server answering in 100 ms, at concurrency 32.

Ideal lower bound = max(longest conversation x 100 ms, total calls x 100 ms / 32); the run must
take at most 1.3x that. Also prints what the official script's sequential loop would take.
Runs on a fresh SQLite database in a temporary directory (or DATABASE_URL if set). The stub runs
in its own process, so its threads do not compete with the judge for this process's GIL.

    .venv/bin/python tests/bench/bench_judge.py [--concurrency 32] [--delay 0.1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path("/work/shared/data/infobench/InfoBench.json")
sys.path.insert(0, str(ROOT))
from tests.bench.harness import start_openai_stub  # noqa: E402 - after the path is set


def process_cpu_seconds(pid: int) -> float:
    """Return user + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def setup_django(tmp: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["VAR_DIR"] = tmp
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def load_benchmark(path: Path):
    from annotate.models import Response, System
    from annotate.services.imports import instructions_import

    instructions_import(path=str(path), benchmark_name="InfoBench bench")
    from annotate.models import Benchmark

    benchmark = Benchmark.objects.get(name="InfoBench bench")
    system = System.objects.create(name="bench-system")
    Response.objects.bulk_create(
        Response(instruction=i, system=system, text=f"A response to {i.external_id}. " * 20)
        for i in benchmark.instructions.all()
    )
    return benchmark, system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    load_before = f"{os.getloadavg()[0]:.2f}"
    rows = [json.loads(line) for line in args.data.open()]
    counts = [len(row["decomposed_questions"]) for row in rows]

    with tempfile.TemporaryDirectory() as tmp:
        setup_django(tmp)
        from evaluation.services.judge_configs import judge_config_create
        from evaluation.services.judge_runs import judge_run_create, judge_run_execute

        benchmark, system = load_benchmark(args.data)
        stub, base_url = start_openai_stub(args.delay)
        try:
            config = judge_config_create(
                name="bench-judge",
                backend="openai",
                base_url=base_url,
                api_key_env="",
                concurrency=args.concurrency,
                requests_per_minute=1_000_000,  # raised for the bench: we measure concurrency
                tokens_per_minute=1_000_000_000,
            )
            run = judge_run_create(config=config, benchmark=benchmark, systems=[system])
            started, cpu = time.perf_counter(), time.process_time()
            run = judge_run_execute(run_id=run.pk)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            stub_cpu = process_cpu_seconds(stub.pid)
        finally:
            stub.terminate()
            stub.wait()

        from evaluation.models import JudgeCall

        calls = JudgeCall.objects.filter(conversation__run=run)
        latencies = sorted(calls.values_list("latency_ms", flat=True))
        total = calls.count()
        assert total == sum(counts), (total, sum(counts))
        longest = max(counts) * args.delay
        spread = total * args.delay / args.concurrency
        ideal = max(longest, spread)
        ratio = wall / ideal
        print(f"instructions {len(rows)}, questions (calls) {total}, status {run.status}")
        print(f"concurrency {args.concurrency}, stub delay {args.delay * 1000:.0f} ms")
        print(f"wall time            {wall:8.2f} s")
        print(
            f"ideal lower bound    {ideal:8.2f} s  (longest conversation {longest:.1f} s, "
            f"calls x delay / concurrency {spread:.2f} s)"
        )
        print(f"ratio                {ratio:8.2f} x  (limit 1.30 x)")
        print(
            f"target               wall time <= 1.30 x ideal = {1.3 * ideal:.2f} s: "
            + ("met" if ratio <= 1.3 else "NOT met")
        )
        print(
            f"sequential estimate  {total * args.delay:8.1f} s  (official script: one call "
            f"at a time, {args.delay * 1000:.0f} ms each)"
        )
        median = latencies[len(latencies) // 2]
        print(f"call latency median {median} ms, p99 {latencies[int(len(latencies) * 0.99)]} ms")
        print(f"CPU time of the judging process {cpu:.2f} s ({cpu / total * 1000:.2f} ms a call)")
        print(f"CPU time of the stub server     {stub_cpu:.2f} s")
        print(f"load average before / after     {load_before} / {os.getloadavg()[0]:.2f}")
        print(f"tokens {run.prompt_tokens} + {run.completion_tokens}, cost ${run.cost_usd}")
        if ratio > 1.3:
            print("FAIL: slower than 1.3x the ideal lower bound")
            sys.exit(1)
        print("OK: within 1.3x of the ideal lower bound")


if __name__ == "__main__":
    main()
