"""The verbalizer report of one evaluation set: every table and figure reads from it.

Model replies are parsed here (evaluation.verbalizer.parsing), so a change of rule needs no new
run. People's answers count as sources of two kinds: ``human`` (every answer) and
``human-majority`` (one majority answer per prompt; a tie is invalid), pooling in-house
annotators and crowd workers; ``human-crowd``/``human-crowd-majority`` hold the crowd workers'
alone, and, when a set has both, ``human-inhouse``/``human-inhouse-majority`` the in-house
annotators' alone. Only answers that count under annotate.selectors.results are read (a crowd
answer the platform never confirmed, a rejected one or a blocked worker's is left out).
Conventions: evaluation.verbalizer.scoring and docs/verbalizer.md.
"""

from __future__ import annotations

import numpy as np
from django.core.cache import cache
from django.db.models import Count, Max

from annotate.models import AnnotatorKind
from annotate.selectors.identities import OPERATOR, IdentityScope
from annotate.selectors.results import (
    counted_human_answers,
    counted_human_answers_fingerprint,
    human_answer_statuses,
)
from annotate.verbalizer.models import (
    GROUP_ORDER,
    EvaluationSet,
    HumanAnswer,
    ModelAnswer,
    Prompt,
    SystemRun,
)
from evaluation.stats.kappa import fleiss_kappa, kappa_ci
from evaluation.verbalizer.parsing import INVALID, NEGATIVE, POSITIVE, parse_lenient, parse_strict
from evaluation.verbalizer.scoring import (
    LEVEL,
    N_RESAMPLES,
    RULES,
    Records,
    agreement_counts,
    cells,
    majority_codes,
)

HUMAN = "human"
HUMAN_MAJORITY = "human-majority"
HUMAN_INHOUSE = "human-inhouse"
HUMAN_INHOUSE_MAJORITY = "human-inhouse-majority"
HUMAN_CROWD = "human-crowd"
HUMAN_CROWD_MAJORITY = "human-crowd-majority"
# (answers, majority) per group of people, in the order tables and figures show them.
NO_REPEATED_ANSWERS = "no prompt has two answers or more"
PEOPLE_SOURCES = (
    (HUMAN, HUMAN_MAJORITY),
    (HUMAN_INHOUSE, HUMAN_INHOUSE_MAJORITY),
    (HUMAN_CROWD, HUMAN_CROWD_MAJORITY),
)
PEOPLE = tuple(name for pair in PEOPLE_SOURCES for name in pair)
FLIPPED_CONDITIONS = (
    ("natural golden, direct", "golden", "direct"),
    ("unnatural flipped golden, direct", "flipped-golden", "direct"),
    ("unnatural flipped golden, CoT", "flipped-golden", "cot"),
)
ROW_KEYS = ("system", "dataset", "group", "mapping", "mode")


def _prompt_table(evaluation_set: EvaluationSet) -> dict[int, tuple]:
    rows = Prompt.objects.filter(evaluation_set=evaluation_set).values_list(
        "id", "item_id", "item__dataset__name", "mapping__group", "mapping__name", "mode",
        "positive_word", "negative_word", "expected_word",
    )  # fmt: skip
    return {row[0]: row[1:] for row in rows}


def _records(evaluation_set: EvaluationSet) -> Records:
    prompts = _prompt_table(evaluation_set)
    sources, prompt_ids, codes = [], [], {rule: [] for rule in RULES}
    replies = ModelAnswer.objects.filter(prompt__evaluation_set=evaluation_set).values_list(
        "prompt_id", "system__name", "reply"
    )
    parsed: dict[tuple[str, str, str], tuple[int, int]] = {}  # replies repeat (direct mode)
    for prompt_id, system, reply in replies:
        positive, negative = prompts[prompt_id][5:7]
        sources.append(system)
        prompt_ids.append(prompt_id)
        key = (reply, positive, negative)
        if key not in parsed:
            parsed[key] = (
                parse_strict(reply, positive, negative),
                parse_lenient(reply, positive, negative),
            )
        strict, lenient = parsed[key]
        codes["strict"].append(strict)
        codes["lenient"].append(lenient)
    human_prompt, human_code, crowd = _human_codes(evaluation_set, prompts)
    for (source, majority_source), chosen in _people_groups(crowd):
        ids, values = human_prompt[chosen], human_code[chosen]
        majority_prompt, majority_code = majority_codes(ids, values)
        for name, prompt_list, value_list in (
            (source, ids, values),
            (majority_source, majority_prompt, majority_code),
        ):
            sources.extend([name] * len(prompt_list))
            prompt_ids.extend(prompt_list.tolist())
            for rule in RULES:
                codes[rule].extend(value_list.tolist())
    return _to_records(prompts, sources, prompt_ids, codes)


