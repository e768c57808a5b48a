"""Build a benchmark's report: every computation of the InFoBench paper on the data in the app.

The conventions (sources, majority vote, the three named UNKNOWN conventions of DRFR and the two
of ACC in evaluation.conventions, pairwise categories, kappa, PLD, costs, Tables 2 and 6, Figure
4's principal domains) and the JSON schema are in docs/reports.md. All arithmetic is done
by evaluation.stats on numpy arrays from evaluation.selectors.report_data.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import cached_property
from typing import IO

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, F, Max, Q, Sum
from django.utils import timezone

from annotate.crowd.models import BonusStatus
from annotate.crowd.selectors import crowd_paid_work_q
from annotate.models import (
    Assignment,
    AssignmentStatus,
    Benchmark,
    ConstraintType,
    DirectScore,
    Label,
    Subset,
)
from annotate.selectors.annotator_kinds import kinds_fingerprint
from annotate.selectors.fingerprints import ids_fingerprint, stamps_sum
from annotate.selectors.identities import IdentityScope, annotator_names_shown
from annotate.selectors.names import names_there_are
from annotate.selectors.results import counted_work_fingerprint
from annotate.services.files import csv_writer
from evaluation.caching import cache_get_or_build, computation_version
from evaluation.conventions import (
    ACC_MODES,
    DEFAULT_ACC,
    DEFAULT_UNKNOWN,
    UNKNOWN_CONVENTIONS,
    UNKNOWN_MODES,
)
from evaluation.errors import ReportError
from evaluation.models import JudgeCall, JudgeRun
from evaluation.selectors.judge_label_runs import judge_label_runs
from evaluation.selectors.report_costs import SourceCost, source_costs, source_costs_and_kinds
from evaluation.selectors.report_data import (
    ANNOTATOR_SOURCE,
    KIND_CODES,
    SUBSET_CODES,
    BenchmarkArrays,
    annotator_source,
    benchmark_arrays,
    layout_fingerprint,
    read_meanwhile,
)
from evaluation.selectors.snapshot import read_snapshot
from evaluation.stats import (
    MISSING,
    NO,
    UNKNOWN,
    YES,
    accuracy_from_pairs,
    drfr_by_bits,
    drfr_categories,
    drfr_counts,
    fleiss_kappa,
    judged_levels,
    label_pairs,
    level_distribution,
    majority_from_votes,
    pld,
    ratio,
    reachable_level,
    score_categories,
)
from evaluation.stats.bootstrap import (
    WeightStream,
    percentile_interval,
    ratio_resampler,
    too_few_clusters,
)
from evaluation.stats.kappa import kappa_resampler

SUBSETS = ("easy", "hard", "overall")
KIND_NAMES = {code: name for name, code in KIND_CODES.items()}
CONSTRAINT_NAMES = [choice.label for choice in ConstraintType]
EXPERT_MAJORITY = "expert-majority"
CROWD_MAJORITY = "crowd-majority"
# The gold of an expert's own row in Table 4: the majority of the other experts on each item.
OTHER_EXPERTS = "other-experts"


@dataclass
class Source:
    """One set of labels treated as one annotation: an annotator, or a group's majority."""

    name: str  # a majority's name, or an annotator's key (annotator_source): named per viewer
    kind: str
    values: np.ndarray  # int8 per item, MISSING where the source gave no label
    touched: np.ndarray  # bool per response: the source labelled it at all
    ties: int = 0
    no_votes: int = 0
    voted_items: int = 0


def _number(value) -> float | None:
    """Return a JSON-safe float: NaN and infinities become None."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


def _subset_instructions(data: BenchmarkArrays, subset: str) -> np.ndarray:
    if subset == "overall":
        return np.ones(data.n_instructions, dtype=bool)
    return data.instruction_subset == (0 if subset == "easy" else 1)


# --- Confidence intervals ------------------------------------------------------------------------


# Weights of about 2**23 cells (64 MB) per matrix product of the ratio CIs.
_RATIO_BATCH_CELLS = 1 << 23


class _RatioBatch:
    """Gather chunks of bootstrap weights into one reused buffer, for one matrix product per
    full buffer: the table of counts (instructions × columns) is then read once per buffer
    rather than once per chunk. Exact: see ratio_resampler."""

    def __init__(self, numerators: np.ndarray, denominators: np.ndarray, samples: list):
        self.resample = ratio_resampler(numerators, denominators)
        self.samples = samples
        self.n_clusters, self.n_columns = numerators.shape[0], 2 * numerators.shape[1]
        self.buffer: np.ndarray | None = None
        self.filled = 0

    def add(self, weights: np.ndarray) -> None:
        if self.buffer is None:
            # Worth it only while a chunk has fewer resamples than the table has columns (then
            # the table, not the weights, is most of what a product reads): many instructions.
            rows = min(_RATIO_BATCH_CELLS // max(self.n_clusters, 1), 2 * self.n_columns)
            self.buffer = np.empty((rows if len(weights) < rows else 0, self.n_clusters))
        if len(weights) > len(self.buffer):
            self.flush()
            self.samples.append(self.resample(weights))
            return
        if self.filled + len(weights) > len(self.buffer):
            self.flush()
        self.buffer[self.filled : self.filled + len(weights)] = weights
        self.filled += len(weights)

    def flush(self) -> None:
        if self.filled:
            self.samples.append(self.resample(self.buffer[: self.filled]))
            self.filled = 0


class Bootstrap:
    """Collect the CIs a report needs, then compute them in one pass per set of instructions.

    Every interval resamples whole instructions. Intervals over the same set of instructions
    share the same resamples (one draw of weights, one matrix product per chunk), which is what
    keeps a report over a million labels within seconds. A row's interval is written into it
    (`ci_low`, `ci_high`) when `resolve` runs.
    """

    def __init__(self, n_instructions: int, weights: WeightStream):
        self.n_instructions, self.weights = n_instructions, weights
        self.level = 0.95
        self.groups: dict[bytes, dict] = {}

    def _group(self, instructions: np.ndarray) -> dict:
        key = np.packbits(instructions).tobytes()
        if key not in self.groups:
            self.groups[key] = {"index": np.flatnonzero(instructions), "ratios": [], "kappas": []}
        return self.groups[key]

    def ratio(self, rows: list[dict], instructions, numerators, denominators) -> None:
        """CI of Σ numerators / Σ denominators per column, one row per column."""
        group = self._group(instructions)
        group["ratios"].append((rows, numerators[group["index"]], denominators[group["index"]]))

    def kappa(self, row: dict, counts: np.ndarray, item_instruction: np.ndarray) -> None:
        """CI of Fleiss' kappa over items, each belonging to an instruction."""
        instructions = np.zeros(self.n_instructions, dtype=bool)
        instructions[item_instruction] = True
        group = self._group(instructions)
        clusters = np.searchsorted(group["index"], item_instruction)
        group["kappas"].append((row, kappa_resampler(counts, clusters)))

    def resolve(self) -> None:
        for group in self.groups.values():
            self._resolve_group(group)

    def _resolve_group(self, group: dict) -> None:
        ratios, kappas = group["ratios"], group["kappas"]
        ratio_samples, kappa_samples = [], []
        if ratios:
            batch = _RatioBatch(
                np.hstack([r[1] for r in ratios]), np.hstack([r[2] for r in ratios]), ratio_samples
            )
        for weights in self.weights.chunks(len(group["index"])):
            if kappas:
                kappa_samples.append(
                    np.stack([resample(weights) for _, resample in kappas], axis=1)
                )
            if ratios:
                batch.add(weights)
        if ratios:
            batch.flush()
            low, high = percentile_interval(np.vstack(ratio_samples), self.level)
            # A column counted on fewer than two instructions would read [x, x]: no interval.
            few = too_few_clusters(np.hstack([r[2] for r in ratios]))
            low[few], high[few] = np.nan, np.nan
            rows = [row for r in ratios for row in r[0]]
            for row, lo, hi in zip(rows, low, high, strict=True):
                row["ci_low"], row["ci_high"] = _number(lo), _number(hi)
        if kappas:
            low, high = percentile_interval(np.vstack(kappa_samples), self.level)
            if len(group["index"]) < 2:  # one instruction: every resample the same, [κ, κ]
                low[:], high[:] = np.nan, np.nan
            for (row, _), lo, hi in zip(kappas, low, high, strict=True):
                row["ci_low"], row["ci_high"] = _number(lo), _number(hi)


