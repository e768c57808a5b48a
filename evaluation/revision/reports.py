"""Every table and figure of the KIWI paper computed on a study's sessions (docs/revision.md).

Table 2 (sessions per system), Figure 2 (rating distributions; instruction type by turn
position), Table 3 (fine-grained instruction types), Table 4 (error categories of neutral/bad
turns) and Table 5 (LLM judges against Majority, Random and human re-rating). Shares are
fractions in [0, 1]; a share of nothing is None. The statistics are evaluation.stats.revision.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from django.conf import settings

from annotate.revision.models import ErrorCategory, InstructionCategory, InstructionType, Study
from evaluation.revision.models import RevisionJudgeRun
from evaluation.revision.report_data import (
    RATING_CODES,
    TurnData,
    revision_reads,
)
from evaluation.stats.revision import (
    GOOD,
    METRICS,
    agreement,
    binary_metric_intervals,
    binary_metrics,
    majority_predictions,
    random_predictions,
    rating_shares,
)

INFO, STYLE = InstructionType.INFORMATION_SEEKING.value, InstructionType.STYLISTIC.value
ALL = "all"


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _clean(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else value


def _type_shares(types: list[str]) -> tuple[float | None, float | None]:
    typed = [t for t in types if t]
    return _share(typed.count(INFO), len(typed)), _share(typed.count(STYLE), len(typed))


def table2(data: TurnData) -> list[dict[str, Any]]:
    """Per system: sessions, turns, edited turns, turns per session, % info-seeking/stylistic.

    Sessions are the finished ones, a session ended satisfied before any turn included (it is
    a session of no turns, so it lowers the turns per session).
    """
    rows = []
    for system in data.systems:
        index = [i for i, name in enumerate(data.system) if name == system]
        sessions = data.sessions.get(system, 0)
        info, style = _type_shares([data.instruction_type[i] for i in index])
        rows.append(
            {
                "system": system,
                "sessions": sessions,
                "turns": len(index),
                "edited": int(data.edited[index].sum()) if index else 0,
                "turns_per_session": _share(len(index), sessions),
                "information_seeking": info,
                "stylistic": style,
            }
        )
    return rows


def sessions_without_turns(data: TurnData) -> dict[str, int]:
    """Per system, the finished sessions with no rated turn (ended "I am satisfied" before any
    instruction): Table 2 counts them as sessions of 0 turns, and its note says how many."""
    counts = {}
    for system in data.systems:
        with_turns = {
            int(s) for s, name in zip(data.session_id, data.system, strict=True) if name == system
        }
        if data.sessions.get(system, 0) > len(with_turns):
            counts[system] = data.sessions[system] - len(with_turns)
    return counts


def _rating_row(system: str, kind: str, codes: np.ndarray) -> dict[str, Any]:
    good, neutral, bad = rating_shares(codes)
    return {
        "system": system,
        "instruction_type": kind,
        "turns": int(codes.size),
        "good": _clean(good),
        "neutral": _clean(neutral),
        "bad": _clean(bad),
    }


def figure2_ratings(data: TurnData) -> list[dict[str, Any]]:
    """Rating distribution per system for stylistic, information-seeking and all instructions."""
    rows = []
    systems = np.asarray(data.system, dtype=object)
    types = np.asarray(data.instruction_type, dtype=object)
    for system in data.systems:
        mine = systems == system
        for kind in (STYLE, INFO, ALL):
            mask = mine if kind == ALL else mine & (types == kind)
            rows.append(_rating_row(system, kind, data.rating[mask]))
    return rows


def figure2_positions(data: TurnData) -> list[dict[str, Any]]:
    """Instruction type by turn position: for each position, the share of each type."""
    rows = []
    for position in sorted({int(p) for p in data.position}):
        types = [data.instruction_type[i] for i in np.flatnonzero(data.position == position)]
        info, style = _type_shares(types)
        rows.append(
            {
                "position": position,
                "turns": len(types),
                "information_seeking": info,
                "stylistic": style,
            }
        )
    return rows


def _labels(human: list[str], data: TurnData, predicted: dict[int, str]) -> list[str]:
    """The human label where given, else the classifier's, else ""."""
    return [
        label or predicted.get(int(turn_id), "")
        for label, turn_id in zip(human, data.turn_id, strict=True)
    ]