def _people_groups(crowd: np.ndarray) -> list[tuple[tuple[str, str], np.ndarray]]:
    """Which answers each people source pools: everyone; in-house alone when the crowd answered
    too; the crowd alone whenever it answered."""
    if crowd.size == 0:
        return []
    groups = [(PEOPLE_SOURCES[0], np.ones(crowd.size, dtype=bool))]
    if crowd.any() and not crowd.all():
        groups.append((PEOPLE_SOURCES[1], ~crowd))
    if crowd.any():
        groups.append((PEOPLE_SOURCES[2], crowd))
    return groups


def _human_answers_all(evaluation_set: EvaluationSet):
    return HumanAnswer.objects.filter(prompt__evaluation_set=evaluation_set)


def _human_answers(evaluation_set: EvaluationSet):
    """The set's people's answers that count (annotate.selectors.results)."""
    return counted_human_answers(_human_answers_all(evaluation_set))


def _human_codes(evaluation_set, prompts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (prompt ids, codes 1/0/-1, is a crowd worker) of the counted answers."""
    answers = _human_answers(evaluation_set).values_list("prompt_id", "word", "annotator__kind")
    ids, values, crowd = [], [], []
    for prompt_id, word, kind in answers:
        positive, negative = prompts[prompt_id][5:7]
        ids.append(prompt_id)
        values.append(POSITIVE if word == positive else NEGATIVE if word == negative else INVALID)
        crowd.append(kind == AnnotatorKind.CROWD)
    return (
        np.asarray(ids, dtype=np.int64),
        np.asarray(values, dtype=np.int64),
        np.asarray(crowd, dtype=bool),
    )


def _to_records(prompts, sources, prompt_ids, codes) -> Records:
    info = [prompts[p] for p in prompt_ids]
    column = list(zip(*info, strict=True)) if info else [()] * 8
    expected = np.asarray(
        [POSITIVE if row[7] == row[5] else NEGATIVE for row in info], dtype=np.int64
    )
    parsed = {rule: np.asarray(codes[rule], dtype=np.int64) for rule in RULES}
    return Records(
        source=np.asarray(sources, dtype=object),
        item=np.asarray(column[0], dtype=np.int64),
        dataset=np.asarray(column[1], dtype=object),
        group=np.asarray(column[2], dtype=object),
        mapping=np.asarray(column[3], dtype=object),
        mode=np.asarray(column[4], dtype=object),
        valid={rule: parsed[rule] != INVALID for rule in RULES},
        correct={rule: parsed[rule] == expected for rule in RULES},
        choice=parsed["lenient"],
    )


def _system_order(evaluation_set: EvaluationSet, present: set[str]) -> list[dict]:
    sizes = dict(
        SystemRun.objects.filter(evaluation_set=evaluation_set)
        .values_list("system__name")
        .annotate(size=Max("model_size_b"))
    )
    models = [s for s in present if s not in PEOPLE]
    models.sort(key=lambda s: (sizes.get(s) is None, sizes.get(s) or 0, s))
    people = [s for s in PEOPLE if s in present]
    return [{"system": s, "size_b": sizes.get(s)} for s in models + people]


def _flatten(cell_rows: list[dict], names: tuple[str, ...]) -> list[dict]:
    out = []
    for cell in cell_rows:
        row = dict(zip(names, cell.pop("key"), strict=True))
        row.update(cell)
        row["invalid"] = row["invalid_lenient"]
        out.append(row)
    return out


def _sorted(rows: list[dict], orders: dict[str, list]) -> list[dict]:
    def rank(row):
        return tuple(
            orders[k].index(row[k]) if row[k] in orders[k] else len(orders[k])
            for k in orders
            if k in row
        )

    return sorted(rows, key=rank)


def verbalizer_report(*, evaluation_set: EvaluationSet) -> dict:
    """Compute the whole report of `evaluation_set` (see the module docstring)."""
    rec = _records(evaluation_set)
    systems = _system_order(evaluation_set, set(rec.source.tolist()))
    mapping_order = list(
        evaluation_set.mappings.order_by("position").values_list("name", flat=True)
    )
    datasets = list(evaluation_set.datasets.order_by("name").values_list("name", flat=True))
    orders = {
        "system": [s["system"] for s in systems],
        "dataset": datasets,
        "group": list(GROUP_ORDER),
        "mapping": mapping_order,
        "mode": ["direct", "cot"],
        "condition": [c[0] for c in FLIPPED_CONDITIONS],
    }
    everything = np.ones(len(rec), dtype=bool)
    rows = []
    for dataset in datasets:
        rows += cells(
            rec, rec.dataset == dataset, ["source", "dataset", "group", "mapping", "mode"]
        )
    direct = rec.mode == "direct"
    condition = _conditions(rec)
    report = {
        "set": evaluation_set.name,
        "template_version": evaluation_set.template_version,
        "items_per_dataset": evaluation_set.items_per_dataset,
        "seed": evaluation_set.seed,
        "systems": systems,
        "rows": _sorted(_flatten(rows, ROW_KEYS), orders),
        "groups": _sorted(
            _flatten(cells(rec, direct, ["source", "group"]), ("system", "group")), orders
        ),
        "mappings": _sorted(
            _flatten(
                cells(rec, direct & (rec.group != "neutral"), ["source", "group", "mapping"]),
                ("system", "group", "mapping"),
            ),
            orders,
        ),
        "flipped": _sorted(
            _flatten(cells(rec, condition != "", ["source", condition]), ("system", "condition")),
            orders,
        ),
        "flipped_by_dataset": [],
        "agreement": _agreement(rec, everything, datasets),
    }
    for dataset in datasets:
        mask = (condition != "") & (rec.dataset == dataset)
        report["flipped_by_dataset"] += _flatten(
            cells(rec, mask, ["source", "dataset", condition]), ("system", "dataset", "condition")
        )
    report["flipped_by_dataset"] = _sorted(report["flipped_by_dataset"], orders)
    return report


def _conditions(rec: Records) -> np.ndarray:
    condition = np.full(len(rec), "", dtype=object)
    for name, mapping, mode in FLIPPED_CONDITIONS:
        condition[(rec.mapping == mapping) & (rec.mode == mode)] = name
    return condition


def _agreement(rec: Records, mask: np.ndarray, datasets: list[str]) -> list[dict]:
    """Fleiss' kappa of each group of people's answers per dataset and overall (prompts as
    items), with a 95 % percentile bootstrap interval over classification items (a sampled
    item's prompts under every mapping and mode stay together; rng seed 0, 1,000 resamples)."""
    out = []
    for source, _ in PEOPLE_SOURCES:
        people = mask & (rec.source == source)
        if not people.any():
            continue
        for name in [*datasets, "all"]:
            selected = people & (rec.dataset == name) if name != "all" else people
            if selected.any():
                out.append({"source": source, "dataset": name, **_kappa_with_ci(rec, selected)})
    return out


def _kappa_with_ci(rec: Records, selected: np.ndarray) -> dict:
    # Records hold items, not prompts: a prompt is an item under one mapping and one mode.
    rows = np.flatnonzero(selected)
    key = np.asarray(
        [
            f"{i}|{m}|{d}"
            for i, m, d in zip(rec.item[rows], rec.mapping[rows], rec.mode[rows], strict=True)
        ],
        dtype=object,
    )
    prompt_keys, prompt_index = np.unique(key, return_inverse=True)
    counts, kept = agreement_counts(prompt_index, rec.choice[rows], return_kept=True)
    result = fleiss_kappa(counts)
    # Kappa compares the answers to one prompt: a prompt answered once is no item of it.
    note = result.undefined_reason if counts.shape[0] else NO_REPEATED_ANSWERS
    low = high = None
    if counts.shape[0]:
        item_of_prompt = np.zeros(prompt_keys.size, dtype=np.int64)
        item_of_prompt[prompt_index] = rec.item[rows]
        low, high = kappa_ci(
            counts, item_of_prompt[kept], np.random.default_rng(0),
            n_resamples=N_RESAMPLES, level=LEVEL,
        )  # fmt: skip
    return {
        "kappa": result.kappa,
        "ci_low": low,
        "ci_high": high,
        "items": result.items,
        "raters": result.raters,
        "raw_agreement": result.raw_agreement,
        "note": note,
    }


HUMAN_ANSWER_COLUMNS = [
    "study", "prompt", "dataset", "item", "mapping", "mode", "annotator", "people", "platform",
    "word", "expected_word", "seconds", "platform_hit_id", "platform_assignment_id", "status",
    "work_status", "answered_at",
]  # fmt: skip


def human_answers_raw(*, evaluation_set: EvaluationSet, scope: IdentityScope = OPERATOR):
    """Yield the header and one row per person's answer, counted or not: `work_status` says
    whether it counts in the report and why not (rejected, worker blocked, not confirmed).
    A crowd worker is named as `scope` lets its viewer see them (a pseudonym otherwise)."""
    answers = _human_answers_all(evaluation_set)
    statuses = human_answer_statuses(answers)
    yield HUMAN_ANSWER_COLUMNS
    rows = answers.select_related(
        "study", "annotator", "prompt__item__dataset", "prompt__mapping"
    ).order_by("study_id", "prompt_id", "id")
    for a in rows.iterator(chunk_size=2000):
        crowd = a.annotator.kind == AnnotatorKind.CROWD
        yield [
            a.study.name, a.prompt_id, a.prompt.item.dataset.name, a.prompt.item.position,
            a.prompt.mapping.name, a.prompt.mode, scope.name_of(a.annotator),
            "crowd" if crowd else "in-house", a.annotator.platform if crowd else "",
            a.word, a.prompt.expected_word, "" if a.seconds is None else a.seconds,
            a.platform_hit_id, a.platform_assignment_id, a.status, statuses[a.id],
            a.created_at.isoformat(),
        ]  # fmt: skip


CACHE_SECONDS = 3600


def _version(evaluation_set: EvaluationSet) -> str:
    """Name the state of the set's answers: rows are only added or deleted, and which people's
    answers count (approve, reject, block, a platform's confirmation) is fingerprinted."""
    parts = [
        evaluation_set.pk,
        *counted_human_answers_fingerprint(_human_answers_all(evaluation_set)),
    ]
    for model in (ModelAnswer, HumanAnswer):
        state = model.objects.filter(prompt__evaluation_set=evaluation_set).aggregate(
            n=Count("pk"), last=Max("pk")
        )
        parts += [state["n"], state["last"]]
    runs = SystemRun.objects.filter(evaluation_set=evaluation_set).aggregate(
        n=Count("pk"), last=Max("pk")
    )
    return ":".join(str(p) for p in [*parts, runs["n"], runs["last"]])


def verbalizer_report_cached(*, evaluation_set: EvaluationSet) -> dict:
    """The report, computed once per state of the set's answers (pages draw four figures)."""
    key = f"verbalizer-report:{_version(evaluation_set)}"
    report = cache.get(key)
    if report is None:
        report = verbalizer_report(evaluation_set=evaluation_set)
        cache.set(key, report, CACHE_SECONDS)
    return report