# Weights drawn while the labels are read: at most 2**26 (64 MB, one byte each).
_DRAW_AHEAD_CELLS = 1 << 26


def _draw_ahead(weights: WeightStream, instruction_subset: np.ndarray, labels_read) -> None:
    """Draw the bootstrap's weights while the labels are being read, for the sets of
    instructions it will most likely resample first: the leaderboard's first source over the
    easy, the hard and all instructions, which are the subsets themselves unless that source
    left whole instructions unlabelled (then the weights are drawn again: same numbers)."""
    sizes = [
        len(instruction_subset)
        if subset == "overall"
        else int(np.count_nonzero(instruction_subset == SUBSET_CODES[subset]))
        for subset in SUBSETS
    ]
    weights.draw_ahead(
        [size for size in sizes if size], stop=labels_read, max_cells=_DRAW_AHEAD_CELLS
    )


# --- Label-level results, computed in pieces of instructions ------------------------------------

# Items per piece: about 2**19 × 3 labels, so a piece's temporary arrays stay near 12 MB (int64)
# and a million labels are one piece, which needs no partition of the labels.
PIECE_ITEMS = 1 << 19


@dataclass
class LabelResults:
    """Everything the report takes from single labels, merged from pieces of instructions.

    A piece is a range of instructions, and with them all their items, labels and raters: a
    majority is local to an item, a rater's categories and a question's disagreement local to
    an instruction. So the pieces' results merge exactly: item values are disjoint slices of
    each source's values, rater rows are concatenated in instruction order, counts (ties, no
    votes, disagreement levels) are added. Everything after this stage (DRFR counts per
    instruction, breakdowns, kappa, the bootstrap) works on these merged arrays.
    """

    sources: list[Source]
    raters: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]  # kind: rows per piece
    levels: dict[str, np.ndarray]  # kind: questions per disagreement level
    reachable: dict[str, int]  # kind: the highest level a question of it can reach

    def rater_rows(self, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return (instruction, categories, defined) of every (instruction, rater) of a kind."""
        pieces = self.raters[kind]
        return tuple(np.concatenate([piece[i] for piece in pieces]) for i in range(3))


@dataclass
class _Piece:
    """The labels of a range of instructions, items numbered from the range's first item."""

    instructions: slice
    items: slice
    item: np.ndarray
    annotator: np.ndarray
    value: np.ndarray


def piece_bounds(data: BenchmarkArrays, piece_items: int) -> np.ndarray:
    """Return the first instruction of each piece, and n_instructions: ranges of whole
    instructions of about `piece_items` items each (one instruction at least)."""
    targets = np.arange(0, data.n_items, max(piece_items, 1))
    starts = np.searchsorted(data.instruction_first_item, targets, side="right") - 1
    return np.unique(np.concatenate([[0], np.maximum(starts, 0), [data.n_instructions]]))


def _pieces(data: BenchmarkArrays, piece_items: int):
    """Yield the labels piece by piece (a stable partition of the labels by piece)."""
    bounds = piece_bounds(data, piece_items)
    item_bounds = data.instruction_first_item[bounds]
    if len(bounds) <= 2:
        order = None
        starts = np.array([0, len(data.label_item)])
    else:
        piece = np.searchsorted(item_bounds[1:-1], data.label_item, side="right")
        # A small integer key: numpy sorts it by radix, in linear time.
        key = piece.astype(np.uint16 if len(bounds) < 1 << 16 else np.int64)
        order = np.argsort(key, kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=len(bounds) - 1))])
    columns = (data.label_item, data.label_annotator, data.label_value)
    if order is not None:
        columns = tuple(column[order] for column in columns)
    for p in range(len(bounds) - 1):
        labels = slice(int(starts[p]), int(starts[p + 1]))
        first = int(item_bounds[p])
        yield _Piece(
            instructions=slice(int(bounds[p]), int(bounds[p + 1])),
            items=slice(first, int(item_bounds[p + 1])),
            item=columns[0][labels] - first if first else columns[0][labels],
            annotator=columns[1][labels],
            value=columns[2][labels],
        )


def _empty_source(data: BenchmarkArrays, name: str, kind: str) -> Source:
    values = np.full(data.n_items, MISSING, dtype=np.int8)
    return Source(name, kind, values, np.zeros(len(data.response_instruction), dtype=bool))


def _label_results(
    data: BenchmarkArrays, unknown: str, piece_items: int = PIECE_ITEMS
) -> LabelResults:
    """Each expert, the expert majority, the crowd majority, each LLM judge, in that order, with
    the raters' categories and the disagreement levels of experts and crowd, piece by piece."""
    labelled = set(np.flatnonzero(np.bincount(data.label_annotator)).tolist())
    by_kind = {
        kind: [a for a in range(len(data.annotator_names)) if data.annotator_kinds[a] == code]
        for kind, code in KIND_CODES.items()
    }
    kinds_labelled = {kind: any(a in labelled for a in by_kind[kind]) for kind in KIND_CODES}
    sourced = [a for kind in ("expert", "llm") for a in by_kind[kind] if a in labelled]
    # One row of values per annotator source, filled by one scatter per piece.
    values = np.full((len(sourced), data.n_items), MISSING, dtype=np.int8)
    row_of = np.full(len(data.annotator_names), -1, dtype=np.int64)
    row_of[sourced] = np.arange(len(sourced))
    annotator_sources = {
        a: Source(
            annotator_source(data.annotator_ids[a]),
            KIND_NAMES[int(data.annotator_kinds[a])],
            values[row],
            np.zeros(len(data.response_instruction), dtype=bool),
        )
        for row, a in enumerate(sourced)
    }
    majorities = {
        kind: _empty_source(data, name, kind)
        for kind, name in (("expert", EXPERT_MAJORITY), ("crowd", CROWD_MAJORITY))
        if kinds_labelled[kind]
    }
    results = LabelResults(
        sources=[annotator_sources[a] for a in by_kind["expert"] if a in annotator_sources]
        + list(majorities.values())
        + [annotator_sources[a] for a in by_kind["llm"] if a in annotator_sources],
        raters={kind: [] for kind in ("expert", "crowd")},
        levels={kind: np.zeros(data.n_systems + 1, dtype=np.int64) for kind in ("expert", "crowd")},
        reachable={"expert": 0, "crowd": 0},
    )
    for piece in _pieces(data, piece_items):
        row = row_of[piece.annotator]
        rows, items, piece_values = _where(row >= 0, row, piece.item, piece.value)
        values[rows, piece.items.start + items] = piece_values
        kinds = data.annotator_kinds[piece.annotator]
        for kind in ("expert", "crowd"):
            selected = kinds == KIND_CODES[kind]
            if selected.any():
                _kind_piece(data, piece, selected, kind, majorities[kind], unknown, results)
    for source in results.sources:
        source.touched[data.item_response[source.values != MISSING]] = True
    return results