def _agreement(human: list[str], data: TurnData, run: RevisionJudgeRun | None, predicted):
    pairs = [
        (label, predicted[int(t)])
        for label, t in zip(human, data.turn_id, strict=True)
        # A reply naming no category is no label: the turn counts as unlabelled in the rows
        # and as "none" in the sources, so it is not one "having both" either.
        if label and predicted.get(int(t))
    ]
    return {
        "run": run.pk if run else None,
        "compared": len(pairs),
        "agreement": _clean(agreement(*zip(*pairs, strict=True))) if pairs else None,
    }


OTHERS = "others"
# Paper, appendix A.3: "We merge categories with fewer than 5% of examples into 'Others'."
OTHERS_PERCENT = 5


def merge_small_categories(groups: dict[str, list[int]], total: int) -> tuple[dict, list[str]]:
    """Merge the categories under OTHERS_PERCENT % of `total` turns into "others" (appendix A.3).

    `groups` maps a category ("" = unlabelled) to its turns' indices. A category is merged when
    100 * turns < OTHERS_PERCENT * total (integers, so exactly 5% stays). "others" itself and
    the unlabelled turns are never merged away; "others" is listed last of the categories.
    Returns the merged groups in order and the names of the categories merged.
    """
    small = [
        c
        for c, index in groups.items()
        if c not in ("", OTHERS) and 100 * len(index) < OTHERS_PERCENT * total
    ]
    if not small:
        return groups, []
    others = sorted([i for c in (*small, OTHERS) for i in groups.get(c, [])])
    merged = {c: index for c, index in groups.items() if c not in (*small, OTHERS, "")}
    merged[OTHERS] = others
    if "" in groups:
        merged[""] = groups[""]
    return merged, small


def _others_rule(merged: list[str]) -> dict[str, Any]:
    return {"percent": OTHERS_PERCENT, "source": "KIWI appendix A.3", "merged": merged}


def _table3_row(category: str, index: list[int], data: TurnData, total: int) -> dict[str, Any]:
    info, style = _type_shares([data.instruction_type[i] for i in index])
    row = {
        "category": category,
        "turns": len(index),
        "share": _share(len(index), total),
        "information_seeking": info,
        "stylistic": style,
    }
    for system in data.systems:
        mine = [i for i in index if data.system[i] == system]
        row[f"good:{system}"] = _share(int((data.rating[mine] == GOOD).sum()), len(mine))
    return row


def _grouped(labels: list[str], population, categories: list[str]) -> dict[str, list[int]]:
    groups = {c: [i for i in population if labels[i] == c] for c in [*categories, ""]}
    return {c: index for c, index in groups.items() if index}


def table3(data: TurnData, predicted: dict[int, str], run) -> dict[str, Any]:
    """Fine-grained instruction types: share, info/style split and % good per system.

    `rows` is the paper's view (categories under 5% merged into "others"), `categories` every
    category on its own. Both are of the categorised turns only, as the paper's distribution
    is of the instructions GPT-4 classified (§4.2, appendix A.3): a turn not classified yet is
    no category, and counting it would push real ones under 5%. `unlabelled` counts those.
    """
    labels = _labels(data.instruction_category, data, predicted)
    categorised = [i for i, label in enumerate(labels) if label]
    groups = _grouped(labels, categorised, InstructionCategory.values)
    merged, small = merge_small_categories(groups, len(categorised))
    sources = Counter(
        "human" if h else ("classifier" if label else "none")
        for h, label in zip(data.instruction_category, labels, strict=True)
    )
    rows = [_table3_row(c, index, data, len(categorised)) for c, index in merged.items()]
    return {
        "rows": rows,
        "categories": [
            _table3_row(c, index, data, len(categorised)) for c, index in groups.items()
        ],
        "unlabelled": len(labels) - len(categorised),
        "others_rule": _others_rule(small),
        "sources": dict(sources),
        "agreement": _agreement(data.instruction_category, data, run, predicted),
    }


