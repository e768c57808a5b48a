"""Where a Table 5 judge run's wall time goes: an in-process timeline (issue 14).

Builds the bench study as `bench_revision.py` does, then runs the rating judge (zero-shot and
10-shot, seeds 1..N, stub at 100 ms, concurrency 32) with time.perf_counter stamps, from the
call of judge_run_execute, around the engine's phases: units prepared, on_start (examples
picked), first units loaded, every request sent and answered, every batch stored, the end.
Prints per run and the medians (ms): first_send (first request out), wave1 (first to 32nd
request out), sends->replies, tail (last reply to the end), the mean call (send to reply in the
worker), the process's CPU, the writer's CPU, gc time.

    .venv/bin/python tests/bench/judge_timeline.py [repeat]

TIMELINE_START=1 also prints each run's stamps up to its first request; TIMELINE_FLOOR=1 runs
the bare `openai` client on the same bodies before each run (wall, mean call).
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.bench_revision import bench_import_report, setup_sqlite  # noqa: E402
from tests.bench.harness import ideal_seconds, start_openai_stub  # noqa: E402

EVENTS: list[tuple[float, str, int]] = []
LOCK = threading.Lock()
STORE_CPU: list[float] = []
GC: list[float] = []
_gc_started = [0.0]


def mark(name: str) -> None:
    with LOCK:
        EVENTS.append((time.perf_counter(), name, threading.get_ident()))


def wrap(owner, attr: str, name: str, cpu: list[float] | None = None) -> None:
    original = getattr(owner, attr)

    def wrapped(*args, **kwargs):
        mark(f"{name}>")
        started = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            if cpu is not None:
                cpu.append(time.thread_time() - started)
            mark(f"{name}<")

    setattr(owner, attr, wrapped)


def _gc_callback(phase: str, info: dict) -> None:
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    else:
        GC.append(time.perf_counter() - _gc_started[0])


def instrument() -> None:
    from annotate.engine import client
    from annotate.engine.services import runs
    from evaluation.revision import protocol

    gc.callbacks.append(_gc_callback)
    if os.environ.get("TIMELINE_QUIET"):  # an experiment: the writer's quiet time
        runs.QUIET_SECONDS = float(os.environ["TIMELINE_QUIET"])
    wrap(client.OpenAITransport, "send", "send")
    wrap(runs, "_store", "store", STORE_CPU)
    wrap(runs, "_prepare_units", "prepare")
    wrap(runs, "_load", "load")
    wrap(runs, "_finish", "finish")
    wrap(runs._Executor, "do_unit", "unit")
    wrap(protocol.RevisionJudgeProtocol, "on_start", "on_start")


def summary(t0: float, end: float) -> dict[str, float]:
    events = sorted((t - t0, name) for t, name, _ in EVENTS)
    sends = [t for t, n in events if n == "send>"]
    replies = [t for t, n in events if n == "send<"]
    calls = []
    by_thread: dict[int, list[tuple[float, str]]] = {}
    for t, name, ident in EVENTS:
        if name in ("send>", "send<"):
            by_thread.setdefault(ident, []).append((t, name))
    for seq in by_thread.values():
        for (t1, n1), (t2, n2) in zip(seq, seq[1:], strict=False):
            if n1 == "send>" and n2 == "send<":
                calls.append(t2 - t1)
    if os.environ.get("TIMELINE_START"):
        shown = [f"{n}@{t * 1000:.1f}" for t, n in events if t <= sends[0] and n != "unit<"]
        print("   start: " + " ".join(shown))
    return {
        "first_send": sends[0],
        "wave1": sends[31] - sends[0],
        "sends->replies": replies[-1] - sends[0],
        "tail": end - t0 - replies[-1],
        "end": end - t0,
        "call_mean": statistics.mean(calls),
    }


def bare_floor(base_url: str, run) -> tuple[float, float]:
    """The bare `openai` client sending the run's bodies from 32 warmed threads, as
    bench_revision's floor: wall time and mean call latency."""
    import json
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    import openai

    from evaluation.revision.protocol import RevisionJudgeProtocol

    handle = SimpleNamespace(params={"judge_run": run.pk})
    protocol = RevisionJudgeProtocol()
    work = protocol.load(handle, protocol.units(handle))
    bodies = [
        {"model": "stub", "messages": w.messages(), "temperature": 0.0} for w in work.values()
    ]
    encoded = [json.dumps(b, ensure_ascii=False, separators=(",", ":")).encode() for b in bodies]
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    latencies: list[float] = []

    def send(content: bytes) -> None:
        started = time.perf_counter()
        client.post("/chat/completions", content=content, cast_to=object)
        latencies.append(time.perf_counter() - started)

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(send, encoded[:32]))
        latencies.clear()
        started = time.perf_counter()
        list(pool.map(send, encoded))
        return time.perf_counter() - started, statistics.mean(latencies)


def line(values: dict[str, float]) -> str:
    return ", ".join(f"{k} {v * 1000:.0f}" for k, v in values.items())


def main() -> int:
    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    tmp = tempfile.mkdtemp()
    setup_sqlite(tmp)
    bench_import_report(tmp, {})
    instrument()
    from django.utils import timezone

    from annotate.engine.services import endpoint_create
    from annotate.revision.models import Study
    from evaluation.revision.judges import judge_run_create, judge_run_execute, training_index

    study = Study.objects.get(name="KIWI bench")
    stub, base_url = start_openai_stub(0.1)
    ideal = ideal_seconds(186, 0.1, 32)
    try:
        endpoint_create(
            name="bench-judge-stub", model="stub", base_url=base_url, concurrency=32,
            requests_per_minute=1_000_000, tokens_per_minute=1_000_000_000, max_retries=0,
        )  # fmt: skip
        for mode in ("zero-shot", "k-shot"):
            rows = []
            for attempt in range(repeat):
                run = judge_run_create(
                    study=study, task="rating-judge", mode=mode, shots=10,
                    endpoint_name="bench-judge-stub", seed=1 + attempt, now=timezone.now(),
                )  # fmt: skip
                floor = bare_floor(base_url, run) if os.environ.get("TIMELINE_FLOOR") else None
                training_index.cache_clear()  # the run builds its split's index, as a first run
                EVENTS.clear(), GC.clear(), STORE_CPU.clear()
                cpu = time.process_time()
                t0 = time.perf_counter()
                judge_run_execute(run_id=run.pk)
                end = time.perf_counter()
                row = summary(t0, end)
                row.update(cpu=time.process_time() - cpu, store_cpu=sum(STORE_CPU), gc=sum(GC))
                if floor:
                    row.update(floor_wall=floor[0], floor_call=floor[1])
                rows.append(row)
                print(f"{mode} seed {attempt + 1}: {line(row)}; load {os.getloadavg()[0]:.2f}")
            median = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
            print(f"{mode} MEDIAN: {line(median)} = {median['end'] / ideal:.3f}x")
    finally:
        stub.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