def _where(selected: np.ndarray, *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """Return the columns' entries where `selected`: the columns themselves when all are."""
    if selected.all():
        return columns
    return tuple(column[selected] for column in columns)


def _kind_piece(data, piece: _Piece, selected, kind: str, majority, unknown, results) -> None:
    """Add one piece's majority, rater rows and disagreement levels of one kind of annotator
    (its labels: `selected`)."""
    items, annotators, values = _where(selected, piece.item, piece.annotator, piece.value)
    n_items = piece.items.stop - piece.items.start
    # Labels per item and value (NO, YES, UNKNOWN), one count for all three.
    counts = np.bincount(items * 3 + values, minlength=3 * n_items).reshape(n_items, 3)
    yes, no = counts[:, YES], counts[:, NO]
    labelled = (counts[:, UNKNOWN] + yes + no) > 0
    votes = majority_from_votes(yes, no)
    majority.values[piece.items] = np.where(labelled, votes.values, MISSING)
    majority.ties += int(np.count_nonzero(votes.ties[labelled]))
    majority.no_votes += int(np.count_nonzero(votes.no_votes[labelled]))
    majority.voted_items += int(np.count_nonzero(labelled))
    results.levels[kind] += _disagreement_levels(data, piece, yes, no)
    question = data.item_question[piece.items]
    reachable = reachable_level(yes, no, question - int(question.min()))
    results.reachable[kind] = max(results.reachable[kind], reachable)
    results.raters[kind].append(_rater_counts(data, piece, items, annotators, values, unknown))


# --- DRFR ----------------------------------------------------------------------------------------


def _as_no(unknown: str) -> bool:
    """Whether the items a convention counts count UNKNOWN (and MISSING) as NO."""
    return unknown != "exclude"


def _counted_items(data: BenchmarkArrays, source: Source, unknown: str) -> np.ndarray:
    """Items that take part in the source's DRFR under a convention (docs/reports.md).

    exclude and official: the items the source labelled (exclude then drops its UNKNOWN);
    no (equation 1): every question of every response the source labelled at all.
    """
    if unknown == "no":
        return source.touched[data.item_response]
    return source.values != MISSING


def _instruction_system_counts(data, source, unknown: str) -> tuple[np.ndarray, np.ndarray]:
    """Return (yes, counted), each of shape (instructions, systems)."""
    items = _counted_items(data, source, unknown)
    groups = data.item_instruction[items] * data.n_systems + data.item_system[items]
    yes, counted = drfr_counts(
        source.values[items],
        groups,
        data.n_instructions * data.n_systems,
        unknown_as_no=_as_no(unknown),
    )
    shape = (data.n_instructions, data.n_systems)
    return yes.reshape(shape), counted.reshape(shape)


def _leaderboard(data, sources, counts, bootstrap: Bootstrap) -> list[dict]:
    rows = []
    for source in sources:
        yes, counted = counts[source.name]
        for subset in SUBSETS:
            instructions = _subset_instructions(data, subset) & (counted.sum(axis=1) > 0)
            if not instructions.any():
                continue
            yes_sum, counted_sum = yes[instructions].sum(axis=0), counted[instructions].sum(axis=0)
            drfr = ratio(yes_sum, counted_sum)
            systems = np.flatnonzero(counted_sum)
            responses, labelled = _responses_labelled(data, source, subset)
            new_rows = [
                {
                    "system": data.systems[s],
                    "source": source.name,
                    "source_kind": source.kind,
                    "subset": subset,
                    "drfr": _number(drfr[s]),
                    "ci_low": None,
                    "ci_high": None,
                    "yes": int(yes_sum[s]),
                    "questions": int(counted_sum[s]),
                    "responses_labelled": int(labelled[s]),
                    "responses": int(responses[s]),
                }
                for s in systems
            ]
            bootstrap.ratio(new_rows, instructions, yes[:, systems], counted[:, systems])
            rows += new_rows
    return rows


def _responses_labelled(data, source: Source, subset: str) -> tuple[np.ndarray, np.ndarray]:
    """Return (responses, labelled) per system in the subset: the benchmark's responses, and
    those the source labelled at all. A run stopped part-way (a judge over the easy set only)
    gives a DRFR over what it labelled, which the report marks as partial where the two differ."""
    in_subset = _subset_instructions(data, subset)[data.response_instruction]
    systems = data.response_system[in_subset]
    responses = np.bincount(systems, minlength=data.n_systems)
    labelled = np.bincount(systems[source.touched[in_subset]], minlength=data.n_systems)
    return responses, labelled


def _breakdowns(data, sources, counts, unknown: str) -> tuple[list[dict], list[dict], list[dict]]:
    """DRFR per source × system × constraint type, per source × system × domain (category),
    and per source × system × principal domain of the Hard set (paper Figure 4).

    A domain is a property of the instruction, so its counts are the sums of the source's
    counts per (instruction, system) over the domain's instructions: the same integers as
    counting its items."""
    constraints, domains, hard_domains = [], [], []
    masks = data.question_mask[data.item_question]
    n_bits = len(CONSTRAINT_NAMES)
    hard = data.instruction_subset == SUBSET_CODES[Subset.HARD]
    for source in sources:
        items = _counted_items(data, source, unknown)
        yes, counted = drfr_by_bits(
            source.values[items],
            data.item_system[items],
            data.n_systems,
            masks[items],
            n_bits,
            unknown_as_no=_as_no(unknown),
        )
        for s, system in enumerate(data.systems):
            for b, constraint in enumerate(CONSTRAINT_NAMES):
                if counted[s, b]:
                    constraints.append(
                        _breakdown_row(
                            source, system, "constraint", constraint, yes[s, b], counted[s, b]
                        )
                    )
        per_instruction = counts[source.name]
        domains += _grouped_rows(
            data, source, data.domains, data.instruction_domain, per_instruction
        )
        hard_domains += _grouped_rows(
            data,
            source,
            data.principal_domains,
            data.instruction_principal[hard],
            tuple(c[hard] for c in per_instruction),
        )
    return constraints, domains, hard_domains


def _grouped_rows(data, source, names, instruction_group, per_instruction) -> list[dict]:
    """DRFR rows per (name, system), summing the (instruction, system) counts of each name's
    instructions (instruction_group: the name's index per instruction)."""
    yes, counted = (np.zeros((len(names), data.n_systems), dtype=np.int64) for _ in range(2))
    np.add.at(yes, instruction_group, per_instruction[0])
    np.add.at(counted, instruction_group, per_instruction[1])
    rows = []
    for d, name in enumerate(names):
        for s, system in enumerate(data.systems):
            if counted[d, s]:
                rows.append(
                    _breakdown_row(source, system, "domain", name, yes[d, s], counted[d, s])
                )
    return rows


def _breakdown_row(source, system, key, name, yes, counted) -> dict:
    return {
        "source": source.name,
        "system": system,
        key: name,
        "drfr": _number(yes / counted),
        "yes": int(yes),
        "questions": int(counted),
    }


# --- Pairwise kappa ------------------------------------------------------------------------------


def _distinct_keys(key: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """Return np.unique(key, return_inverse=True) for keys in 0..span-1, by counting when the
    span is small next to the keys (no sort of a million keys)."""
    if span > 4 * len(key) + (1 << 16):
        keys, inverse = np.unique(key, return_inverse=True)
        return keys, inverse.reshape(-1)
    present = np.bincount(key, minlength=span) > 0
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present), rank[key]


def _rater_counts(data, piece: _Piece, items, annotators, values, unknown: str):
    """Per (instruction, annotator) of one kind in a piece: pairwise categories from the yes
    and counted items per system, DRFR protocol; rows in (instruction, annotator) order."""
    n_annotators = len(data.annotator_names)
    n_instructions = piece.instructions.stop - piece.instructions.start
    first_key = (data.item_instruction[piece.items] - piece.instructions.start) * n_annotators
    keys, rater = _distinct_keys(first_key[items] + annotators, n_instructions * n_annotators)
    # Labels per rater, system and value (NO, YES, UNKNOWN), one count for all.
    cell = rater * data.n_systems
    cell += data.item_system[piece.items][items]
    cell *= 3
    cell += values
    counts = np.bincount(cell, minlength=len(keys) * data.n_systems * 3).reshape(
        len(keys), data.n_systems, 3
    )
    yes = np.ascontiguousarray(counts[:, :, YES])
    if unknown == "no":
        touched = counts.sum(axis=2) > 0
        per_question = data.questions_per_instruction[
            keys // n_annotators + piece.instructions.start
        ]
        counted = touched * per_question[:, None]
    elif unknown == "official":
        counted = counts.sum(axis=2)
    else:
        counted = yes + counts[:, :, NO]
    categories, defined = drfr_categories(yes, counted)
    return keys // n_annotators + piece.instructions.start, categories, defined


def _score_rater_counts(data, kind):
    """Per (instruction, annotator) of one kind: pairwise categories from direct scores."""
    selected = np.flatnonzero(data.annotator_kinds[data.score_annotator] == KIND_CODES[kind])
    instruction = data.score_instruction[selected]
    key = instruction * len(data.annotator_names) + data.score_annotator[selected]
    keys, rater = np.unique(key, return_inverse=True)
    scores = np.zeros((len(keys), data.n_systems), dtype=np.int64)
    scores[rater, data.score_system[selected]] = data.score_value[selected]
    categories, defined = score_categories(scores)
    return keys // len(data.annotator_names), categories, defined


@dataclass
class RatedItems:
    """Fleiss counts per (instruction, pair) item, before choosing a subset."""

    counts: np.ndarray  # (items, 3): how many raters said A better, tie, B better
    instruction: np.ndarray  # instruction index per item
    raters: np.ndarray  # raters with a defined category per item
    n: int  # raters per item used: the most common number, at least 2 (0: none)
    # Pairs of systems some rater ranked on some instruction: the group's items per instruction
    # (a pair of a system the group never labelled, a generated one, is no item of its study).
    pairs: int


def _rated_items(instruction, categories, defined) -> RatedItems:
    """Arrange the ratings of (instruction, annotator) rows as Fleiss counts per item.

    The raters of an instruction are its rows in annotator name order. n is the most common number
    of defined ratings per item; an item with more keeps its first n.
    """
    slot = np.arange(len(instruction)) - np.searchsorted(instruction, instruction, side="left")
    instructions = np.unique(instruction)
    n_pairs = categories.shape[1]
    which = np.searchsorted(instructions, instruction)
    grid = np.zeros((len(instructions), int(slot.max()) + 1, n_pairs), dtype=np.int8)
    valid = np.zeros(grid.shape, dtype=bool)
    grid[which, slot] = categories
    valid[which, slot] = defined
    raters = valid.sum(axis=1).ravel()
    candidates = raters[raters >= 2]
    n = int(np.bincount(candidates).argmax()) if len(candidates) else 0
    keep = valid & (np.cumsum(valid, axis=1) <= n)
    # Each kept rating's column: category 1, 0, -1 counts in column 0, 1, 2 (3: not kept).
    column = np.where(keep, 1 - grid, 3)
    item = np.arange(len(instructions) * n_pairs).reshape(len(instructions), 1, n_pairs)
    counts = np.bincount((item * 4 + column).reshape(-1), minlength=item.size * 4)
    return RatedItems(
        counts.reshape(-1, 4)[:, :3],
        np.repeat(instructions, n_pairs),
        raters,
        n,
        pairs=int(np.count_nonzero(defined.any(axis=0))),
    )


def _agreement(data, results: LabelResults, bootstrap: Bootstrap) -> list[dict]:
    rows = []
    for protocol in ("drfr", "ds"):
        for group in ("expert", "crowd"):
            if protocol == "drfr":
                if not results.raters[group]:
                    continue
                instruction, categories, defined = results.rater_rows(group)
            else:
                instruction, categories, defined = _score_rater_counts(data, group)
            if len(instruction) == 0:
                continue
            rated = _rated_items(instruction, categories, defined)
            for subset in SUBSETS:
                rows.append(_agreement_row(data, protocol, group, subset, rated, bootstrap))
    return rows


def _agreement_row(data, protocol, group, subset, rated: RatedItems, bootstrap) -> dict:
    """Kappa of a group in a subset. Dropped counts every item of the subset left out, those no
    annotator of the group rated included (an instruction it never labelled, a pair it left
    undefined there): items and dropped add up to the subset's instructions × the pairs of
    systems the group ranked anywhere (RatedItems.pairs)."""
    subset_instructions = _subset_instructions(data, subset)
    in_subset = subset_instructions[rated.instruction]
    kept = in_subset & (rated.raters >= rated.n) & (rated.n >= 2)
    dropped = int(subset_instructions.sum()) * rated.pairs - int(kept.sum())
    result = (
        fleiss_kappa(rated.counts[kept])
        if kept.any()
        else fleiss_kappa(np.zeros((0, 3), dtype=np.int64))
    )
    row = {
        "protocol": protocol,
        "group": group,
        "subset": subset,
        "fleiss_kappa": _number(result.kappa),
        "ci_low": None,
        "ci_high": None,
        "p_bar": _number(result.p_bar),
        "p_e": _number(result.p_e),
        "raw_agreement": _number(result.raw_agreement),
        "items": int(kept.sum()),
        "dropped": dropped,
        "annotators": rated.n,
        "undefined_reason": result.undefined_reason if kept.any() else _no_rated_item(rated.n),
    }
    if result.kappa is not None:
        bootstrap.kappa(row, rated.counts[kept], rated.instruction[kept])
    return row


def _no_rated_item(raters: int) -> str:
    """Say why a subset's kappa has no item, where Fleiss' kappa alone says "no items": kappa
    reads items with the same number of ratings, the most common one (`raters`, 0 when no item
    has two)."""
    if raters < 2:
        return "no item has ratings from two annotators or more"
    return f"no item of this subset has ratings from {raters} annotators, the number kappa reads"


# --- Sources against the expert majority (Table 4) ---------------------------------------------


def _source_rows(data, sources, counts, costs, unknown: str, acc_unknown: str) -> list[dict]:
    majority = next((s for s in sources if s.name == EXPERT_MAJORITY), None)
    golds = _golds(data, sources, majority)
    categories = {name: drfr_categories(*c) for name, c in counts.items()}
    for gold in golds.values():
        if gold.name not in categories:
            categories[gold.name] = drfr_categories(
                *_instruction_system_counts(data, gold, unknown)
            )
    item_subset = data.instruction_subset[data.item_instruction]
    # Items by (source label, gold label) per subset code, one count per source.
    pairs = {
        s.name: label_pairs(s.values, golds[s.name].values, item_subset, len(SUBSET_CODES))
        for s in sources
        if s.name in golds
    }
    rows = []
    for subset in SUBSETS:
        instructions = _subset_instructions(data, subset)
        for source in sources:
            gold = golds.get(source.name)
            row = {
                "source": source.name,
                "source_kind": source.kind,
                "subset": subset,
                "gold": OTHER_EXPERTS if _is_one_expert(source) else EXPERT_MAJORITY,
            }
            if gold is not None:
                subset_pairs = _in_subset(pairs[source.name], subset)
                row.update(
                    _against_gold(source, gold, categories, subset_pairs, instructions, acc_unknown)
                )
            else:
                row.update(_NOTHING_AGAINST_GOLD)
            cost = costs[subset].get(source.name)
            row["cost_usd"] = cost.cost_usd if cost else None
            row["possibly_billed_usd"] = cost.possibly_billed_usd if cost else None
            row["time_min"] = cost.time_min if cost else None
            rows.append(row)
    return rows


def _is_one_expert(source: Source) -> bool:
    return source.kind == "expert" and source.name != EXPERT_MAJORITY


def _golds(data, sources, majority: Source | None) -> dict[str, Source]:
    """Return {source name: the labels it is judged against}: the expert majority, except for
    one expert, who is judged against the majority of the other experts (docs/reports.md):
    a majority that holds their own vote would count them right on every item they decided."""
    if majority is None:
        return {}
    experts = [s for s in sources if _is_one_expert(s)]
    golds = {s.name: majority for s in sources}
    if not experts:
        return golds
    yes = np.zeros(data.n_items, dtype=np.int32)
    no = np.zeros(data.n_items, dtype=np.int32)
    labelled = np.zeros(data.n_items, dtype=np.int32)
    for expert in experts:
        yes += expert.values == YES
        no += expert.values == NO
        labelled += expert.values != MISSING
    for expert in experts:
        votes = majority_from_votes(yes - (expert.values == YES), no - (expert.values == NO))
        by_others = (labelled - (expert.values != MISSING)) > 0
        gold = _empty_source(data, f"{OTHER_EXPERTS}:{expert.name}", "expert")
        gold.values[:] = np.where(by_others, votes.values, MISSING)
        gold.touched[data.item_response[by_others]] = True
        golds[expert.name] = gold
    return golds


def _in_subset(per_subset_code: np.ndarray, subset: str) -> np.ndarray:
    """Return the entry of a subset from values per subset code (overall: their sum)."""
    if subset == "overall":
        return per_subset_code.sum(axis=0)
    return per_subset_code[SUBSET_CODES[subset]]


# Why ACC (acc_na) or PLD and WPLD (pld_na) are null in a row of Table 4, one code per cell
# (report_formats.SOURCES_NA_REASONS says each in words): the gold has no YES or NO label in the
# set; the source answered none of the questions the gold has one for; the source, or its
# gold, labelled fewer than two systems on every instruction of the set (so ranks no pair of
# systems); both rank pairs, never the same one on the same instruction.
NO_GOLD_LABEL = "no_gold_label"
NO_COMMON_QUESTION = "no_common_question"
SOURCE_ONE_SYSTEM = "source_one_system"
GOLD_ONE_SYSTEM = "gold_one_system"
NO_COMMON_PAIR = "no_common_pair"

_NOTHING_AGAINST_GOLD = {
    "acc": None,
    "compared": 0,
    "pld0": None,
    "pld1": None,
    "pld2": None,
    "wpld": None,
    "pairs": 0,
    "acc_na": NO_GOLD_LABEL,
    "pld_na": NO_GOLD_LABEL,
}


def _against_gold(source, gold, categories, pairs, instructions, acc_unknown: str) -> dict:
    """ACC of the source's items against gold (their label pairs: `pairs`), PLD of its
    pairwise categories on `instructions`, and why each is null where one is."""
    acc = accuracy_from_pairs(pairs, unknown_is_wrong=acc_unknown == "wrong")
    source_categories, source_defined = categories[source.name]
    gold_categories, gold_defined = categories[gold.name]
    source_ranks = source_defined[instructions]
    gold_ranks = gold_defined[instructions]
    distance = pld(
        source_categories[instructions], gold_categories[instructions], source_ranks & gold_ranks
    )
    # Items whose gold label is NO or YES, whatever the source's (label_pairs' columns: code + 1).
    gold_labelled = bool(pairs[:, NO + 1].sum() + pairs[:, YES + 1].sum())
    return {
        "acc": _number(acc.acc),
        "compared": acc.compared,
        "pld0": _number(distance.pld0),
        "pld1": _number(distance.pld1),
        "pld2": _number(distance.pld2),
        "wpld": _number(distance.wpld),
        "pairs": distance.items,
        "acc_na": None if acc.compared else _why_no_acc(gold_labelled),
        "pld_na": None if distance.items else _why_no_pld(gold_labelled, source_ranks, gold_ranks),
    }


def _why_no_acc(gold_labelled: bool) -> str:
    return NO_COMMON_QUESTION if gold_labelled else NO_GOLD_LABEL


def _why_no_pld(gold_labelled: bool, source_ranks: np.ndarray, gold_ranks: np.ndarray) -> str:
    """Why no (instruction, pair) is ranked by both the source and its gold (`*_ranks`: the
    pairs each ranks), the gold's lack said first: without it the source's matters not."""
    if not gold_ranks.any():
        return GOLD_ONE_SYSTEM if gold_labelled else NO_GOLD_LABEL
    if not source_ranks.any():
        return SOURCE_ONE_SYSTEM
    return NO_COMMON_PAIR


# --- Figures' data: disagreement, display positions, votes ---------------------------------------


def _disagreement_levels(data, piece: _Piece, yes: np.ndarray, no: np.ndarray) -> np.ndarray:
    """Count the piece's questions at each disagreement level, of those where some system's
    output has two YES/NO votes (votes per item of the piece: `yes`, `no`; an item is one
    system's output for one question, responses being unique per instruction and system)."""
    question = data.item_question[piece.items]
    first = int(question.min())
    levels = judged_levels(yes, no, question - first, int(question.max()) - first + 1)
    return level_distribution(levels, data.n_systems)


def _disagreement(results: LabelResults) -> list[dict]:
    """Rows of levels 0 up to the highest a question of the group can reach: a level counting
    systems the group did not label twice would always be 0, as if none disagreed there."""
    rows = []
    for group in ("expert", "crowd"):
        distribution = results.levels[group]
        if not distribution.any():
            continue
        rows += [
            {"group": group, "level": level, "questions": int(count)}
            for level, count in enumerate(distribution[: results.reachable[group] + 1])
        ]
    return rows


def _positions(data, unknown: str) -> list[dict]:
    rows = []
    shown = data.shown_position >= 0
    for kind in ("expert", "crowd"):
        selected = shown & (data.annotator_kinds[data.shown_annotator] == KIND_CODES[kind])
        if not selected.any():
            continue
        positions = data.shown_position[selected].astype(np.int64)
        n_positions = int(positions.max()) + 1
        yes, counted = drfr_counts(
            data.shown_value[selected], positions, n_positions, unknown_as_no=_as_no(unknown)
        )
        for p in range(n_positions):
            if counted[p]:
                rows.append(
                    {
                        "kind": kind,
                        "position": chr(ord("A") + p),
                        "drfr": _number(yes[p] / counted[p]),
                        "yes": int(yes[p]),
                        "questions": int(counted[p]),
                    }
                )
    return rows


def _votes(sources) -> list[dict]:
    return [
        {
            "source": s.name,
            "items": s.voted_items,
            "ties": s.ties,
            "no_votes": s.no_votes,
        }
        for s in sources
        if s.name in (EXPERT_MAJORITY, CROWD_MAJORITY)
    ]


# --- The benchmark itself (Tables 2 and 6) -------------------------------------------------------

# Paper Table 6's column order.
TABLE6_TYPES = (
    ConstraintType.CONTENT,
    ConstraintType.FORMAT,
    ConstraintType.NUMBER,
    ConstraintType.STYLE,
    ConstraintType.LINGUISTIC,
)


def _dataset(data: BenchmarkArrays) -> list[dict]:
    """Paper Table 2 per subset: #Inst., Len. (mean words), #Req., #R/I, #Dom. (categories)."""
    rows = []
    for subset in SUBSETS:
        instructions = _subset_instructions(data, subset)
        n = int(instructions.sum())
        questions = int(data.questions_per_instruction[instructions].sum())
        named = {data.domains[d] for d in np.unique(data.instruction_domain[instructions])}
        rows.append(
            {
                "subset": subset,
                "instructions": n,
                "length": _number(data.instruction_words[instructions].mean()) if n else None,
                "questions": questions,
                "questions_per_instruction": questions / n if n else None,
                "domains": len(named - {"(none)"}),
            }
        )
    return rows


def _constraint_types(data: BenchmarkArrays) -> list[dict]:
    """Paper Table 6 per subset: questions per constraint type (a question counts under each of
    its types) and #Labels, their sum."""
    rows = []
    for subset in SUBSETS:
        masks = data.question_mask[_subset_instructions(data, subset)[data.question_instruction]]
        row: dict = {"subset": subset}
        for kind in TABLE6_TYPES:
            row[kind.label.lower()] = int(np.count_nonzero(masks & kind.value))
        row["labels"] = sum(row[kind.label.lower()] for kind in TABLE6_TYPES)
        rows.append(row)
    return rows


# --- The report ----------------------------------------------------------------------------------


def _check_conventions(unknown: str, acc_unknown: str) -> None:
    if unknown not in UNKNOWN_MODES:
        raise ReportError(f"unknown must be one of {', '.join(UNKNOWN_MODES)}, not {unknown!r}.")
    if acc_unknown not in ACC_MODES:
        raise ReportError(
            f"acc_unknown must be one of {', '.join(ACC_MODES)}, not {acc_unknown!r}."
        )


def report_build(*, scope: IdentityScope, **options) -> dict:
    """Compute the report (report_compute, given `options`: benchmark, unknown, acc_unknown,
    n_resamples, seed, inputs, piece_items) and name its annotators as `scope` lets its reader
    see them (report_named): OPERATOR (every name, platform worker ids too) for whoever runs
    manage.py, identity_scope(user=...) for anyone else. Required, with no default: a caller
    that forgot it would have shown every worker id."""
    return report_named(report_compute(**options), scope=scope)


# source_costs_and_kinds: each source's costs, and the kind each annotator was costed by.
CostsRead = tuple[dict[str, dict[str, SourceCost]], dict[int, str | None]]


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report is computed from, read as of one moment (report_inputs)."""

    data: BenchmarkArrays
    costs: CostsRead | None  # None: read without the costs (no sources table wanted)
    # {source key: note} of each judge whose labels mix an unfinished replacing run with the
    # run it replaced (judge_label_runs): its figures are provisional.
    mixed: dict[str, str] = field(default_factory=dict)


def report_inputs(
    *,
    benchmark: Benchmark,
    with_costs: bool = True,
    meanwhile: Callable[[np.ndarray, Callable[[], bool]], None] | None = None,
) -> ReportInputs:
    """Read the benchmark's labels and (`with_costs`) its sources' costs in one snapshot
    (read_snapshot): a verdict between the two reads would count a worker's labels but not
    their pay, or the reverse. `meanwhile`: benchmark_arrays's.

    On PostgreSQL the costs (database reads only) are read on a second connection in the same
    snapshot while the labels are read; the snapshot ends once both are in, before any table
    is computed."""
    with read_snapshot():
        costs = (
            read_meanwhile(lambda: source_costs_and_kinds(benchmark=benchmark), "report-costs")
            if with_costs
            else None
        )
        data = benchmark_arrays(benchmark=benchmark, meanwhile=meanwhile)
        return ReportInputs(
            data=data,
            costs=costs.result() if costs is not None else None,
            mixed=judges_mixed(benchmark_id=benchmark.pk),
        )


def judges_mixed(*, benchmark_id: int) -> dict[str, str]:
    """{source key: note} of each judge whose labels on the benchmark come from an unfinished
    run that replaced another run's labels and from that run (JudgeLabelRuns.mixed)."""
    return {
        annotator_source(pk): runs.note()
        for pk, runs in judge_label_runs(benchmark_id=benchmark_id).items()
        if runs.mixed
    }


def report_compute(
    *,
    benchmark: Benchmark,
    unknown: str = DEFAULT_UNKNOWN,
    acc_unknown: str = DEFAULT_ACC,
    n_resamples: int | None = None,
    seed: int | None = None,
    inputs: ReportInputs | None = None,
    piece_items: int = PIECE_ITEMS,
    tables: Collection[str] | None = None,
) -> dict:
    """Compute every table of the report for one benchmark (schema: docs/reports.md), the same
    for every viewer: an annotator's source is `annotator:<id>` (annotator_source) until
    report_named names it for one.

    `unknown` names how DRFRs count UNKNOWN and unasked questions, `acc_unknown` how ACC treats a
    source's UNKNOWN (evaluation.conventions). `inputs` is what report_inputs read when the
    caller has read it already (an export). The labels are worked through in pieces of
    instructions of about `piece_items` items (LabelResults); the report is the same for any
    piece size. `tables` (names of REPORT_TABLES) computes only those tables (a figure draws
    one), each as the whole report has it; the report's other keys are there as always.
    """
    _check_conventions(unknown, acc_unknown)
    wanted = _tables_wanted(tables)
    n_resamples = settings.REPORT_BOOTSTRAP_RESAMPLES if n_resamples is None else n_resamples
    seed = settings.REPORT_BOOTSTRAP_SEED if seed is None else seed
    weights = WeightStream(np.random.default_rng(seed), n_resamples)
    if inputs is None:
        inputs = report_inputs(
            benchmark=benchmark,
            with_costs="sources" in wanted,
            meanwhile=(
                (lambda subset, labels_read: _draw_ahead(weights, subset, labels_read))
                if "leaderboard" in wanted
                else None
            ),
        )
    data = inputs.data
    parts = _ReportParts(
        benchmark=benchmark,
        data=data,
        unknown=unknown,
        acc_unknown=acc_unknown,
        piece_items=piece_items,
        bootstrap=Bootstrap(data.n_instructions, weights),
        costs=inputs.costs,
    )
    computed = {name: build(parts) for name, build in _TABLE_BUILDERS.items() if name in wanted}
    parts.bootstrap.resolve()
    _mark_provisional(computed, inputs.mixed)
    return {
        "benchmark": benchmark.name,
        "unknown": unknown,
        "unknown_convention": UNKNOWN_CONVENTIONS[unknown],
        "acc_unknown": acc_unknown,
        "generated_at": timezone.now().isoformat(),
        "seed": seed,
        "n_resamples": n_resamples,
        "systems": data.systems,
        "subsets": {s: int(_subset_instructions(data, s).sum()) for s in SUBSETS},
        **{name: computed[name] for name in REPORT_TABLES if name in computed},
        "provisional": [
            {"source": source, "note": note} for source, note in sorted(inputs.mixed.items())
        ],
    }


# The tables whose rows say whether their source's figures are provisional (a judge's labels
# mixing an unfinished replacing run with the run it replaced: judges_mixed).
PROVISIONAL_TABLES = ("leaderboard", "sources")


def _mark_provisional(computed: dict[str, list[dict]], mixed: dict[str, str]) -> None:
    for table in PROVISIONAL_TABLES:
        for row in computed.get(table, []):
            row["provisional"] = row["source"] in mixed


def _tables_wanted(tables: Collection[str] | None) -> set[str]:
    if tables is None:
        return set(REPORT_TABLES)
    unknown = set(tables) - set(REPORT_TABLES)
    if unknown:
        raise ValueError(f"unknown report tables {sorted(unknown)}: expected {REPORT_TABLES}")
    # The agreement's intervals resample after the leaderboard's (WeightStream: a set's weights
    # follow the sets drawn before it), so they are the whole report's only after them.
    return set(tables) | ({"leaderboard"} if "agreement" in tables else set())


@dataclass
class _ReportParts:
    """What the report's tables are computed from: label results, counts per (instruction,
    system) and the breakdowns, each computed once, when a table first needs it."""

    benchmark: Benchmark
    data: BenchmarkArrays
    unknown: str
    acc_unknown: str
    piece_items: int
    bootstrap: Bootstrap
    costs: CostsRead | None = None  # read with the labels (report_inputs)

    @cached_property
    def results(self) -> LabelResults:
        return _label_results(self.data, self.unknown, self.piece_items)

    @property
    def sources(self) -> list[Source]:
        return self.results.sources

    @cached_property
    def counts(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return {
            s.name: _instruction_system_counts(self.data, s, self.unknown) for s in self.sources
        }

    @cached_property
    def breakdowns(self) -> tuple[list[dict], list[dict], list[dict]]:
        return _breakdowns(self.data, self.sources, self.counts, self.unknown)

    def source_rows(self) -> list[dict]:
        return _source_rows(
            self.data, self.sources, self.counts, self._costs(), self.unknown, self.acc_unknown
        )

    def _costs(self) -> dict[str, dict[str, SourceCost]]:
        """The sources' costs by the kinds the labels were read with (data.kinds_read): the
        costs read beside the labels when they went by the same kinds, else read again by
        those (a kind changed between the two reads, which one snapshot rules out but a
        caller's transaction, read_snapshot, does not: a worker's labels in the crowd majority
        and their paid work in nobody's cost, or an expert's hours)."""
        read = self.data.kinds_read
        if self.costs is not None:
            costs, used = self.costs
            if all(used[pk] == read[pk] for pk in used.keys() & read.keys()):
                return costs
        return source_costs(benchmark=self.benchmark, kinds=read)


# Each table of the report from its parts, computed in this order: the leaderboard's and then
# the agreement's intervals are registered with the bootstrap first (_tables_wanted).
_TABLE_BUILDERS: dict[str, Callable[[_ReportParts], list[dict]]] = {
    "leaderboard": lambda p: _leaderboard(p.data, p.sources, p.counts, p.bootstrap),
    "agreement": lambda p: _agreement(p.data, p.results, p.bootstrap),
    "dataset": lambda p: _dataset(p.data),
    "constraint_types": lambda p: _constraint_types(p.data),
    "sources": _ReportParts.source_rows,
    "constraints": lambda p: p.breakdowns[0],
    "domains": lambda p: p.breakdowns[1],
    "hard_domains": lambda p: p.breakdowns[2],
    "disagreement": lambda p: _disagreement(p.results),
    "positions": lambda p: _positions(p.data, p.unknown),
    "votes": lambda p: _votes(p.sources),
}
# The report's tables in the order of the report (and of its JSON).
REPORT_TABLES = (
    "dataset",
    "constraint_types",
    "leaderboard",
    "agreement",
    "sources",
    "constraints",
    "domains",
    "hard_domains",
    "disagreement",
    "positions",
    "votes",
)


def report_named(report: dict, *, scope: IdentityScope) -> dict:
    """Return a copy of a computed report with each annotator's source named for one reader.

    A platform worker, whatever kind they were given, is named as `scope` allows
    (annotate.selectors.identities); other experts and judges by name. The `source` column of
    every table is named, of a table added later too; the numbers are left as they are.
    """
    sources = {
        str(row["source"])
        for rows in report.values()
        if isinstance(rows, list)
        for row in rows
        if isinstance(row, dict) and "source" in row
    }
    keys = {source for source in sources if source.startswith(ANNOTATOR_SOURCE)}
    shown = (
        annotator_names_shown(
            annotator_ids=[int(key.removeprefix(ANNOTATOR_SOURCE)) for key in keys], scope=scope
        )
        if keys
        else {}
    )
    names = _names_apart(
        {annotator_source(pk): name for pk, name in shown.items()}, taken=sources - keys
    )
    return {
        key: [_named_row(row, names) for row in value] if isinstance(value, list) else value
        for key, value in report.items()
    }


def _names_apart(names: dict[str, str], *, taken: set[str]) -> dict[str, str]:
    """Return {source key: name} with no name shared by two sources: a pseudonym
    (`crowd-worker-<id>`) may be another annotator's real name, and an annotator may be called
    as a majority is. Those get their key after the name, so no table, download or figure keyed
    by name puts one source's numbers for another's."""
    counts = Counter(names.values())
    return {
        key: f"{name} ({key})" if counts[name] > 1 or name in taken else name
        for key, name in names.items()
    }


def _named_row(row: object, names: dict[str, str]) -> object:
    if not isinstance(row, dict):
        return row
    if "source" not in row:
        return dict(row)
    # An annotator deleted since the report was computed keeps its key: it names no one.
    return {**row, "source": names.get(row["source"], row["source"])}


def labels_aggregated_csv(
    *, benchmark: Benchmark, output: IO[str], data: BenchmarkArrays | None = None
) -> int:
    """Write the expert and crowd majority labels as the long label CSV; return the row count.

    Columns are those of the label import (instruction_id, system, annotator, question_index,
    label) with the source name as the annotator, so the file can be imported back as labels.
    Items with no majority are written as UNKNOWN, items the group never labelled are left out.
    """
    data = benchmark_arrays(benchmark=benchmark) if data is None else data
    writer = csv_writer(output)
    writer.writerow(["instruction_id", "system", "annotator", "question_index", "label"])
    rows = 0
    names = {NO: "NO", YES: "YES", UNKNOWN: "UNKNOWN"}
    # Rows in the order of the responses' ids, then of the questions, as items once were laid out.
    by_response = np.argsort(data.item_response, kind="stable")
    for source in _label_results(data, DEFAULT_UNKNOWN).sources:
        if source.name not in (EXPERT_MAJORITY, CROWD_MAJORITY):
            continue
        for item in by_response[source.values[by_response] != MISSING]:
            writer.writerow(
                [
                    data.instruction_external_ids[data.item_instruction[item]],
                    data.systems[data.item_system[item]],
                    source.name,
                    int(data.question_position[data.item_question[item]]),
                    names[int(source.values[item])],
                ]
            )
            rows += 1
    return rows


def _fingerprint(benchmark: Benchmark) -> str:
    """Summarise what a report depends on, so a cached report is used only while it still holds."""
    # A row corrected in the admin is stamped (changed_at): every stamp is counted and summed
    # (stamps_sum), so each correction moves the key however many cancel out in the sums of
    # values, even one stamped earlier than the latest by a host whose clock is behind. The
    # sums (each value weighted by its row's id, the rows' questions and responses) still name
    # a new report for a change made outside the admin, as an added row does.
    labels = Label.objects.filter(response__instruction__benchmark=benchmark).aggregate(
        n=Count("id"),
        last=Max("id"),
        changed=Count("changed_at"),
        stamps=stamps_sum("changed_at"),
        total=Sum("value"),
        weighted=Sum(F("id") * F("value")),
        questions=Sum("question_id"),
        responses=Sum("response_id"),
    )
    scores = DirectScore.objects.filter(response__instruction__benchmark=benchmark).aggregate(
        n=Count("id"),
        last=Max("id"),
        changed=Count("changed_at"),
        stamps=stamps_sum("changed_at"),
        total=Sum("score"),
        weighted=Sum(F("id") * F("score")),
        responses=Sum("response_id"),
    )
    # Approvals and bonuses paid move the crowd cost (Table 4), without changing what counts,
    # and so does what the platform paid of work that counts nowhere (a sync confirming late
    # work, or work rejected here only): the paid set is hashed too (crowd_paid_work_q).
    paid_bonus = Q(bonuses__status=BonusStatus.PAID)
    assignments = Assignment.objects.filter(task__instruction__benchmark=benchmark)
    work = assignments.aggregate(
        n=Count("id", distinct=True),
        last=Max("submitted_at"),
        approved=Count("id", distinct=True, filter=Q(status=AssignmentStatus.APPROVED)),
        paid_bonuses=Count("bonuses", filter=paid_bonus),
        paid_bonus_total=Sum("bonuses__amount_usd", filter=paid_bonus),
    )
    paid = ids_fingerprint(assignments.filter(pk__in=assignments.filter(crowd_paid_work_q())))
    calls = JudgeCall.objects.filter(conversation__run__benchmark=benchmark).aggregate(
        n=Count("id")
    )
    # A run stopped, failed or resumed with no new answer changes whether its judge's figures
    # are provisional (judges_mixed) and nothing counted above.
    runs = list(
        JudgeRun.objects.filter(benchmark=benchmark)
        .order_by("pk")
        .values_list("pk", "status", "engine_run__status")
    )
    counted = counted_work_fingerprint(benchmark=benchmark)
    kinds = kinds_fingerprint(benchmark_id=benchmark.pk)
    layout = layout_fingerprint(benchmark.pk)
    return repr((labels, scores, work, paid, calls, runs, counted, kinds, layout, benchmark.name))


def _report_key(benchmark: Benchmark, unknown: str, acc_unknown: str) -> str:
    """The cache key of the benchmark's report with these conventions, the data as it stands."""
    digest = hashlib.sha256(_fingerprint(benchmark).encode()).hexdigest()[:24]
    # "v2": annotators by id; a report cached before that named them, for every reader.
    # "v6": a flat fee rounded to cents on each payment (a crowd cost cached before differs).
    # computation_version moves the key with every deploy changing the code and every change of
    # a setting the numbers read (the expert's rate, the bootstrap, the flat crowd fee).
    return f"report:v6:{computation_version()}:{benchmark.pk}:{unknown}:{acc_unknown}:{digest}"


def report_cached(
    *,
    benchmark: Benchmark,
    scope: IdentityScope,
    unknown: str = DEFAULT_UNKNOWN,
    acc_unknown: str = DEFAULT_ACC,
    tables: Collection[str] | None = None,
) -> dict:
    """Return the benchmark's report named for a reader with `scope`, computed from the cache
    while the data behind it is unchanged.

    The cache holds the computed report, the same for every reader (annotators by id); names
    are put in after (report_named), so one cached report serves readers who may see a crowd
    worker's id and readers who may not. With `tables` (a figure's), the whole report when it
    is cached or being built, else only those tables (report_compute), cached on their own.
    """
    _check_conventions(unknown, acc_unknown)

    def read_key() -> str:
        return _report_key(benchmark, unknown, acc_unknown)

    key = read_key()
    options = {"benchmark": benchmark, "unknown": unknown, "acc_unknown": acc_unknown}
    report = None
    if tables is not None and not cache.get(f"{key}:building"):
        report = cache.get(key)
        if report is None:
            wanted = sorted(_tables_wanted(tables))
            suffix = f":tables:{','.join(wanted)}"
            report = cache_get_or_build(
                key=key + suffix,
                read_key=lambda: read_key() + suffix,
                build=lambda: report_compute(**options, tables=wanted),
                timeout=600,
            )
    if report is None:
        report = cache_get_or_build(
            key=key, read_key=read_key, build=lambda: report_compute(**options), timeout=600
        )
    return report_named(report, scope=scope)


def benchmark_for_report(*, benchmark_name: str) -> Benchmark:
    """Return the benchmark of that name, or raise ReportError naming it."""
    benchmark = Benchmark.objects.filter(name=benchmark_name).first()
    if benchmark is None:
        known = names_there_are(Benchmark.objects.all(), what="benchmarks")
        raise ReportError(f"No benchmark named {benchmark_name!r} ({known}).")
    return benchmark
