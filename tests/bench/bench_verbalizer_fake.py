"""Benchmark: the README's verbalizer run on the offline fake, with the limits `endpoint_create`
gave it before 2026-11-27 (500 requests, 200,000 tokens a minute) and with those it gives now.

One set (SST-2 and RTE, every mapping, direct and CoT: 2 x items x 12 x 2 prompts), one system
per endpoint, both made by `manage.py endpoint_create NAME --base-url "" --model fake-1`; the
"before" endpoint is given `--rpm 500 --tpm 200000`, which is what the command stored for a fake
without them. Prints wall and CPU time per prompt, the time the limiter's sleeps took (summed
over the worker threads) and whether both systems got the same replies. Fresh SQLite database in
a temporary directory (or DATABASE_URL if set).

    .venv/bin/python tests/bench/bench_verbalizer_fake.py [--items 10] [--after-items 100]

`--items 10` (480 prompts) keeps the paced run near a minute; `--after-items 100` adds the
README's 4,800-prompt run on the new limits alone (0: skip it).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.bench_verbalizer import fill_datasets, setup_django  # noqa: E402


def timed_limiter_sleeps(endpoint) -> list[float]:
    """Make the endpoint's limiter (the one its run will use) record how long each sleep took."""
    from annotate.engine.services.calls import endpoint_limiter

    limiter, slept, lock = endpoint_limiter(endpoint=endpoint), [], threading.Lock()

    def sleep(seconds: float) -> None:
        started = time.perf_counter()
        time.sleep(seconds)
        with lock:
            slept.append(time.perf_counter() - started)

    limiter.sleep = sleep
    return slept


def run_once(label: str, evaluation_set, endpoint_arguments: list[str]) -> dict:
    from django.core.management import call_command

    from annotate.engine.models import Endpoint
    from annotate.verbalizer.models import ModelAnswer
    from annotate.verbalizer.services.runs import verbalizer_run_create, verbalizer_run_execute

    name = f"fake-{label}"
    call_command(
        "endpoint_create", name, "--base-url", "", "--model", "fake-1", *endpoint_arguments,
        stdout=io.StringIO(),
    )  # fmt: skip
    endpoint = Endpoint.objects.get(name=name)
    slept = timed_limiter_sleeps(endpoint)
    system_run = verbalizer_run_create(
        evaluation_set=evaluation_set, system=f"system-{label}", endpoint=name
    )
    started, cpu = time.perf_counter(), time.process_time()
    run = verbalizer_run_execute(system_run=system_run)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    replies = dict(ModelAnswer.objects.filter(run=system_run).values_list("prompt_id", "reply"))
    print(
        f"{label:<7} rpm {endpoint.requests_per_minute:>9} tpm {endpoint.tokens_per_minute:>13} "
        f"concurrency {endpoint.concurrency}: {run.status}, {run.units_done} prompts in "
        f"{wall:7.2f} s ({run.units_done / wall:7.1f}/s, {wall / run.units_done * 1000:6.2f} ms "
        f"each), CPU {cpu:5.2f} s, limiter sleeping {sum(slept):7.1f} s over {len(slept)} sleeps",
        flush=True,
    )
    return {"wall": wall, "replies": replies, "done": run.units_done, "status": run.status}


def build_set(name: str, items: int):
    from annotate.verbalizer.services.sets import evaluation_set_create

    return evaluation_set_create(
        name=name, datasets=["SST-2", "RTE"], items=items, seed=1, mappings="all",
        modes=["direct", "cot"],
    ).evaluation_set  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--after-items", type=int, default=100)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(tmp)
        fill_datasets(max(args.items, args.after_items))
        small = build_set("compare", args.items)
        before = run_once("before", small, ["--rpm", "500", "--tpm", "200000"])
        after = run_once("after", small, [])
        same = before["replies"] == after["replies"] and len(after["replies"]) == after["done"]
        print(
            f"same replies before and after: {same}; after is {before['wall'] / after['wall']:.0f}x faster"
        )
        if args.after_items:
            run_once("readme", build_set("readme", args.after_items), [])
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not same or before["status"] != "done" or after["status"] != "done":
        print("FAIL: the runs did not both finish with the same replies")
        sys.exit(1)


if __name__ == "__main__":
    main()
