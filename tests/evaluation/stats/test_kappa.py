import numpy as np
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from evaluation.stats import fleiss_kappa, kappa_ci, kappa_from_ratings, ratings_to_counts
from evaluation.stats.bootstrap import cluster_weights
from evaluation.stats.kappa import kappa_resamples

# Fleiss, J. L. (1971). "Measuring nominal scale agreement among many raters."
# Psychological Bulletin 76(5), 378-382, Table 1: 30 patients, 6 psychiatrists each, 5 diagnoses
# (depression, personality disorder, schizophrenia, neurosis, other). Published: P̄ = .556,
# P_e = .220, κ = .430.
FLEISS_1971 = np.array(
    [
        [0, 0, 0, 6, 0],
        [0, 3, 0, 0, 3],
        [0, 1, 4, 0, 1],
        [0, 0, 0, 0, 6],
        [0, 3, 0, 3, 0],
        [2, 0, 4, 0, 0],
        [0, 0, 4, 0, 2],
        [2, 0, 3, 1, 0],
        [2, 0, 0, 4, 0],
        [0, 0, 0, 0, 6],
        [1, 0, 0, 5, 0],
        [1, 1, 0, 4, 0],
        [0, 3, 3, 0, 0],
        [1, 0, 0, 5, 0],
        [0, 2, 0, 3, 1],
        [0, 0, 5, 0, 1],
        [3, 0, 0, 1, 2],
        [5, 1, 0, 0, 0],
        [0, 2, 0, 4, 0],
        [1, 0, 2, 0, 3],
        [0, 0, 0, 0, 6],
        [0, 1, 0, 5, 0],
        [0, 2, 0, 1, 3],
        [2, 0, 0, 4, 0],
        [1, 0, 0, 4, 1],
        [0, 5, 0, 1, 0],
        [4, 0, 0, 0, 2],
        [0, 2, 0, 4, 0],
        [1, 0, 5, 0, 0],
        [0, 0, 0, 0, 6],
    ]
)

# Wikipedia, "Fleiss' kappa", worked example: 10 subjects, 14 raters, 5 categories.
# Published: P̄ = 0.378, P_e = 0.213, κ = 0.210.
WIKIPEDIA = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)


def test_fleiss_1971_psychiatric_diagnoses():
    result = fleiss_kappa(FLEISS_1971)
    assert round(result.kappa, 4) == 0.4302
    assert round(result.p_bar, 3) == 0.556
    assert round(result.p_e, 3) == 0.220
    assert (result.items, result.raters, result.dropped) == (30, 6, 0)
    # Patients 4, 10, 21 and 30 got "other" from all six.
    assert result.raw_agreement == pytest.approx(5 / 30)


def test_wikipedia_example():
    result = fleiss_kappa(WIKIPEDIA)
    assert round(result.kappa, 3) == 0.210
    assert result.kappa == pytest.approx(0.2099, abs=5e-5)
    assert round(result.p_bar, 3) == 0.378
    assert round(result.p_e, 3) == 0.213
    assert (result.items, result.raters) == (10, 14)


def test_hand_computed_small_table():
    # P_i = 1, 1, 0 -> P̄ = 2/3; p = (1/2, 1/2) -> P_e = 1/2; κ = (2/3 - 1/2) / (1/2) = 1/3.
    result = fleiss_kappa(np.array([[2, 0], [0, 2], [1, 1]]))
    assert result.kappa == pytest.approx(1 / 3)
    assert result.p_bar == pytest.approx(2 / 3)
    assert result.p_e == pytest.approx(1 / 2)
    assert result.raw_agreement == pytest.approx(2 / 3)
    assert result.undefined_reason == ""


def test_matches_statsmodels_on_random_tables():
    rng = np.random.default_rng(20240107)
    for _ in range(20):
        n_items = int(rng.integers(5, 60))
        n_categories = int(rng.integers(2, 7))
        n_raters = int(rng.integers(2, 11))
        shares = rng.dirichlet(np.full(n_categories, 2.0))
        counts = rng.multinomial(n_raters, shares, size=n_items)
        ours = fleiss_kappa(counts)
        assert ours.kappa is not None
        assert abs(ours.kappa - statsmodels_fleiss_kappa(counts, method="fleiss")) < 1e-12


def test_every_rating_in_one_category_leaves_kappa_undefined():
    result = fleiss_kappa(np.array([[3, 0, 0], [3, 0, 0]]))
    assert result.kappa is None
    assert result.p_e == pytest.approx(1.0)
    assert result.p_bar == pytest.approx(1.0)
    assert result.raw_agreement == 1.0
    assert "P_e = 1" in result.undefined_reason


def test_no_items():
    result = fleiss_kappa(np.zeros((0, 3), dtype=int))
    assert result.kappa is None and result.p_bar is None and result.items == 0
    assert result.undefined_reason == "no items"


def test_a_row_with_another_rater_count_is_refused():
    with pytest.raises(ValueError, match="row 0 has 3, row 2 has 4"):
        fleiss_kappa(np.array([[2, 1], [0, 3], [2, 2]]))


def test_a_single_rater_is_refused():
    with pytest.raises(ValueError, match="at least 2 ratings"):
        fleiss_kappa(np.array([[1, 0], [0, 1]]))


RATINGS = np.array([[1, 1, 0], [-1, 0, 0], [1, 1, 1], [0, 1, -1]])
VALID = np.array([[1, 1, 1], [1, 0, 1], [1, 1, 1], [1, 1, 1]], dtype=bool)


def test_ratings_to_counts_drops_items_with_an_invalid_rating():
    counts, kept = ratings_to_counts(RATINGS, VALID, (-1, 0, 1))
    assert kept.tolist() == [True, False, True, True]
    assert counts.tolist() == [[0, 1, 2], [0, 0, 3], [1, 1, 1]]


