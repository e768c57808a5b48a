"""The published numbers against their definitions, through the public paths.

InFoBench's `official` DRFR against the official script's own `bool_ratio` on a slice of the
official data (../shared, skipped without it), and every figure of the report (leaderboard under
the three conventions, ACC, PLD/WPLD against the expert majority or the other experts, Fleiss'
kappa of both groups and both protocols) and the verbalizer groups against a plain
re-computation from the papers' definitions on random labels with UNKNOWNs, gaps, ties and
missing raters (docs/reports.md, docs/verbalizer.md).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import random
import sys
import types
from fractions import Fraction
from itertools import combinations
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from annotate.models import AnnotatorKind, Label, LabelValue, Subset
from tests.factories import (
    AnnotatorFactory,
    BenchmarkFactory,
    InstructionFactory,
    QuestionFactory,
    ResponseFactory,
    SystemFactory,
)

pytestmark = pytest.mark.django_db

SHARED = Path(settings.BASE_DIR).parent / "shared"
INFOBENCH = SHARED / "data" / "infobench" / "InfoBench.json"
SCRIPT = SHARED / "reference" / "infobench" / "evaluation.py"


def _script(monkeypatch):
    tiktoken = types.ModuleType("tiktoken")
    tiktoken.get_encoding = lambda name: None
    monkeypatch.setitem(sys.modules, "tiktoken", tiktoken)
    spec = importlib.util.spec_from_file_location("infobench_reference_evaluation", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _report(*args) -> dict:
    out = io.StringIO()
    call_command("report", *args, "--format", "json", stdout=out)
    return json.loads(out.getvalue())


def test_official_drfr_equals_the_scripts_bool_ratio_on_a_slice(monkeypatch, tmp_path):
    if not (INFOBENCH.exists() and SCRIPT.exists()):
        pytest.skip("../shared is not beside the checkout")
    rows = [json.loads(line) for line in INFOBENCH.read_text().splitlines() if line.strip()]
    rows = rows[:15] + rows[-15:]
    data = tmp_path / "slice.json"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    call_command("import_instructions", str(data), "--benchmark", "Slice", stdout=io.StringIO())
    rng = random.Random(7)
    outputs, evals = tmp_path / "out.jsonl", tmp_path / "eval.jsonl"
    out_lines, eval_lines = [], []
    for row in rows:
        out_lines.append(json.dumps({"id": row["id"], "output": f"answer to {row['id']}"}))
        n = len(row["decomposed_questions"])
        values = [rng.choice([True, True, False]) for _ in range(n)]
        if rng.random() < 0.3:  # the script's early stop: a None, then nothing more asked
            stop = rng.randrange(n)
            values = values[:stop] + [None]
        entry = dict(row, output=f"answer to {row['id']}", eval=values)
        eval_lines.append(json.dumps(entry))
    outputs.write_text("\n".join(out_lines) + "\n")
    evals.write_text("\n".join(eval_lines) + "\n")
    call_command(
        "import_responses",
        str(outputs),
        "--benchmark",
        "Slice",
        "--system",
        "gpt",
        stdout=io.StringIO(),
    )
    call_command(
        "import_labels",
        str(evals),
        "--benchmark",
        "Slice",
        "--system",
        "gpt",
        "--annotator",
        "judge",
        "--kind",
        "llm",
        stdout=io.StringIO(),
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        _script(monkeypatch).bool_ratio(str(evals))
    counts = next(
        json.loads(line.replace("'", '"'))
        for line in printed.getvalue().splitlines()
        if line.startswith("{'true'")
    )
    report = _report("--benchmark", "Slice", "--unknown", "official")
    (row,) = [
        r for r in report["leaderboard"] if r["source"] == "judge" and r["subset"] == "overall"
    ]
    assert (row["yes"], row["questions"]) == (counts["true"], counts["true"] + counts["false"])
    assert row["drfr"] == counts["true"] / (counts["true"] + counts["false"])


# --- A differential check: the report against a plain re-computation from the definitions ----


Y, N, U = LabelValue.YES, LabelValue.NO, LabelValue.UNKNOWN


def _random_benchmark(seed: int):
    rng = random.Random(seed)
    bench = BenchmarkFactory(name=f"diff-{seed}")
    systems = [SystemFactory(name=f"s{k}-{seed}") for k in range(3)]
    instructions = []
    for i in range(6):
        ins = InstructionFactory(benchmark=bench, subset=Subset.EASY if i % 2 else Subset.HARD)
        questions = [
            QuestionFactory(instruction=ins, position=p) for p in range(1, rng.randint(1, 3) + 1)
        ]
        responses = [ResponseFactory(instruction=ins, system=s) for s in systems]
        instructions.append((ins, questions, responses))
    experts = [AnnotatorFactory(name=f"e{k}", kind=AnnotatorKind.EXPERT) for k in range(4)]
    crowd = [AnnotatorFactory(name=f"c{k}", kind=AnnotatorKind.CROWD) for k in range(3)]
    judge = AnnotatorFactory(name="judge", kind=AnnotatorKind.LLM)
    labels = {}  # (annotator name, question id, response id) -> value
    rows = []
    for _ins, questions, responses in instructions:
        for annotator in experts + crowd + [judge]:
            for response in responses:
                if annotator is not judge and rng.random() < 0.2:
                    continue
                for q in questions:
                    if rng.random() < 0.1:
                        continue
                    value = rng.choice([Y, Y, N, N, U] if annotator is not judge else [Y, N])
                    labels[(annotator.name, q.id, response.id)] = value
                    rows.append(
                        Label(question=q, response=response, annotator=annotator, value=value)
                    )
    Label.objects.bulk_create(rows)
    return bench, systems, instructions, experts, crowd, judge, labels


def _majority(values):
    yes, no = values.count(Y), values.count(N)
    return Y if yes > no else N if no > yes else U


def _drfr(values):
    yes, counted = values.count(Y), values.count(Y) + values.count(N)
    return yes, counted


@pytest.mark.parametrize("seed", [1])
def test_report_equals_a_plain_recomputation(seed):
    bench, systems, instructions, experts, crowd, judge, labels = _random_benchmark(seed)
    report = _report("--benchmark", bench.name)
    subsets = {"easy": Subset.EASY, "hard": Subset.HARD}

    def in_subset(ins, subset):
        return subset == "overall" or ins.subset == subsets[subset]

    def label_of(source, q, r, *, leave_out=None):
        if source == "expert-majority":
            return _majority(
                [labels.get((e.name, q.id, r.id)) for e in experts if e.name != leave_out]
            )
        if source == "crowd-majority":
            return _majority([labels.get((c.name, q.id, r.id)) for c in crowd])
        return labels.get((source, q.id, r.id))

    sources = [e.name for e in experts] + ["expert-majority", "crowd-majority", "judge"]
    # Leaderboard, exclude convention.
    for source in sources:
        for subset in ("easy", "hard", "overall"):
            for k, system in enumerate(systems):
                values = [
                    label_of(source, q, responses[k])
                    for ins, questions, responses in instructions
                    if in_subset(ins, subset)
                    for q in questions
                ]
                yes, counted = _drfr(values)
                rows = [
                    r
                    for r in report["leaderboard"]
                    if r["source"] == source
                    and r["subset"] == subset
                    and r["system"] == system.name
                ]
                if counted == 0:
                    assert not rows or rows[0]["questions"] == 0, (
                        source,
                        subset,
                        system.name,
                        rows,
                    )
                    continue
                assert len(rows) == 1, (source, subset, system.name)
                assert (rows[0]["yes"], rows[0]["questions"]) == (yes, counted), (
                    source,
                    subset,
                    system.name,
                )

    # ACC and PLD against the gold.
    def categories(source, ins, questions, responses, leave_out=None):
        out = {}
        drfrs = []
        for r in responses:
            yes, counted = _drfr([label_of(source, q, r, leave_out=leave_out) for q in questions])
            drfrs.append(Fraction(yes, counted) if counted else None)
        for a, b in combinations(range(len(responses)), 2):
            if drfrs[a] is not None and drfrs[b] is not None:
                out[(a, b)] = (drfrs[a] > drfrs[b]) - (drfrs[a] < drfrs[b])
        return out

    for source in sources:
        leave_out = source if source.startswith("e") and source != "expert-majority" else None
        for subset in ("easy", "hard", "overall"):
            agree = compared = 0
            plds = []
            for ins, questions, responses in instructions:
                if not in_subset(ins, subset):
                    continue
                for q in questions:
                    for r in responses:
                        gold = label_of("expert-majority", q, r, leave_out=leave_out)
                        mine = label_of(source, q, r)
                        if gold in (Y, N) and mine in (Y, N):
                            compared += 1
                            agree += gold == mine
                gold_c = categories("expert-majority", ins, questions, responses, leave_out)
                mine_c = categories(source, ins, questions, responses)
                plds += [abs(mine_c[p] - gold_c[p]) for p in mine_c if p in gold_c]
            (row,) = [
                r for r in report["sources"] if r["source"] == source and r["subset"] == subset
            ]
            assert row["compared"] == compared, (source, subset)
            if compared:
                assert row["acc"] == pytest.approx(agree / compared), (source, subset)
            assert row["pairs"] == len(plds), (source, subset)
            if plds:
                assert row["pld0"] == pytest.approx(100 * plds.count(0) / len(plds)), (
                    source,
                    subset,
                )
                assert row["wpld"] == pytest.approx(sum(plds) / len(plds)), (source, subset)

    # Fleiss' kappa of the experts' pairwise categories.
    per_item = {}
    for ins, questions, responses in instructions:
        cats = {e.name: categories(e.name, ins, questions, responses) for e in experts}
        for pair in combinations(range(3), 2):
            per_item[(ins.id, pair)] = [cats[e.name][pair] for e in experts if pair in cats[e.name]]
    from collections import Counter

    counts = Counter(len(v) for v in per_item.values() if len(v) >= 2)
    n = max(sorted(counts), key=lambda k: counts[k]) if counts else 0
    for subset in ("easy", "hard", "overall"):
        items = [
            v[:n]
            for (ins_id, _), v in per_item.items()
            if len(v) >= n
            and in_subset(next(i for i, _, _ in instructions if i.id == ins_id), subset)
        ]
        (row,) = [
            r
            for r in report["agreement"]
            if r["protocol"] == "drfr" and r["group"] == "expert" and r["subset"] == subset
        ]
        assert row["annotators"] == n and row["items"] == len(items), (subset, row)
        if not items:
            continue
        table = [[v.count(c) for c in (1, 0, -1)] for v in items]
        big_n = len(table)
        p_i = [(sum(x * x for x in t) - n) / (n * (n - 1)) for t in table]
        p_bar = sum(p_i) / big_n
        p_j = [sum(t[j] for t in table) / (big_n * n) for j in range(3)]
        p_e = sum(p * p for p in p_j)
        if p_e == 1:
            assert row["fleiss_kappa"] is None
        else:
            assert row["fleiss_kappa"] == pytest.approx((p_bar - p_e) / (1 - p_e)), subset


@pytest.mark.parametrize("seed", [5])
@pytest.mark.parametrize("unknown", ["no", "official"])
def test_leaderboard_under_the_other_conventions_equals_a_recomputation(seed, unknown):
    bench, systems, instructions, experts, crowd, judge, labels = _random_benchmark(seed)
    report = _report("--benchmark", bench.name, "--unknown", unknown)
    groups = {"expert-majority": experts, "crowd-majority": crowd}
    for source in [e.name for e in experts] + ["expert-majority", "crowd-majority", "judge"]:
        members = [a.name for a in groups.get(source, [])] or [source]
        for k, system in enumerate(systems):
            yes = counted = 0
            for _ins, questions, responses in instructions:
                r = responses[k]
                given = {
                    q.id: [labels[(m, q.id, r.id)] for m in members if (m, q.id, r.id) in labels]
                    for q in questions
                }
                touched = any(given.values())
                for q in questions:
                    value = _majority(given[q.id]) if given[q.id] else None
                    if unknown == "no" and touched or unknown == "official" and given[q.id]:
                        counted += 1
                        yes += value == Y
            rows = [
                r
                for r in report["leaderboard"]
                if r["source"] == source and r["subset"] == "overall" and r["system"] == system.name
            ]
            if counted == 0:
                assert not rows
                continue
            assert (rows[0]["yes"], rows[0]["questions"]) == (yes, counted), (source, system.name)


# --- Verbalizer: a group's accuracy is the mean of its (dataset, mapping) pieces ---------------


@pytest.mark.parametrize("seed", [1])
def test_verbalizer_groups_equal_a_plain_recomputation(seed):
    from annotate.models import System
    from annotate.verbalizer.models import Prompt, SystemRun
    from annotate.verbalizer.services.sets import evaluation_set_create
    from evaluation.verbalizer.parsing import normalise
    from evaluation.verbalizer.report import verbalizer_report
    from tests.annotate.verbalizer.helpers import fill
    from tests.evaluation.verbalizer.conftest import answer

    rng = random.Random(seed)
    fill("SST-2", [rng.random() < 0.5 for _ in range(6)])
    fill("DS-B", [rng.random() < 0.5 for _ in range(3)])
    s = evaluation_set_create(
        name="diff", datasets=["SST-2", "DS-B"], items=6, seed=1,
        mappings="golden,flipped-golden,foo|bar", modes=["direct"],
    ).evaluation_set  # fmt: skip
    run = SystemRun.objects.create(
        evaluation_set=s, system=System.objects.create(name="m1"), endpoint_name="stub",
        model_size_b=7,
    )  # fmt: skip
    pieces = {}
    for prompt in Prompt.objects.filter(evaluation_set=s).select_related(
        "item__dataset", "mapping"
    ):
        reply = rng.choice([prompt.positive_word, prompt.negative_word, "unsure"])
        answer(run, prompt, reply)
        key = (prompt.item.dataset.name, prompt.mapping.name)
        valid = normalise(reply) in (
            normalise(prompt.positive_word),
            normalise(prompt.negative_word),
        )
        right = valid and normalise(reply) == normalise(prompt.expected_word)
        piece = pieces.setdefault(key, [0, 0, 0])
        piece[0] += right
        piece[1] += valid
        piece[2] += 1
    report = verbalizer_report(evaluation_set=s)
    group_of = {"golden": "natural", "flipped-golden": "unnatural", "foo|bar": "neutral"}
    for group in ("natural", "neutral", "unnatural"):
        mine = [p for (d, m), p in pieces.items() if group_of[m] == group]
        accuracies = [r / v for r, v, _ in mine if v]
        (row,) = [r for r in report["groups"] if r["system"] == "m1" and r["group"] == group]
        expected = sum(accuracies) / len(accuracies) if accuracies else None
        assert row["accuracy_strict"] == pytest.approx(expected), group
        assert row["invalid_strict"] == pytest.approx(
            1 - sum(v for _, v, _ in mine) / sum(n for _, _, n in mine)
        )


def _kappa_by_hand(per_item: dict, in_subset) -> tuple[int, int, float | None]:
    from collections import Counter

    counts = Counter(len(v) for v in per_item.values() if len(v) >= 2)
    n = max(sorted(counts), key=lambda k: counts[k]) if counts else 0
    items = [v[:n] for key, v in per_item.items() if n and len(v) >= n and in_subset(key)]
    if not items:
        return n, 0, None
    table = [[v.count(c) for c in (1, 0, -1)] for v in items]
    p_bar = sum((sum(x * x for x in t) - n) / (n * (n - 1)) for t in table) / len(table)
    p_j = [sum(t[j] for t in table) / (len(table) * n) for j in range(3)]
    p_e = sum(p * p for p in p_j)
    return n, len(items), None if p_e == 1 else (p_bar - p_e) / (1 - p_e)


@pytest.mark.parametrize("seed", [7])
@pytest.mark.parametrize("unknown", ["exclude", "no", "official"])
def test_kappa_of_both_groups_equals_a_plain_recomputation(seed, unknown):
    bench, systems, instructions, experts, crowd, judge, labels = _random_benchmark(seed)
    report = _report("--benchmark", bench.name, "--unknown", unknown)
    subset_of = {ins.id: ins.subset for ins, _, _ in instructions}
    for group, members in (("expert", experts), ("crowd", crowd)):
        per_item = {}
        for ins, questions, responses in instructions:
            cats = {}
            for m in members:
                drfrs = []
                for r in responses:
                    given = [labels.get((m.name, q.id, r.id)) for q in questions]
                    touched = any(v is not None for v in given)
                    if unknown == "exclude":
                        yes, counted = given.count(Y), given.count(Y) + given.count(N)
                    elif unknown == "no":
                        yes, counted = given.count(Y), len(questions) if touched else 0
                    else:
                        yes, counted = given.count(Y), sum(v is not None for v in given)
                    drfrs.append(Fraction(yes, counted) if counted else None)
                cats[m.name] = {
                    (a, b): (drfrs[a] > drfrs[b]) - (drfrs[a] < drfrs[b])
                    for a, b in combinations(range(3), 2)
                    if drfrs[a] is not None and drfrs[b] is not None
                }
            for pair in combinations(range(3), 2):
                per_item[(ins.id, pair)] = [
                    cats[m.name][pair] for m in members if pair in cats[m.name]
                ]
        for subset in ("easy", "hard", "overall"):
            n, items, kappa = _kappa_by_hand(
                per_item,
                lambda key, subset=subset: subset == "overall" or subset_of[key[0]] == subset,
            )
            (row,) = [
                r
                for r in report["agreement"]
                if r["protocol"] == "drfr" and r["group"] == group and r["subset"] == subset
            ]
            assert (row["annotators"], row["items"]) == (n, items), (group, subset, row)
            if kappa is None:
                assert row["fleiss_kappa"] is None
            else:
                assert row["fleiss_kappa"] == pytest.approx(kappa), (group, subset)


def test_direct_score_kappa_equals_a_plain_recomputation():
    from annotate.models import DirectScore

    bench, systems, instructions, experts, crowd, judge, labels = _random_benchmark(9)
    rng = random.Random(9)
    scores = {}
    rows = []
    for _ins, _, responses in instructions:
        for e in experts:
            for r in responses:
                if rng.random() < 0.2:
                    continue
                scores[(e.name, r.id)] = rng.randint(1, 5)
                rows.append(DirectScore(response=r, annotator=e, score=scores[(e.name, r.id)]))
    DirectScore.objects.bulk_create(rows)
    report = _report("--benchmark", bench.name)
    subset_of = {ins.id: ins.subset for ins, _, _ in instructions}
    per_item = {}
    for ins, _, responses in instructions:
        for a, b in combinations(range(3), 2):
            per_item[(ins.id, (a, b))] = [
                (s_a > s_b) - (s_a < s_b)
                for e in experts
                if (s_a := scores.get((e.name, responses[a].id))) is not None
                and (s_b := scores.get((e.name, responses[b].id))) is not None
            ]
    for subset in ("easy", "hard", "overall"):
        n, items, kappa = _kappa_by_hand(
            per_item, lambda key, subset=subset: subset == "overall" or subset_of[key[0]] == subset
        )
        (row,) = [
            r
            for r in report["agreement"]
            if r["protocol"] == "ds" and r["group"] == "expert" and r["subset"] == subset
        ]
        assert (row["annotators"], row["items"]) == (n, items), (subset, row)
        assert row["fleiss_kappa"] == (None if kappa is None else pytest.approx(kappa))


@pytest.mark.parametrize("seed", [11])
@pytest.mark.parametrize("unknown", ["no", "official"])
def test_pld_under_the_other_conventions_equals_a_plain_recomputation(seed, unknown):
    bench, systems, instructions, experts, crowd, judge, labels = _random_benchmark(seed)
    report = _report("--benchmark", bench.name, "--unknown", unknown)

    def drfr(members, questions, r):
        given = {
            q.id: [labels[(m, q.id, r.id)] for m in members if (m, q.id, r.id) in labels]
            for q in questions
        }
        touched = any(given.values())
        yes = counted = 0
        for q in questions:
            if unknown == "no" and touched or unknown == "official" and given[q.id]:
                counted += 1
                yes += bool(given[q.id]) and _majority(given[q.id]) == Y
        return Fraction(yes, counted) if counted else None

    def cats(members, questions, responses):
        d = [drfr(members, questions, r) for r in responses]
        return {
            (a, b): (d[a] > d[b]) - (d[a] < d[b])
            for a, b in combinations(range(3), 2)
            if d[a] is not None and d[b] is not None
        }

    everyone = [e.name for e in experts]
    groups = {"expert-majority": everyone, "crowd-majority": [c.name for c in crowd]}
    for source in everyone + ["expert-majority", "crowd-majority", "judge"]:
        members = groups.get(source, [source])
        gold = [e for e in everyone if e != source]
        plds = []
        for _ins, questions, responses in instructions:
            mine, theirs = cats(members, questions, responses), cats(gold, questions, responses)
            plds += [abs(mine[p] - theirs[p]) for p in mine if p in theirs]
        (row,) = [
            r for r in report["sources"] if r["source"] == source and r["subset"] == "overall"
        ]
        assert row["pairs"] == len(plds), source
        if plds:
            assert row["wpld"] == pytest.approx(sum(plds) / len(plds)), source
