"""Benchmark: one InFoBench report figure asked for on a cold cache, on the demo benchmark.

Loads the demo (`manage.py load_demo`: 8 instructions, 656 labels) into a fresh SQLite database
in a temporary directory, then for each figure, `--rounds` times: clear the cache and fetch the
figure's SVG through Django's test client as the demo researcher (what a figure link or the API
does when the report is not cached), and, apart, the data step alone (report_cached as the
figure view calls it, cache cleared). Wall and CPU seconds of this process, median of the rounds.
The same script run in an older checkout (`git archive`) times the code before the change.

    .venv/bin/python tests/bench/bench_report_figures.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def timed(action) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["VAR_DIR"] = tempfile.mkdtemp(prefix="bench-figures-")
    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    # A scratch database of its own: the demo accounts' known passwords stay in it.
    call_command("load_demo", allow_production=True, stdout=open(os.devnull, "w"))  # noqa: SIM115

    from django.contrib.auth import get_user_model

    from annotate.models import Benchmark, Label
    from annotate.selectors.identities import identity_scope
    from evaluation import figures
    from evaluation.services.reports import report_cached

    benchmark = Benchmark.objects.get()
    researcher = get_user_model().objects.get(username="researcher")
    client = Client()
    client.force_login(researcher)
    scope = identity_scope(user=researcher)
    by_table = "tables" in inspect.signature(report_cached).parameters
    labels = Label.objects.filter(response__instruction__benchmark=benchmark).count()
    print(f"code {ROOT.name}, demo: {labels} labels; load {Path('/proc/loadavg').read_text()}")
    print("| figure | figure request, cold (wall / CPU s) | data step alone (wall / CPU s) |")
    print("|---|---|---|")
    for name in figures.FIGURES:
        url = f"/reports/{benchmark.pk}/figures/{name}.svg"
        tables = {"tables": [figures.FIGURE_TABLES.get(name, name)]} if by_table else {}
        requests, data = [], []
        for _ in range(rounds):
            cache.clear()
            requests.append(timed(lambda url=url: client.get(url)))
            cache.clear()
            data.append(
                timed(lambda kw=tables: report_cached(benchmark=benchmark, scope=scope, **kw))
            )
        print(
            f"| {name} | {_median(requests)} | {_median(data)} |",
            flush=True,
        )
    print(f"load after: {Path('/proc/loadavg').read_text()}")


def _median(times: list[tuple[float, float]]) -> str:
    return " / ".join(f"{statistics.median(t[i] for t in times):.3f}" for i in (0, 1))


if __name__ == "__main__":
    main()
