"""Time the whole statistics report on 1,000,000 labels (goal: under 3 s on this machine).

    .venv/bin/python tests/bench/bench_stats.py [--instructions 10000] [--systems 15]

Synthetic data: 10,000 instructions with 1 to 4 questions (mean 2.2), 15 systems and 3
annotators per (question, system) item, about 1,000,000 labels, 2% MISSING and 5% UNKNOWN.
The report is what the evaluation pages need: majority vote, DRFR per system and per
constraint type, the instruction-clustered bootstrap CI of DRFR per system (1,000 resamples),
pairwise categories, Fleiss' kappa with its bootstrap CI, accuracy and PLD of one annotator
against the majority, and the disagreement-level distribution.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evaluation.stats import (  # noqa: E402
    MISSING,
    NO,
    UNKNOWN,
    YES,
    accuracy,
    disagreement_levels,
    drfr_by_bits,
    drfr_categories,
    drfr_counts,
    kappa_ci,
    kappa_from_ratings,
    level_distribution,
    majority_vote,
    pld,
    ratings_to_counts,
    ratio,
    ratio_ci,
)

ANNOTATORS = 3


def make_data(n_instructions: int, n_systems: int, rng: np.random.Generator) -> dict:
    """Build labels of shape (n_questions * n_systems, ANNOTATORS) and their item metadata."""
    per_instruction = rng.choice([1, 2, 3, 4], size=n_instructions, p=[0.3, 0.35, 0.2, 0.15])
    question_instruction = np.repeat(np.arange(n_instructions), per_instruction)
    n_questions = question_instruction.size
    question_mask = rng.integers(1, 32, size=n_questions)
    skill = rng.uniform(0.4, 0.9, size=n_systems)
    truth = rng.random((n_questions, n_systems)) < skill
    noise = rng.random((n_questions, n_systems, ANNOTATORS)) < 0.15
    labels = np.where(truth[..., None] ^ noise, YES, NO).astype(np.int8)
    roll = rng.random(labels.shape)
    labels[roll < 0.05] = UNKNOWN
    labels[roll > 0.98] = MISSING
    return {
        "labels": labels,
        "question_instruction": question_instruction,
        "question_mask": question_mask,
        "n_instructions": n_instructions,
        "n_systems": n_systems,
    }


def report(data: dict, rng: np.random.Generator) -> dict[str, float]:
    """Run every statistic of the report once; return the seconds spent per step."""
    timings: dict[str, float] = {}

    def step(name: str, started: float) -> float:
        now = time.perf_counter()
        timings[name] = now - started
        return now

    n_instructions, n_systems = data["n_instructions"], data["n_systems"]
    cube = data["labels"]
    n_questions = cube.shape[0]
    t = time.perf_counter()
    labels = cube.reshape(-1, ANNOTATORS)
    system = np.tile(np.arange(n_systems), n_questions)
    instruction = np.repeat(data["question_instruction"], n_systems)
    masks = np.repeat(data["question_mask"], n_systems)
    t = step("flatten", t)

    votes = majority_vote(labels)
    t = step("majority_vote", t)

    yes, counted = drfr_counts(votes.values, system, n_systems)
    ratio(yes, counted)
    drfr_counts(votes.values, system, n_systems, unknown_as_no=True)
    drfr_by_bits(votes.values, system, n_systems, masks, 5)
    t = step("drfr per system and per constraint bit", t)

    cell = instruction * n_systems + system
    yes_is, counted_is = drfr_counts(votes.values, cell, n_instructions * n_systems)
    yes_is = yes_is.reshape(n_instructions, n_systems)
    counted_is = counted_is.reshape(n_instructions, n_systems)
    t = step("drfr per instruction x system", t)

    ratio_ci(yes_is, counted_is, rng, n_resamples=1000)
    t = step("ratio_ci (10,000 clusters x 15 systems, 1000 resamples)", t)

    gold_categories, gold_defined = drfr_categories(yes_is, counted_is)
    t = step("drfr_categories", t)

    valid = (labels == YES) | (labels == NO)
    result = kappa_from_ratings(labels, valid, (NO, YES))
    t = step("kappa_from_ratings", t)

    counts, kept = ratings_to_counts(labels, valid, (NO, YES))
    kappa_ci(counts, instruction[kept], rng, n_resamples=1000)
    t = step("kappa_ci (1000 resamples)", t)

    single = labels[:, 0]
    accuracy(single, votes.values)
    s_yes, s_counted = drfr_counts(single, cell, n_instructions * n_systems)
    s_categories, s_defined = drfr_categories(
        s_yes.reshape(n_instructions, n_systems), s_counted.reshape(n_instructions, n_systems)
    )
    pld(s_categories, gold_categories, s_defined & gold_defined)
    t = step("accuracy and PLD of one annotator vs majority", t)

    level_distribution(disagreement_levels(cube), n_systems)
    step("disagreement levels", t)
    timings["_kappa"] = result.kappa or float("nan")
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instructions", type=int, default=10_000)
    parser.add_argument("--systems", type=int, default=15)
    args = parser.parse_args()
    data = make_data(args.instructions, args.systems, np.random.default_rng(0))
    n_labels = data["labels"].size
    print(f"{n_labels:,} labels ({data['labels'].shape[0]:,} questions x {args.systems} systems")
    print(f"x {ANNOTATORS} annotators, {args.instructions:,} instructions)")
    # Other work on the machine slows the bootstraps most (BLAS threads wait for a free core).
    print(f"load average before the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    started = time.perf_counter()
    timings = report(data, np.random.default_rng(1))
    total = time.perf_counter() - started
    kappa = timings.pop("_kappa")
    for name, seconds in timings.items():
        print(f"  {seconds:7.3f} s  {name}")
    verdict = "goal met" if total < 3.0 else "GOAL MISSED"
    print(f"  total {total:.2f} s (goal < 3 s: {verdict}); Fleiss' kappa of the labels {kappa:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
