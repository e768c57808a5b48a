"""Benchmark: the four figures the verbalizer report page loads, on a cold cache and again.

The demo set (`demo_verbalizer_create`: two datasets, 8 items, every mapping, direct and CoT,
the offline fake model and three demo readers), or with `--paper` a paper-size set (nine
datasets x 100 items x 12 mappings, direct: 10,800 prompts) answered by eight models whose
replies are written directly. Each round clears the cache, opens the report page, then fetches
its four SVGs through Django's test client, as a researcher: "cold" is the first round's four
requests, "warm" the same four requests once more without clearing. Fresh SQLite database in a
temporary directory (or DATABASE_URL if set).

    .venv/bin/python tests/bench/bench_verbalizer_figures.py [--paper] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.bench_verbalizer import fill_datasets, setup_django  # noqa: E402

PAPER_SYSTEMS = 8


def paper_set():
    """Nine datasets x 100 items x 12 mappings, direct; eight models' replies written directly
    (each right three times in four, invalid one time in twenty)."""
    from annotate.models import System
    from annotate.verbalizer.models import ModelAnswer, Prompt, SystemRun
    from annotate.verbalizer.services.sets import evaluation_set_create

    names = fill_datasets(100)
    evaluation_set = evaluation_set_create(
        name="paper", datasets=names, items=100, seed=1, mappings="all", modes=["direct"]
    ).evaluation_set
    prompts = list(Prompt.objects.filter(evaluation_set=evaluation_set).order_by("pk"))
    for k in range(PAPER_SYSTEMS):
        system = System.objects.create(name=f"model-{k + 1}")
        run = SystemRun.objects.create(
            evaluation_set=evaluation_set, system=system, endpoint_name="bench",
            model_size_b=k + 1,
        )  # fmt: skip
        ModelAnswer.objects.bulk_create(
            (
                ModelAnswer(
                    prompt=p, system=system, run=run,
                    reply="I cannot tell" if (p.pk + k) % 20 == 0
                    else p.expected_word if (p.pk * 7 + k) % 4 else _other(p),
                )
                for p in prompts
            ),
            batch_size=2000,
        )  # fmt: skip
    return evaluation_set


def _other(prompt) -> str:
    if prompt.expected_word == prompt.positive_word:
        return prompt.negative_word
    return prompt.positive_word


def demo_set():
    from annotate.verbalizer.demo import SET_NAME, demo_verbalizer_create
    from annotate.verbalizer.models import EvaluationSet

    demo_verbalizer_create()
    return EvaluationSet.objects.get(name=SET_NAME)


def four_figures(client, urls: list[str]) -> float:
    started = time.perf_counter()
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paper", action="store_true", help="a paper-size set, eight models")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(tmp)
        from django.contrib.auth import get_user_model
        from django.core.cache import cache
        from django.test import Client
        from django.urls import reverse

        from evaluation.verbalizer.figures import FIGURES

        started = time.perf_counter()
        evaluation_set = paper_set() if args.paper else demo_set()
        prompts = evaluation_set.prompts.count()
        print(f"set {evaluation_set.name!r}: {prompts:,} prompts, made in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        user = get_user_model().objects.create_superuser("bench", password="x")  # an admin
        client = Client()
        client.force_login(user)
        report_url = reverse("verbalizer-reports:detail", args=[evaluation_set.pk])
        urls = [
            reverse("verbalizer-reports:figure", args=[evaluation_set.pk, name, "svg"])
            for name in FIGURES
        ]
        cold, warm, page = [], [], []
        for _ in range(args.rounds):
            cache.clear()
            started = time.perf_counter()
            assert client.get(report_url).status_code == 200
            page.append(time.perf_counter() - started)  # computes and caches the report
            cold.append(four_figures(client, urls))
            warm.append(four_figures(client, urls))
        print(f"report page (report computed): median {statistics.median(page):.2f} s")
        for label, times in (("cold", cold), ("warm", warm)):
            shown = " / ".join(f"{t:.2f}" for t in times)
            print(f"4 figures {label}: {shown} s (median {statistics.median(times):.2f} s)")


if __name__ == "__main__":
    main()
