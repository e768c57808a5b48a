"""A realistic report dict that follows docs/reports.md exactly, for the format/figure/export tests.

Counts are made up but consistent: every `drfr` is `yes / questions`, percentages add up to 100,
and the nulls a real report has are here too (an undefined kappa, a source with no recorded cost
or time, a system with no counted question in one domain).
"""

from __future__ import annotations

import copy

SYSTEMS = ["gpt-4-1106-preview", "claude-2.1", "vicuna-13b-v1.5"]
SUBSETS = {"easy": 4, "hard": 6, "overall": 10}
CONSTRAINTS = ["Content", "Linguistic", "Style", "Format", "Number"]
DOMAINS = ["Coding", "Marketing", "Education"]
# (name, kind): each expert, the two majorities, one LLM judge, in the order a report lists them.
SOURCES = [
    ("alpha", "expert"),
    ("beta", "expert"),
    ("expert-majority", "expert"),
    ("crowd-majority", "crowd"),
    ("gpt-4-0314 judge", "llm"),
]
QUESTIONS = {"easy": 18, "hard": 42, "overall": 60}


def _yes(system_index: int, source_index: int, total: int, spread: int) -> int:
    """Return a plausible YES count: better systems and kinder sources answer YES more often."""
    return max(0, total - spread * (system_index + 1) - source_index)


def _ratio(yes: int, questions: int) -> float | None:
    return yes / questions if questions else None


def _leaderboard() -> list[dict]:
    rows = []
    for source_index, (source, kind) in enumerate(SOURCES):
        for system_index, system in enumerate(SYSTEMS):
            for subset, questions in QUESTIONS.items():
                if subset == "overall":
                    yes = sum(
                        _yes(system_index, source_index, QUESTIONS[s], 2 if s == "easy" else 4)
                        for s in ("easy", "hard")
                    )
                else:
                    spread = 2 if subset == "easy" else 4
                    yes = _yes(system_index, source_index, questions, spread)
                drfr = yes / questions
                rows.append(
                    {
                        "system": system,
                        "source": source,
                        "source_kind": kind,
                        "subset": subset,
                        "drfr": drfr,
                        "ci_low": max(0.0, drfr - 0.0731),
                        "ci_high": min(1.0, drfr + 0.0649),
                        "yes": yes,
                        "questions": questions,
                        "responses_labelled": SUBSETS[subset],
                        "responses": SUBSETS[subset],
                        "provisional": False,
                    }
                )
    return rows


def _agreement() -> list[dict]:
    rows = []
    for group, annotators in (("expert", 2), ("crowd", 3)):
        for protocol in ("drfr", "ds"):
            for subset, instructions in SUBSETS.items():
                items = instructions * 3  # three pairs of systems per instruction
                row = {
                    "protocol": protocol,
                    "group": group,
                    "subset": subset,
                    "fleiss_kappa": 0.4302 if protocol == "drfr" else -0.1204,
                    "ci_low": 0.1523 if protocol == "drfr" else -0.4,
                    "ci_high": 0.6631 if protocol == "drfr" else 0.2113,
                    "p_bar": 0.7,
                    "p_e": 0.4735 if protocol == "drfr" else 0.7322,
                    "raw_agreement": 0.6667,
                    "items": items,
                    "dropped": 1 if group == "crowd" else 0,
                    "annotators": annotators,
                    "undefined_reason": None,
                }
                rows.append(row)
    # Every crowd worker put every DS pair of the easy set in the same category: P_e = 1.
    undefined = next(
        r for r in rows if (r["group"], r["protocol"], r["subset"]) == ("crowd", "ds", "easy")
    )
    undefined.update(
        fleiss_kappa=None,
        ci_low=None,
        ci_high=None,
        p_bar=1.0,
        p_e=1.0,
        raw_agreement=1.0,
        undefined_reason="P_e = 1: every rating fell in one category",
    )
    return rows


def _sources() -> list[dict]:
    costs = {
        "alpha": (236.0, 480.0),
        "beta": (236.0, 480.0),
        "expert-majority": (472.0, 480.0),
        "crowd-majority": (93.75, 960.0),
        "gpt-4-0314 judge": (None, None),  # imported labels: nothing recorded
    }
    pld = {
        "alpha": (90.0, 10.0, 0.0),
        "beta": (86.7, 13.3, 0.0),
        "expert-majority": (100.0, 0.0, 0.0),
        "crowd-majority": (51.8, 37.6, 10.6),
        "gpt-4-0314 judge": (65.6, 34.4, 0.0),
    }
    rows = []
    for source_index, (source, kind) in enumerate(SOURCES):
        cost, minutes = costs[source]
        pld0, pld1, pld2 = pld[source]
        for subset, instructions in SUBSETS.items():
            compared = QUESTIONS[subset] * len(SYSTEMS)
            scale = {"easy": 0.5, "hard": 0.5, "overall": 1.0}[subset]
            rows.append(
                {
                    "source": source,
                    "source_kind": kind,
                    "subset": subset,
                    "gold": "other-experts"
                    if kind == "expert" and source != "expert-majority"
                    else "expert-majority",
                    "acc": 1.0 if source == "expert-majority" else 0.93 - 0.03 * source_index,
                    "compared": compared,
                    "pld0": pld0,
                    "pld1": pld1,
                    "pld2": pld2,
                    "wpld": (pld1 + 2 * pld2) / 100,
                    "pairs": instructions * 3,
                    "acc_na": None,
                    "pld_na": None,
                    "cost_usd": None if cost is None else cost * scale,
                    # A judge's failed attempts the provider may have billed; people: None.
                    "possibly_billed_usd": 0.0 if kind == "llm" else None,
                    "time_min": None if minutes is None else minutes * scale,
                    "provisional": False,
                }
            )
    return rows


