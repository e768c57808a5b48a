"""Benchmark: generate 500 InFoBench responses for each of 4 systems (2,000 calls) against the
stub OpenAI-compatible server answering in 100 ms, at concurrency 32, through the engine.

Ideal lower bound = calls x 100 ms / 32; the run must take at most 1.15x that. Also measures
how long starting a 500-unit run from the generation page takes (target < 200 ms): the page
answers before any unit is even listed. Runs on a fresh SQLite database in a temporary
directory (or DATABASE_URL if set); the stub runs in its own process.

    .venv/bin/python tests/bench/bench_generation.py [--concurrency 32] [--delay 0.1]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path("/work/shared/data/infobench/InfoBench.json")
sys.path.insert(0, str(ROOT))
from tests.bench.bench_judge import process_cpu_seconds, setup_django  # noqa: E402
from tests.bench.harness import start_openai_stub  # noqa: E402

LIMIT = 1.15


def generate(base_url: str, concurrency: int):
    from annotate.engine.services import endpoint_create, engine_run_execute
    from annotate.engine.services.generation import (
        generating_system_get_or_create,
        generation_run_create,
    )
    from annotate.models import Benchmark

    benchmark = Benchmark.objects.get(name="InfoBench bench")
    endpoint = endpoint_create(
        name="bench-stub",
        base_url=base_url,
        model="stub",
        concurrency=concurrency,
        requests_per_minute=1_000_000,  # raised for the bench: we measure concurrency
        tokens_per_minute=1_000_000_000,
    )
    systems = [
        generating_system_get_or_create(name=f"gen-{n}", endpoint=endpoint) for n in range(4)
    ]
    run = generation_run_create(benchmark=benchmark, systems=systems, endpoint=endpoint)
    started, cpu = time.perf_counter(), time.process_time()
    run = engine_run_execute(run_id=run.pk)
    return run, time.perf_counter() - started, time.process_time() - cpu


def start_from_page(repeats: int = 5) -> list[float]:
    """Return the seconds each POST of the generation page took (a 500-unit run, fake model)."""
    from django.test import Client

    from annotate.engine.errors import EngineRunEndedError
    from annotate.engine.models import EngineRun
    from annotate.engine.services import endpoint_create, engine_background_wait, engine_run_stop
    from annotate.models import Benchmark
    from annotate.roles import ADMIN
    from tests.factories import UserFactory

    admin = UserFactory(username="bench-admin", roles=[ADMIN], is_staff=True)
    client = Client()
    client.force_login(admin)
    fake = endpoint_create(name="bench-fake", base_url="", model="fake", concurrency=4)
    benchmark = Benchmark.objects.get(name="InfoBench bench")
    client.get("/engine/generate/")  # a warm server: URLs, templates and views loaded once
    timings = []
    for n in range(repeats):
        form = {
            "endpoint": fake.pk,
            "benchmark": benchmark.pk,
            "system": f"page-{n}",
            "template": "generation_infobench_v1",
            "seed": "0",
            "start": "1",
        }
        started = time.perf_counter()
        response = client.post("/engine/generate/", form)
        timings.append(time.perf_counter() - started)
        assert response.status_code == 302, response.status_code
        with contextlib.suppress(EngineRunEndedError):  # ended already: nothing to stop
            engine_run_stop(run=EngineRun.objects.latest("pk"))
        engine_background_wait(60)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--delay", type=float, default=0.1)
    args = parser.parse_args()
    load_before = f"{os.getloadavg()[0]:.2f}"
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(tmp)
        from annotate.services.imports import instructions_import

        instructions_import(path=str(DATA), benchmark_name="InfoBench bench")
        stub, base_url = start_openai_stub(args.delay)
        try:
            run, wall, cpu = generate(base_url, args.concurrency)
            stub_cpu = process_cpu_seconds(stub.pid)
        finally:
            stub.terminate()
            stub.wait()
        from annotate.engine.models import EngineCall
        from annotate.models import Response

        calls = EngineCall.objects.filter(run=run)
        total = calls.count()
        latencies = sorted(calls.values_list("latency_ms", flat=True))
        assert total == 2000 and run.units_done == 2000, (total, run.units_done)
        assert Response.objects.filter(system__name__startswith="gen-").count() == 2000
        ideal = total * args.delay / args.concurrency
        ratio = wall / ideal
        page = start_from_page()

    print(f"generation: 500 instructions x 4 systems = {total} calls, status {run.status}")
    print(f"concurrency {args.concurrency}, stub delay {args.delay * 1000:.0f} ms")
    print(f"wall time            {wall:8.2f} s")
    print(f"ideal lower bound    {ideal:8.2f} s  (calls x delay / concurrency)")
    print(f"ratio                {ratio:8.2f} x  (limit {LIMIT:.2f} x)")
    print(f"call latency median {latencies[len(latencies) // 2]} ms, p99 "
          f"{latencies[int(len(latencies) * 0.99)]} ms")  # fmt: skip
    print(f"CPU time of the generating process {cpu:.2f} s ({cpu / total * 1000:.2f} ms a call)")
    print(f"CPU time of the stub server        {stub_cpu:.2f} s")
    print(f"tokens {run.prompt_tokens} + {run.completion_tokens}, cost ${run.cost_usd}")
    print(
        f"start a 500-unit run from the page: median {statistics.median(page) * 1000:.0f} ms, "
        f"max {max(page) * 1000:.0f} ms over {len(page)} starts (limit 200 ms)"
    )
    print(f"load average before / after        {load_before} / {os.getloadavg()[0]:.2f}")
    failed = []
    if ratio > LIMIT:
        failed.append(f"slower than {LIMIT}x the ideal lower bound")
    if max(page) > 0.2:
        failed.append("a start from the page took more than 200 ms")
    if failed:
        print("FAIL: " + "; ".join(failed))
        sys.exit(1)
    print(f"OK: within {LIMIT}x of the ideal lower bound; every start under 200 ms")


if __name__ == "__main__":
    main()
