"""The measuring side of the demo: a judge configuration on the offline fake back-end, and one
run of it over the demo benchmark, so the judge page and the report's LLM row work at once.

Called by `manage.py load_demo` through the DEMO_LOADERS setting (annotate never imports
evaluation). Safe to run again: the configuration and its run are made once.
"""

from __future__ import annotations

from decimal import Decimal

from annotate.models import Benchmark, System
from annotate.services.demo_data import DEMO_BENCHMARK
from evaluation.models import JudgeConfig, JudgeRun
from evaluation.services.judge_configs import judge_config_create
from evaluation.services.judge_runs import judge_run_create, judge_run_execute

DEMO_JUDGE = "demo-judge (offline)"


def demo_judge_load() -> list[str]:
    """Create the demo judge configuration and run it once over the demo benchmark."""
    config = JudgeConfig.objects.filter(name=DEMO_JUDGE).first()
    notes = []
    if config is None:
        config = judge_config_create(
            name=DEMO_JUDGE,
            backend="fake",
            model="fake-judge",
            price_prompt_per_1k=Decimal("0.03"),
            price_completion_per_1k=Decimal("0.06"),
            requests_per_minute=60_000,  # the fake answers at once: no reason to pace it
            tokens_per_minute=10_000_000,
        )
        notes.append(
            f"Judge configuration '{DEMO_JUDGE}': offline fake back-end (no network, no bill),"
            " priced like GPT-4 so the report shows what it would cost."
        )
    benchmark = Benchmark.objects.get(name=DEMO_BENCHMARK)
    if not JudgeRun.objects.filter(config=config, benchmark=benchmark).exists():
        systems = System.objects.filter(responses__instruction__benchmark=benchmark).distinct()
        run = judge_run_create(config=config, benchmark=benchmark, systems=systems)
        judge_run_execute(run_id=run.pk)
        notes.append(f"Judge run #{run.pk} of '{DEMO_JUDGE}' on the demo benchmark.")
    return notes
