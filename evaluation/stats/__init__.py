"""Statistics of the evaluation: pure functions on plain sequences and numpy arrays.

Majority votes, DRFR with its cluster-bootstrap CI, pairwise system comparison, Fleiss' kappa,
accuracy and pairwise label distance against gold, and disagreement levels. Each function
states its formula and edge-case convention in its docstring and takes randomness as an `rng`
argument.

Dependency rule: this package imports numpy and the standard library only; never Django, DRF,
Celery, `annotate` or any other `evaluation` module (an import-linter contract in
pyproject.toml enforces it). The database and report layers call in, never the reverse.
"""

from evaluation.stats.agreement import (
    AccuracyResult,
    PldResult,
    accuracy,
    accuracy_from_pairs,
    label_pairs,
    pld,
)
from evaluation.stats.bootstrap import cluster_weights, ratio_ci
from evaluation.stats.codes import MISSING, NO, UNKNOWN, YES
from evaluation.stats.disagreement import (
    disagreement_levels,
    judged_levels,
    level_distribution,
    reachable_level,
)
from evaluation.stats.drfr import drfr_by_bits, drfr_counts, ratio
from evaluation.stats.kappa import (
    KappaResult,
    fleiss_kappa,
    kappa_ci,
    kappa_from_ratings,
    ratings_to_counts,
)
from evaluation.stats.pairwise import drfr_categories, score_categories, system_pairs
from evaluation.stats.votes import VoteResult, majority_from_votes, majority_vote

__all__ = [
    "MISSING",
    "NO",
    "UNKNOWN",
    "YES",
    "AccuracyResult",
    "KappaResult",
    "PldResult",
    "VoteResult",
    "accuracy",
    "accuracy_from_pairs",
    "cluster_weights",
    "disagreement_levels",
    "drfr_by_bits",
    "drfr_categories",
    "drfr_counts",
    "fleiss_kappa",
    "judged_levels",
    "label_pairs",
    "kappa_ci",
    "kappa_from_ratings",
    "level_distribution",
    "majority_from_votes",
    "majority_vote",
    "pld",
    "ratings_to_counts",
    "reachable_level",
    "ratio",
    "ratio_ci",
    "score_categories",
    "system_pairs",
]