def _table4_row(category: str, index: list[int], data: TurnData, failed) -> dict[str, Any]:
    row = {
        "category": category,
        "turns": len(index),
        "share": _share(len(index), len(failed)),
    }
    for system in data.systems:
        mine_failed = [i for i in failed if data.system[i] == system]
        mine = [i for i in index if data.system[i] == system]
        row[f"share:{system}"] = _share(len(mine), len(mine_failed))
    return row


def table4(data: TurnData, predicted: dict[int, str], run) -> dict[str, Any]:
    """Error categories of neutral and bad turns, overall and per system.

    `rows` merges the categories under 5% of the failed turns into "others", as Table 3;
    `categories` keeps every category. Both are of the categorised failed turns only, as
    Table 3's are of the categorised turns: a failed turn whose comment is not classified yet
    is no category, and counting it would push real ones under 5% (and every share down).
    `unlabelled` counts those.
    """
    failed = [int(i) for i in np.flatnonzero(data.rating != GOOD)]
    labels = _labels(data.error_category, data, predicted)
    categorised = [i for i in failed if labels[i]]
    groups = _grouped(labels, categorised, ErrorCategory.values)
    merged, small = merge_small_categories(groups, len(categorised))
    failed_set = set(failed)
    human = [data.error_category[i] if i in failed_set else "" for i in range(len(data))]
    return {
        "rows": [_table4_row(c, index, data, categorised) for c, index in merged.items()],
        "categories": [_table4_row(c, index, data, categorised) for c, index in groups.items()],
        "unlabelled": len(failed) - len(categorised),
        "others_rule": _others_rule(small),
        "agreement": _agreement(human, data, run, predicted),
    }


def _metric_row(
    model: str,
    truth,
    predicted,
    bootstrap_seed: int,
    n_resamples: int,
    *,
    turns=None,
    **extra,
) -> dict[str, Any]:
    """One Table 5 row: the binary metrics and their bootstrap intervals.

    Each row resamples with a generator of its own, seeded by the report's seed: its interval
    is what binary_metric_intervals gives its turns with that seed, whatever rows come before
    it (a judge run added since does not move the Human row's), and rows on one test split
    are resampled on the same draws of turns. `turns` (one turn id per item, the Human row's
    re-ratings) resamples a turn's items together, and `n` counts the turns.
    """
    n = len(truth) if turns is None else len(set(turns))
    row: dict[str, Any] = {"model": model, **extra, "n": int(n)}
    values = binary_metrics(truth, predicted)
    rng = np.random.default_rng(bootstrap_seed)
    intervals = binary_metric_intervals(
        truth, predicted, rng, clusters=turns, n_resamples=n_resamples
    )
    for name in METRICS:
        row[name] = _clean(values[name])
        row[f"{name}_ci_low"], row[f"{name}_ci_high"] = (_clean(v) for v in intervals[name])
    return row


def _split_summary(number: int, run, good_by_turn: dict, train: list, test: list) -> dict:
    """A test split's number (1, 2... in run order), seed, runs and sizes; `runs` is filled
    as the runs on it are met."""
    dev = sum(1 for t in run.split.get("dev", []) if t in good_by_turn)
    return {
        "split": number,
        "seed": run.seed,
        "runs": [],
        "turns": len(train) + dev + len(test),
        "train": len(train),
        "dev": dev,
        "test": len(test),
    }