def _constraints() -> list[dict]:
    rows = []
    for source_index, (source, _kind) in enumerate(SOURCES):
        for system_index, system in enumerate(SYSTEMS):
            for constraint_index, constraint in enumerate(CONSTRAINTS):
                questions = 12 + 3 * constraint_index
                yes = _yes(system_index, source_index, questions, 1 + constraint_index % 3)
                rows.append(
                    {
                        "source": source,
                        "system": system,
                        "constraint": constraint,
                        "drfr": _ratio(yes, questions),
                        "yes": yes,
                        "questions": questions,
                    }
                )
    return rows


def _domains() -> list[dict]:
    rows = []
    for source_index, (source, _kind) in enumerate(SOURCES):
        for system_index, system in enumerate(SYSTEMS):
            for domain_index, domain in enumerate(DOMAINS):
                questions = 20 - 2 * domain_index
                yes = _yes(system_index, source_index, questions, 2 + domain_index)
                if source == "gpt-4-0314 judge" and domain == "Education" and system_index == 2:
                    questions = yes = 0  # the judge's calls for these responses all failed
                rows.append(
                    {
                        "source": source,
                        "system": system,
                        "domain": domain,
                        "drfr": _ratio(yes, questions),
                        "yes": yes,
                        "questions": questions,
                    }
                )
    return rows


PRINCIPAL_DOMAINS = (
    "Arts",
    "Business and Economics",
    "Engineering and Technology",
    "Lifestyle and Leisure",
    "Natural Sciences",
    "Office and Work",
    "Social Sciences",
)


def _hard_domains() -> list[dict]:
    rows = []
    for source_index, (source, _kind) in enumerate(SOURCES):
        for system_index, system in enumerate(SYSTEMS):
            for domain_index, domain in enumerate(PRINCIPAL_DOMAINS):
                questions = 30 + domain_index
                yes = _yes(system_index, source_index, questions, 1 + domain_index % 4)
                rows.append(
                    {
                        "source": source,
                        "system": system,
                        "domain": domain,
                        "drfr": _ratio(yes, questions),
                        "yes": yes,
                        "questions": questions,
                    }
                )
    return rows


def _disagreement() -> list[dict]:
    counts = {"expert": [41, 12, 5, 2], "crowd": [22, 20, 11, 7]}
    return [
        {"group": group, "level": level, "questions": n}
        for group, per_level in counts.items()
        for level, n in enumerate(per_level)
    ]


def _positions() -> list[dict]:
    rows = []
    for kind, base in (("expert", (150, 147, 141)), ("crowd", (162, 151, 149))):
        for index, yes in enumerate(base):
            questions = 180
            rows.append(
                {
                    "kind": kind,
                    "position": "ABC"[index],
                    "drfr": yes / questions,
                    "yes": yes,
                    "questions": questions,
                }
            )
    return rows


def _votes() -> list[dict]:
    return [
        {"source": "expert-majority", "items": 180, "ties": 7, "no_votes": 1},
        {"source": "crowd-majority", "items": 180, "ties": 0, "no_votes": 3},
    ]


# The paper's Tables 2 and 6 (InFoBench, official data).
DATASET = [
    {
        "subset": subset,
        "instructions": n,
        "length": length,
        "questions": q,
        "questions_per_instruction": q / n,
        "domains": d,
    }
    for subset, n, length, q, d in (
        ("easy", 252, 17.77, 690, 71),
        ("hard", 248, 59.26, 1560, 72),
        ("overall", 500, 38.35, 2250, 143),
    )
]
CONSTRAINT_TYPES = [
    {
        "subset": subset,
        "content": c,
        "format": f,
        "number": n,
        "style": s,
        "linguistic": li,
        "labels": c + f + n + s + li,
    }
    for subset, c, f, n, s, li in (
        ("easy", 517, 167, 8, 52, 48),
        ("hard", 878, 627, 411, 138, 120),
        ("overall", 1395, 794, 419, 190, 168),
    )
]

SAMPLE = {
    "benchmark": "InFoBench",
    "unknown": "exclude",
    "generated_at": "2026-11-23T08:15:04+00:00",
    "seed": 0,
    "n_resamples": 1000,
    "systems": SYSTEMS,
    "subsets": SUBSETS,
    "dataset": DATASET,
    "constraint_types": CONSTRAINT_TYPES,
    "leaderboard": _leaderboard(),
    "agreement": _agreement(),
    "sources": _sources(),
    "constraints": _constraints(),
    "domains": _domains(),
    "hard_domains": _hard_domains(),
    "disagreement": _disagreement(),
    "positions": _positions(),
    "votes": _votes(),
    "provisional": [],
}


def sample_report() -> dict:
    """Return a fresh copy of the sample report, safe to modify in a test."""
    return copy.deepcopy(SAMPLE)


def empty_report() -> dict:
    """Return a report of a benchmark with no label at all: every key, every table empty."""
    report = sample_report()
    report.update(systems=[], subsets={"easy": 0, "hard": 0, "overall": 0})
    for table in (
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
    ):
        report[table] = []
    return report
