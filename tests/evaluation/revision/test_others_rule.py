"""Tables 3 and 4 merge categories under 5% into "others" (KIWI appendix A.3), worked by hand."""

import numpy as np
import pytest

from evaluation.revision.report_data import TurnData
from evaluation.revision.reports import merge_small_categories, table3, table4

approx = pytest.approx


def turn_data(groups):
    """groups: (count, system, instruction type, rating code, instruction category, error)."""
    rows = [row[1:] for row in groups for _ in range(row[0])]
    n = len(rows)
    return TurnData(
        turn_id=np.arange(1, n + 1),
        session_id=np.arange(1, n + 1),
        system=[r[0] for r in rows],
        position=np.ones(n, dtype=np.int64),
        instruction_type=[r[1] for r in rows],
        rating=np.asarray([r[2] for r in rows], dtype=np.int64),
        edited=np.zeros(n, dtype=bool),
        instruction_category=[r[3] for r in rows],
        error_category=[r[4] for r in rows],
        instruction=["i"] * n,
        systems=["a", "b"],
    )


def by(rows, category):
    return next(r for r in rows if r["category"] == category)


def test_a_category_at_4_9_percent_joins_others_and_one_at_5_0_percent_stays():
    info, style = "information-seeking", "stylistic"
    data = turn_data(
        [
            (49, "a", style, 0, "categorization", ""),  # 49 / 1000 = 4.9%: merged
            (50, "a", style, 2, "condense", ""),  # 50 / 1000 = 5.0%: stays
            (880, "b", info, 0, "remove", ""),
            (21, "b", info, 2, "others", ""),  # the paper's own "Others" (3% in Table 3)
        ]
    )
    table = table3(data, {}, None)
    assert [r["category"] for r in table["rows"]] == ["condense", "remove", "others"]
    others = by(table["rows"], "others")
    # 49 categorization (a, stylistic, good) + 21 others (b, information-seeking, bad) = 70.
    assert others == approx(
        {
            "category": "others",
            "turns": 70,
            "share": 0.07,
            "information_seeking": 21 / 70,
            "stylistic": 49 / 70,
            "good:a": 1.0,
            "good:b": 0.0,
        }
    )
    assert by(table["rows"], "condense")["share"] == 0.05
    assert table["others_rule"] == {
        "percent": 5,
        "source": "KIWI appendix A.3",
        "merged": ["categorization"],
    }
    # Every category on its own stays in the JSON.
    assert [(r["category"], r["turns"]) for r in table["categories"]] == [
        ("categorization", 49),
        ("condense", 50),
        ("remove", 880),
        ("others", 21),
    ]


def test_table3_shares_and_others_are_of_the_categorised_turns_only():
    """Two turns not classified yet made an "unlabelled" row and counted in the "% of turns"
    denominator: "condense", 1 turn of the 20 categorised (5%, kept), was 1 of 22 (4.5%) and
    merged into "others". The paper's distribution is of the classified instructions."""
    from evaluation.revision.formats import table_notes

    style = "stylistic"
    data = turn_data(
        [
            (1, "a", style, 0, "condense", ""),  # 1 / 20 = 5.0%: stays
            (19, "b", style, 2, "remove", ""),
            (2, "a", style, 0, "", ""),  # not classified yet
        ]
    )
    table = table3(data, {}, None)
    assert [(r["category"], r["turns"], r["share"]) for r in table["rows"]] == [
        ("condense", 1, 0.05),
        ("remove", 19, 0.95),
    ]
    assert table["others_rule"]["merged"] == []
    assert [r["category"] for r in table["categories"]] == ["condense", "remove"]
    assert table["unlabelled"] == 2
    assert table["sources"] == {"human": 20, "none": 2}
    report = {"table3": table, "turns": 22}
    assert table_notes(report, "table3")[-1] == (
        "2 rated turns have no category yet (neither a human label nor a classifier's): left "
        "out of the table, its shares and the 5% “others” rule, which are of the 20 "
        "categorised turns."
    )


def test_table4_merges_error_categories_of_the_categorised_failed_turns_only():
    """Good turns are not in Table 4's denominator, nor (as in Table 3) failed turns whose
    comment has no category yet: a category at 1 of 21 categorised failed turns is merged,
    whatever the unlabelled ones."""
    from evaluation.revision.formats import table_notes

    ignored, unrequested = "instruction is ignored", "introduced unrequested changes"
    style = "stylistic"
    data = turn_data(
        [
            (500, "a", style, 0, "", ""),  # good turns are not in Table 4's denominator
            (1, "a", style, 2, "", ignored),  # 1 / 21 = 4.8% of the categorised failed: merged
            (20, "b", style, 1, "", unrequested),
            (3, "b", style, 2, "", ""),  # unlabelled: left out, counted apart
        ]
    )
    table = table4(data, {}, None)
    assert [(r["category"], r["turns"]) for r in table["rows"]] == [
        (unrequested, 20),
        ("others", 1),
    ]
    # Categorised failed turns: system a has 1, system b has 20.
    assert by(table["rows"], "others") == approx(
        {"category": "others", "turns": 1, "share": 1 / 21, "share:a": 1.0, "share:b": 0.0}
    )
    assert table["others_rule"]["merged"] == [ignored]
    assert [r["category"] for r in table["categories"]] == [ignored, unrequested]
    assert table["unlabelled"] == 3
    report = {"table4": table, "turns": 524}
    assert table_notes(report, "table4")[-1] == (
        "3 neutral or bad turns have no category yet (neither a human label nor a "
        "classifier's): left out of the table, its shares and the 5% “others” rule, which are "
        "of the 21 categorised turns."
    )


def test_nothing_under_five_percent_leaves_the_categories_as_they_are():
    groups = {"remove": [0], "condense": [1, 2], "": [3]}
    assert merge_small_categories(groups, 4) == (groups, [])
    # 1 of 20 is exactly 5%: kept; 1 of 21 is not.
    assert merge_small_categories({"remove": [0], "condense": list(range(1, 20))}, 20)[1] == []
    merged, small = merge_small_categories({"remove": [0], "condense": list(range(1, 21))}, 21)
    assert (small, merged) == (["remove"], {"condense": list(range(1, 21)), "others": [0]})