def test_kappa_from_ratings_reports_dropped_items():
    # Kept items: P_i = 1/3, 1, 0 -> P̄ = 4/9; p = (1, 2, 6)/9 -> P_e = 41/81;
    # κ = (36/81 - 41/81) / (40/81) = -1/8.
    result = kappa_from_ratings(RATINGS, VALID, (-1, 0, 1))
    assert result.kappa == pytest.approx(-0.125)
    assert (result.items, result.raters, result.dropped) == (3, 3, 1)


def test_kappa_from_ratings_with_every_item_dropped():
    result = kappa_from_ratings(RATINGS, np.zeros_like(VALID), (-1, 0, 1))
    assert result.kappa is None
    assert (result.items, result.raters, result.dropped) == (0, 3, 4)
    assert result.undefined_reason == "no items"


def test_a_valid_rating_outside_the_categories_is_refused():
    with pytest.raises(ValueError, match="item 3"):
        ratings_to_counts(RATINGS, VALID, (0, 1))


def _slow_kappa_ci(counts, clusters, weights, level):
    """Resample items explicitly, cluster by cluster, and run fleiss_kappa on each resample."""
    kappas = []
    for row in weights:
        picked = np.concatenate(
            [np.flatnonzero(clusters == c) for c, times in enumerate(row) for _ in range(times)]
        )
        kappa = fleiss_kappa(counts[picked]).kappa
        kappas.append(np.nan if kappa is None else kappa)
    kappas = np.array(kappas)
    defined = kappas[~np.isnan(kappas)]
    alpha = (1 - level) / 2
    return kappas, tuple(np.quantile(defined, [alpha, 1 - alpha]))


def _clustered_table():
    # Clusters 0 and 1 hold only unanimous YES/YES items, so a resample drawing only them has
    # P_e = 1 and is skipped; the other clusters mix categories.
    counts = np.array(
        [[0, 2], [0, 2], [0, 2], [1, 1], [2, 0], [0, 2], [1, 1], [1, 1], [2, 0], [0, 2], [0, 2]]
    )
    clusters = np.array([0, 0, 1, 2, 2, 2, 3, 4, 4, 5, 5])
    return counts, clusters


def test_kappa_resamples_equal_explicit_resampling():
    counts, clusters = _clustered_table()
    weights = cluster_weights(6, 300, np.random.default_rng(3))
    slow, _ = _slow_kappa_ci(counts, clusters, weights, 0.95)
    fast = kappa_resamples(counts, clusters, weights)
    assert np.array_equal(np.isnan(fast), np.isnan(slow))
    np.testing.assert_allclose(fast[~np.isnan(fast)], slow[~np.isnan(slow)], rtol=0, atol=1e-12)


def test_kappa_ci_equals_a_slow_loop_with_the_same_seed():
    counts, clusters = _clustered_table()
    weights = cluster_weights(6, 400, np.random.default_rng(11))
    kappas, expected = _slow_kappa_ci(counts, clusters, weights, 0.9)
    assert np.isnan(kappas).any()  # the case does exercise skipped resamples
    lower, upper = kappa_ci(counts, clusters, np.random.default_rng(11), n_resamples=400, level=0.9)
    assert lower == pytest.approx(expected[0], abs=1e-12)
    assert upper == pytest.approx(expected[1], abs=1e-12)


def test_kappa_ci_is_reproducible_and_contains_the_estimate():
    lower, upper = kappa_ci(FLEISS_1971, np.arange(30) // 3, np.random.default_rng(5))
    again = kappa_ci(FLEISS_1971, np.arange(30) // 3, np.random.default_rng(5))
    assert (lower, upper) == again
    assert lower < fleiss_kappa(FLEISS_1971).kappa < upper
    assert upper - lower > 0.05


def test_kappa_ci_ignores_unused_cluster_ids():
    counts, clusters = _clustered_table()
    sparse = np.array([10, 30, 40, 70, 90, 99])[clusters]
    assert kappa_ci(counts, sparse, np.random.default_rng(2)) == kappa_ci(
        counts, clusters, np.random.default_rng(2)
    )


def test_kappa_ci_is_none_when_kappa_is_never_defined():
    counts = np.array([[3, 0], [3, 0], [3, 0]])
    assert kappa_ci(counts, np.array([0, 1, 2]), np.random.default_rng(0)) == (None, None)
    assert kappa_ci(np.zeros((0, 2)), np.zeros(0), np.random.default_rng(0)) == (None, None)


def test_kappa_ci_of_items_of_one_cluster_is_none_not_a_point():
    """Three items of one instruction: every resample draws that instruction, so every
    resample's kappa is the estimate and the interval was [κ, κ], no spread measured."""
    counts = np.array([[2, 1], [0, 3], [3, 0]])
    assert fleiss_kappa(counts).kappa is not None
    assert kappa_ci(counts, np.array([4, 4, 4]), np.random.default_rng(0)) == (None, None)
    low, high = kappa_ci(counts, np.array([0, 1, 2]), np.random.default_rng(0))
    assert low < high


def test_kappa_ci_of_items_all_in_full_agreement_is_none_not_a_point():
    """Six items of three clusters, every rater agreeing on each: kappa 1 in every resample
    (P_e < 1 in most), so the interval was [1, 1] from six items, read as certainty where the
    bootstrap measured no spread."""
    counts = np.array([[3, 0], [0, 3], [3, 0], [0, 3], [3, 0], [0, 3]])
    assert fleiss_kappa(counts).kappa == 1.0
    clusters = np.array([0, 0, 1, 1, 2, 2])
    assert kappa_ci(counts, clusters, np.random.default_rng(0)) == (None, None)
