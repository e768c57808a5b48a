"""Decomposed Requirements Following Ratio (DRFR): the share of questions answered YES."""

from __future__ import annotations

import numpy as np

from evaluation.stats.codes import MISSING, N_CODES, NO, UNKNOWN, YES


def _check_groups(groups: np.ndarray, n_items: int, n_groups: int) -> np.ndarray:
    groups = np.asarray(groups)
    if groups.shape != (n_items,):
        raise ValueError(
            f"groups must have one entry per item ({n_items}); got shape {groups.shape}"
        )
    if groups.size and (groups.min() < 0 or groups.max() >= n_groups):
        raise ValueError(
            f"group ids must lie in 0..{n_groups - 1}; got {groups.min()}..{groups.max()}"
        )
    return groups.astype(np.intp, copy=False)


def drfr_counts(
    values: np.ndarray, groups: np.ndarray, n_groups: int, *, unknown_as_no: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Count YES items and counted items per group, the numerator and denominator of DRFR.

    DRFR[g] = yes[g] / counted[g], where yes[g] = #items of group g whose value is YES and
    counted[g] = #items of group g whose value is YES or NO. UNKNOWN items (ties, no vote) and
    MISSING items are left out of both. With `unknown_as_no=True` every item given is counted,
    so UNKNOWN and MISSING count as NO: the caller chooses which items to give (InFoBench
    equation 1 gives every question; the official script's ratio gives every answered one).
    `groups` holds one group id in 0..n_groups-1 per item. Returns two int64
    arrays of length n_groups.
    """
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"values must be one-dimensional; got shape {values.shape}")
    groups = _check_groups(groups, values.shape[0], n_groups)
    codes = np.issubdtype(values.dtype, np.integer) and values.size
    if codes and values.min() >= MISSING and values.max() <= UNKNOWN:
        # Label codes only: one count per group and code, no selection of items.
        key = groups * N_CODES
        key += values + (0 - MISSING)
        by_code = np.bincount(key, minlength=n_groups * N_CODES).reshape(n_groups, N_CODES)
        yes, no = by_code[:, YES - MISSING], by_code[:, NO - MISSING]
        counted = by_code.sum(axis=1) if unknown_as_no else yes + no
        return yes.astype(np.int64), counted.astype(np.int64)
    is_yes = values == YES
    yes = np.bincount(groups[is_yes], minlength=n_groups).astype(np.int64)
    if unknown_as_no:
        counted = np.bincount(groups, minlength=n_groups).astype(np.int64)
    else:
        counted = np.bincount(groups[is_yes | (values == NO)], minlength=n_groups).astype(np.int64)
    return yes, counted


def ratio(yes: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """Return yes / counted elementwise as float64, NaN where counted == 0 (undefined, not 0)."""
    yes = np.asarray(yes, dtype=np.float64)
    counted = np.asarray(counted, dtype=np.float64)
    out = np.full(np.broadcast(yes, counted).shape, np.nan)
    np.divide(yes, counted, out=out, where=counted != 0)
    return out


def drfr_by_bits(
    values: np.ndarray,
    groups: np.ndarray,
    n_groups: int,
    masks: np.ndarray,
    n_bits: int,
    *,
    unknown_as_no: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Count DRFR numerator and denominator per group and per bit of each item's mask.

    Bit b stands for mask value 1 << b (constraint types: Content 1, Linguistic 2, Style 4,
    Format 8, Number 16). An item counts under EACH of its bits, so an item with mask 3 counts
    for Content and for Linguistic; an item with mask 0 counts under none. Counting follows
    `drfr_counts` (same `unknown_as_no` convention). Returns (yes, counted), int64 arrays of
    shape (n_groups, n_bits).
    """
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"values must be one-dimensional; got shape {values.shape}")
    groups = _check_groups(groups, values.shape[0], n_groups)
    masks = np.asarray(masks).astype(np.int64, copy=False)
    if masks.shape != values.shape:
        raise ValueError(
            f"masks must have one entry per item ({values.shape}); got shape {masks.shape}"
        )
    # One count per (group, mask value), then each bit sums the mask values that have it: the
    # same integers as counting bit by bit, in one pass over the items.
    n_masks = 1 << n_bits
    if masks.size and (masks.min() < 0 or masks.max() >= n_masks):
        masks = masks & (n_masks - 1)
    yes_by_mask, counted_by_mask = drfr_counts(
        values, groups * n_masks + masks, n_groups * n_masks, unknown_as_no=unknown_as_no
    )
    has_bit = (np.arange(n_masks)[:, None] >> np.arange(n_bits)) & 1
    yes = yes_by_mask.reshape(n_groups, n_masks) @ has_bit
    counted = counted_by_mask.reshape(n_groups, n_masks) @ has_bit
    return yes.astype(np.int64), counted.astype(np.int64)
