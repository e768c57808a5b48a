"""Score parsed answers: accuracy under both rules, invalid shares and bootstrap intervals.

Plain numpy on one record per answer (no Django import), so every number can be checked by hand.

Conventions:
- accuracy = correct / valid under a rule; an invalid reply is neither right nor wrong, it only
  raises `invalid` = invalid / n. With no valid reply the accuracy is None.
- A cell's accuracy is the plain mean of the accuracies of the (dataset, mapping) pieces it
  holds, as the paper reports each instruction group "averaged over datasets and verbalizers"
  (§3.2; Figure 3 averages over datasets): a dataset with fewer items or more invalid replies
  weighs as much as any other. A piece with no valid reply is left out of the mean. A cell of
  one dataset and one mapping is its pooled accuracy. The invalid share is of the cell's
  answers (all pieces pooled).
- Intervals: 95 % percentile cluster bootstrap over items
  (`evaluation.stats.bootstrap.mean_ratio_ci`), the report's resamples and seed (settings
  REPORT_BOOTSTRAP_RESAMPLES and _SEED; 1,000 and 0 here by default): an item's
  answers under every mapping of the cell stay together, so the interval reflects which items
  were sampled; items are drawn within their dataset, so each resample takes the mean over the
  same pieces as the point estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evaluation.stats.bootstrap import mean_ratio_ci

RULES = ("strict", "lenient")
N_RESAMPLES = 1000
LEVEL = 0.95


@dataclass
class Records:
    """One row per answer: who answered, on what, and whether it was valid and correct.

    `prompts` names the prompts a row is counted among, so one answer may appear twice: once
    among every prompt its system answered, once among the prompts some people answered.
    """

    source: np.ndarray
    prompts: np.ndarray
    item: np.ndarray
    dataset: np.ndarray
    group: np.ndarray
    mapping: np.ndarray
    mode: np.ndarray
    valid: dict[str, np.ndarray]
    correct: dict[str, np.ndarray]
    choice: np.ndarray  # lenient parse: 1 positive word, 0 negative word, -1 invalid

    def __len__(self) -> int:
        return int(self.item.shape[0])

    def column(self, name: str) -> np.ndarray:
        return getattr(self, name)


def cells(
    records: Records,
    mask: np.ndarray,
    keys: Sequence[str | np.ndarray],
    *,
    average_over: Sequence[str] = ("dataset", "mapping"),
    rng_seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> list[dict]:
    """Return one dict per distinct key tuple among the masked records, in first-seen order.

    `keys` are column names of `records` or arrays of the same length. Each dict holds `key`
    (the tuple), `n`, and per rule `accuracy_<rule>`, `invalid_<rule>`, `ci_<rule>` (low, high;
    None when undefined). The accuracy is the mean over the cell's pieces, one per distinct
    value of the `average_over` columns (see the module docstring).
    """
    selected = np.flatnonzero(mask)
    if selected.size == 0:
        return []
    columns = [records.column(k) if isinstance(k, str) else np.asarray(k) for k in keys]
    tuples = list(zip(*(column[selected].tolist() for column in columns), strict=True))
    index: dict[tuple, int] = {}
    cell = np.fromiter((index.setdefault(t, len(index)) for t in tuples), np.int64, len(tuples))
    pieces = [records.column(name)[selected].tolist() for name in average_over]
    piece_index: dict[tuple, int] = {}
    piece = np.fromiter(
        (
            piece_index.setdefault((c, *rest), len(piece_index))
            for c, *rest in zip(cell.tolist(), *pieces, strict=True)
        ),
        np.int64,
        len(tuples),
    )
    piece_cell = np.fromiter((key[0] for key in piece_index), np.int64, len(piece_index))
    items, first, item_index = np.unique(
        records.item[selected], return_index=True, return_inverse=True
    )
    n = np.bincount(cell, minlength=len(index))
    out = [{"key": key, "n": int(n[i])} for key, i in index.items()]
    rng = np.random.default_rng(rng_seed)
    k, m = len(index), len(piece_index)
    # Both rules in one bootstrap: the same resampled items serve the strict and lenient columns.
    num = np.zeros((items.size, 2 * m))
    den = np.zeros((items.size, 2 * m))
    for r, rule in enumerate(RULES):
        np.add.at(num, (item_index, piece + r * m), records.correct[rule][selected])
        np.add.at(den, (item_index, piece + r * m), records.valid[rule][selected])
    members = np.concatenate([piece_cell, piece_cell + k])
    # Items drawn within their dataset: every resample holds items of each dataset.
    strata = records.dataset[selected][first]
    low, high = mean_ratio_ci(
        num, den, members, rng, n_groups=2 * k, strata=strata, n_resamples=n_resamples, level=LEVEL
    )
    piece_valid, piece_correct = den.sum(axis=0), num.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        piece_accuracy = np.where(piece_valid > 0, piece_correct / piece_valid, np.nan)
    for r, rule in enumerate(RULES):
        of_rule = slice(r * m, (r + 1) * m)
        valid = np.bincount(piece_cell, weights=piece_valid[of_rule], minlength=k)
        for i, row in enumerate(out):
            j = i + r * k
            defined = piece_accuracy[of_rule][(piece_cell == i) & (piece_valid[of_rule] > 0)]
            row[f"accuracy_{rule}"] = float(defined.mean()) if defined.size else None
            row[f"invalid_{rule}"] = float((n[i] - valid[i]) / n[i])
            row[f"ci_{rule}"] = (
                (float(low[j]), float(high[j])) if not np.isnan(low[j]) else (None, None)
            )
    return out


def majority_codes(prompt: np.ndarray, code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (prompts, majority code per prompt) for answers coded 1 (positive) / 0 (negative).

    The majority is the code more than half of a prompt's answers chose; a tie is -1 (invalid).
    """
    prompts, inverse = np.unique(prompt, return_inverse=True)
    positives = np.bincount(inverse, weights=(code == 1), minlength=prompts.size)
    negatives = np.bincount(inverse, weights=(code == 0), minlength=prompts.size)
    majority = np.where(positives > negatives, 1, np.where(negatives > positives, 0, -1))
    return prompts, majority.astype(np.int64)


def agreement_counts(
    prompt: np.ndarray, code: np.ndarray, *, return_kept: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Return Fleiss count rows (negative, positive) of the prompts with the most common number
    of answers (at least 2), so every row has the same number of raters as Fleiss' kappa needs.

    Invalid answers (-1) are not ratings. A tie between two numbers of answers keeps the smaller.
    With `return_kept`, also return the mask over the sorted distinct prompts that says which
    prompts the rows are.
    """
    prompts, inverse = np.unique(prompt, return_inverse=True)
    positives = np.bincount(inverse, weights=(code == 1), minlength=prompts.size)
    negatives = np.bincount(inverse, weights=(code == 0), minlength=prompts.size)
    totals = positives + negatives
    rated = totals[totals >= 2]
    if rated.size == 0:
        empty = np.zeros((0, 2), dtype=np.int64)
        return (empty, np.zeros(prompts.size, dtype=bool)) if return_kept else empty
    values, counts = np.unique(rated, return_counts=True)
    raters = values[np.argmax(counts)]
    keep = totals == raters
    rows = np.column_stack([negatives[keep], positives[keep]]).astype(np.int64)
    return (rows, keep) if return_kept else rows
