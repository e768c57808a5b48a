"""The paper's Tables 2 and 6 and Figure 4's data, on the official InFoBench file and by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings

from annotate.models import Instruction
from annotate.selectors.identities import OPERATOR
from annotate.services.imports import instructions_import
from evaluation.report_formats import report_latex, table_csv
from evaluation.selectors.report_data import principal_domain
from evaluation.services.reports import report_build

pytestmark = pytest.mark.django_db

INFOBENCH = Path(settings.BASE_DIR).parent / "shared" / "data" / "infobench" / "InfoBench.json"


def _by_subset(rows: list[dict]) -> dict[str, dict]:
    return {row["subset"]: row for row in rows}


@pytest.fixture
def infobench(db):
    if not INFOBENCH.exists():
        pytest.skip("../shared/data/infobench is not beside the checkout")
    instructions_import(path=str(INFOBENCH), benchmark_name="InFoBench")
    return Instruction.objects.first().benchmark


def test_table_2_on_the_official_data_matches_the_paper(infobench):
    report = report_build(scope=OPERATOR, benchmark=infobench, n_resamples=10)
    rows = _by_subset(report["dataset"])
    # The paper's Table 2, to its two decimals: #Inst., Len., #Req., #R/I, #Dom.
    paper = {
        "easy": (252, 17.77, 690, 2.74, 71),
        "hard": (248, 59.26, 1560, 6.29, 72),
        "overall": (500, 38.35, 2250, 4.50, 143),
    }
    for subset, (n, length, questions, per_instruction, domains) in paper.items():
        row = rows[subset]
        assert (row["instructions"], row["questions"], row["domains"]) == (n, questions, domains)
        assert round(row["length"], 2) == length, subset
        assert round(row["questions_per_instruction"], 2) == per_instruction
    # Len. is words split on single spaces: Easy 4,479 words / 252 = 17.774 (paper: 17.77),
    # Hard 14,696 / 248 = 59.258 (59.26), overall 19,175 / 500 = 38.35.
    assert rows["easy"]["length"] == pytest.approx(4479 / 252)
    assert rows["hard"]["length"] == pytest.approx(14696 / 248)
    assert rows["overall"]["length"] == pytest.approx(19175 / 500)
    latex = report_latex(report)
    assert r"\textit{Easy Set} & 252 & 17.77 & 690 & 2.74 & 71 \\" in latex
    assert r"Overall & 500 & 38.35 & 2250 & 4.50 & 143 \\" in latex
    assert table_csv(report, "dataset").splitlines()[0] == (
        "subset,instructions,length,questions,questions_per_instruction,domains"
    )


def test_table_6_on_the_official_data_matches_the_paper(infobench):
    report = report_build(scope=OPERATOR, benchmark=infobench, n_resamples=10)
    rows = _by_subset(report["constraint_types"])
    columns = ("content", "format", "number", "style", "linguistic", "labels")
    assert {s: tuple(rows[s][c] for c in columns) for s in rows} == {
        "easy": (517, 167, 8, 52, 48, 792),
        "hard": (878, 627, 411, 138, 120, 2174),
        "overall": (1395, 794, 419, 190, 168, 2966),
    }
    assert r"\textit{Hard Set} & 878 & 627 & 411 & 138 & 120 & 2174 \\" in report_latex(report)
    assert table_csv(report, "constraint_types").splitlines()[3] == (
        "overall,1395,794,419,190,168,2966"
    )


def test_the_hard_set_has_the_papers_seven_principal_domains(infobench):
    categories = Instruction.objects.filter(benchmark=infobench, subset="hard").values_list(
        "category", flat=True
    )
    assert sorted({principal_domain(c) for c in categories}) == [
        "Arts",
        "Business and Economics",
        "Engineering and Technology",
        "Lifestyle and Leisure",
        "Natural Sciences",
        "Office and Work",
        "Social Sciences",
    ]


def test_principal_domain_rule():
    assert principal_domain("Natural Sciences: Biology") == "Natural Sciences"
    assert principal_domain("Gmail") == "Gmail"
    assert principal_domain("") == "(none)"


def test_tables_2_and_6_and_figure_4_by_hand(bench):
    # Words are split on single spaces, the rule that reproduces Table 2: a double space makes
    # an empty word, a newline does not separate words.
    Instruction.objects.filter(category="Email").update(text="Write an email  please")
    Instruction.objects.filter(category="Poetry").update(
        text="Write a poem\nabout rain", category="Arts: Poetry"
    )
    report = report_build(scope=OPERATOR, benchmark=bench, n_resamples=10)
    dataset = _by_subset(report["dataset"])
    # i1 (easy): 5 words (the double space makes one empty word), 2 questions, "Email";
    # i2 (hard): 4 words ("poem\nabout" is one), 3 questions, "Arts: Poetry".
    assert dataset["easy"] == {
        "subset": "easy",
        "instructions": 1,
        "length": 5.0,
        "questions": 2,
        "questions_per_instruction": 2.0,
        "domains": 1,
    }
    assert (dataset["overall"]["length"], dataset["overall"]["questions_per_instruction"]) == (
        4.5,
        2.5,
    )
    assert dataset["overall"]["domains"] == 2
    types = _by_subset(report["constraint_types"])
    # i1: Content, Format|Number; i2: Content ×3.
    assert types["easy"] == {
        "subset": "easy",
        "content": 1,
        "format": 1,
        "number": 1,
        "style": 0,
        "linguistic": 0,
        "labels": 3,
    }
    assert (types["hard"]["content"], types["hard"]["labels"]) == (3, 3)
    # Figure 4: the Hard set only, by principal domain: expert majority YYY | NNN on i2.
    figure = {
        (r["system"], r["domain"]): (r["yes"], r["questions"])
        for r in report["hard_domains"]
        if r["source"] == "expert-majority"
    }
    assert figure == {("alpha", "Arts"): (3, 3), ("beta", "Arts"): (0, 3)}
    assert {r["domain"] for r in report["domains"]} == {"Email", "Arts: Poetry"}
    assert json.dumps(report["dataset"])  # plain JSON values