def table5(
    data: TurnData,
    *,
    runs: list[RevisionJudgeRun],
    predictions: dict[int, dict[int, str]],
    reratings: list[tuple[int, str, str]],
    bootstrap_seed: int,
    n_resamples: int,
) -> dict[str, Any]:
    """The rating judges (`runs`, their labels in `predictions`) on their test split, the
    Majority/Random baselines, human agreement (`reratings`: reratings_read's); `bootstrap_seed`
    seeds every row's bootstrap (_metric_row)."""
    good_by_turn = {int(t): int(r) == GOOD for t, r in zip(data.turn_id, data.rating, strict=True)}
    rows, splits = [], {}
    for run in runs:
        test = [t for t in run.split.get("test", []) if t in good_by_turn]
        train = [t for t in run.split.get("train", []) if t in good_by_turn]
        truth = np.asarray([good_by_turn[t] for t in test], dtype=bool)
        split_key = (run.seed, tuple(test))
        if split_key not in splits:
            # Two splits of one seed (a run after more turns were finished) are told apart by
            # their number, which their baseline rows, judge rows and note all carry.
            split = _split_summary(len(splits) + 1, run, good_by_turn, train, test)
            splits[split_key] = split
            train_truth = np.asarray([good_by_turn[t] for t in train], dtype=bool)
            # A baseline has no prompt mode nor shots: None, shown "–" as the Human row's.
            extra = {"run": None, "split": split["split"], "seed": run.seed}
            extra |= {"mode": None, "shots": None}
            majority = majority_predictions(train_truth, len(test))
            rows.append(
                _metric_row("Majority", truth, majority, bootstrap_seed, n_resamples, **extra)
            )
            drawn = random_predictions(train_truth, len(test), np.random.default_rng(run.seed))
            rows.append(_metric_row("Random", truth, drawn, bootstrap_seed, n_resamples, **extra))
        split = splits[split_key]
        split["runs"].append(run.pk)
        labels = predictions[run.pk]
        predicted = np.asarray([labels.get(t, "") == "good" for t in test], dtype=bool)
        rows.append(
            _metric_row(
                run.endpoint_name or "fake",
                truth,
                predicted,
                bootstrap_seed,
                n_resamples,
                run=run.pk,
                split=split["split"],
                seed=run.seed,
                mode=run.mode,
                shots=run.shots,
                unparsed=sum(1 for t in test if not labels.get(t)),
            )
        )
    if reratings:
        truth = np.asarray([r == "good" for _, r, _ in reratings], dtype=bool)
        second = np.asarray([r == "good" for _, _, r in reratings], dtype=bool)
        row = _metric_row(
            "Human",
            truth,
            second,
            bootstrap_seed,
            n_resamples,
            turns=[turn for turn, _, _ in reratings],
            run=None,
            split=None,
            seed=None,
            mode=None,
            shots=None,
        )
        row["three_way_agreement"] = _clean(
            agreement([r for _, r, _ in reratings], [r for _, _, r in reratings])
        )
        rows.append(row)
    return {"rows": rows, "splits": list(splits.values())}


def revision_report_build(
    *, study: Study, n_resamples: int | None = None, seed: int | None = None
) -> dict[str, Any]:
    """Compute every table of the study's report as one JSON-ready dict."""
    n_resamples = settings.REPORT_BOOTSTRAP_RESAMPLES if n_resamples is None else n_resamples
    seed = settings.REPORT_BOOTSTRAP_SEED if seed is None else seed
    read = revision_reads(study=study)
    data, category_run, error_run = read.turns, read.category_run, read.error_run
    return {
        "study": study.name,
        "turns": len(data),
        # Turns imported without an instruction type: outside the type shares (a note says so).
        "untyped_turns": sum(1 for kind in data.instruction_type if not kind),
        # Finished work of accounts whose kind is not decided: in none of the figures below.
        "waiting_for_kind": read.waiting_for_kind.as_dict(),
        # Finished work of accounts an admin blocked: in none of the figures while it lasts.
        "blocked": read.blocked.as_dict(),
        "rating_codes": {name: code for name, code in RATING_CODES.items()},
        "table2": table2(data),
        "sessions_without_turns": sessions_without_turns(data),
        "figure2_ratings": figure2_ratings(data),
        "figure2_positions": figure2_positions(data),
        "table3": table3(
            data, read.predictions.get(category_run.pk, {}) if category_run else {}, category_run
        ),
        "table4": table4(
            data, read.predictions.get(error_run.pk, {}) if error_run else {}, error_run
        ),
        "table5": table5(
            data,
            runs=read.rating_runs,
            predictions=read.predictions,
            reratings=read.reratings,
            bootstrap_seed=seed,
            n_resamples=n_resamples,
        ),
        "bootstrap": {"resamples": n_resamples, "seed": seed, "level": 0.95},
    }
