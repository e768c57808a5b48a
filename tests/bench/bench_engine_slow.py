"""Benchmark: a stub that takes 60 s to answer each call, with 32 units in flight at once.

Checks that no call times out falsely (the endpoint's timeout is 120 s; every call must end ok
with no retry), that the run's heartbeat keeps it alive (never reaped as a vanished worker),
and that memory stays flat while the calls wait (resident set size sampled every second).

    .venv/bin/python tests/bench/bench_engine_slow.py [--delay 60] [--units 32]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.bench_judge import setup_django  # noqa: E402
from tests.bench.harness import start_openai_stub  # noqa: E402


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=60.0)
    parser.add_argument("--units", type=int, default=32)
    args = parser.parse_args()
    load_before = f"{os.getloadavg()[0]:.2f}"
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(tmp)
        from annotate.engine.models import EngineCall, RunStatus
        from annotate.engine.services import endpoint_create, engine_run_execute
        from annotate.engine.services.generation import (
            generating_system_get_or_create,
            generation_run_create,
        )
        from tests.factories import BenchmarkFactory, InstructionFactory

        benchmark = BenchmarkFactory(name="slow")
        for n in range(args.units):
            InstructionFactory(benchmark=benchmark, external_id=f"t{n}", position=n)
        stub, base_url = start_openai_stub(args.delay)
        samples: list[float] = []
        done = threading.Event()

        def sample() -> None:
            while not done.wait(1.0):
                samples.append(rss_mb())

        try:
            endpoint = endpoint_create(
                name="slow-stub",
                base_url=base_url,
                model="stub",
                concurrency=args.units,
                timeout_seconds=2 * args.delay,
                requests_per_minute=1_000_000,
                tokens_per_minute=1_000_000_000,
            )
            system = generating_system_get_or_create(name="slow-gen", endpoint=endpoint)
            run = generation_run_create(benchmark=benchmark, systems=[system], endpoint=endpoint)
            before = rss_mb()
            threading.Thread(target=sample, daemon=True).start()
            started = time.perf_counter()
            run = engine_run_execute(run_id=run.pk)
            wall = time.perf_counter() - started
            done.set()
        finally:
            stub.terminate()
            stub.wait()
        calls = EngineCall.objects.filter(run=run)
        statuses = sorted(set(calls.values_list("status", flat=True)))
        retries = sum(calls.values_list("retries", flat=True))
    half = len(samples) // 2
    first, second = samples[:half] or [before], samples[half:] or [before]
    print(f"{args.units} units in flight, stub answers after {args.delay:.0f} s, timeout "
          f"{2 * args.delay:.0f} s")  # fmt: skip
    print(f"run status {run.status}, calls {calls.count()}, statuses {statuses}, retries {retries}")
    print(f"wall time {wall:.1f} s (one round of calls: {args.delay:.0f} s)")
    print(
        f"resident memory: {before:.1f} MB before, peak {max(samples or [before]):.1f} MB, "
        f"first half mean {sum(first) / len(first):.1f} MB, second half mean "
        f"{sum(second) / len(second):.1f} MB"
    )
    print(f"load average before / after {load_before} / {os.getloadavg()[0]:.2f}")
    growth = sum(second) / len(second) - sum(first) / len(first)
    ok = (
        run.status == RunStatus.DONE
        and statuses == ["ok"]
        and retries == 0
        and wall < 1.5 * args.delay
        and growth < 5.0
    )
    if not ok:
        print(f"FAIL: false time-outs, retries, or memory growing ({growth:+.1f} MB)")
        sys.exit(1)
    print(f"OK: no false time-out, no retry, memory flat ({growth:+.1f} MB between halves)")


if __name__ == "__main__":
    main()
