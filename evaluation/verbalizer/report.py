"""The verbalizer report of one evaluation set: every table and figure reads from it.

Model replies are parsed here (evaluation.verbalizer.parsing), so a change of rule needs no new
run. People's answers count as sources of two kinds: ``human`` (every answer) and
``human-majority`` (one majority answer per prompt; a tie is invalid), pooling in-house
annotators and crowd workers; ``human-crowd``/``human-crowd-majority`` hold the crowd workers'
alone, and, when a set has both, ``human-inhouse``/``human-inhouse-majority`` the in-house
annotators' alone. Only answers that count under annotate.selectors.results are read (a crowd
answer the platform never confirmed, a rejected one or a blocked worker's is left out).
People answer only their studies' prompts, so every model is scored twice: on every prompt of
the set it answered (rows whose `prompts` is `set`) and on exactly the prompts the people
answered (`people`, or `in-house`/`crowd` when theirs differ), beside them
(evaluation.verbalizer.slices).
Conventions: evaluation.verbalizer.scoring and docs/verbalizer.md.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db.models import Count, Max, Value

from annotate.models import AnnotatorKind, System
from annotate.selectors.fingerprints import stamps_sum
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
    HumanStudy,
    ModelAnswer,
    Prompt,
    SystemRun,
)
from evaluation.caching import cache_get_or_build, computation_version
from evaluation.selectors.snapshot import read_snapshot
from evaluation.stats import kappa as kappa_stats
from evaluation.stats.kappa import fleiss_kappa, kappa_interval
from evaluation.verbalizer.parsing import INVALID, NEGATIVE, POSITIVE, parse_lenient, parse_strict
from evaluation.verbalizer.scoring import (
    LEVEL,
    RULES,
    Records,
    agreement_counts,
    cells,
    majority_codes,
)
from evaluation.verbalizer.slices import (
    PROMPTS_ORDER,
    SET_PROMPTS,
    SLICE_LABELS,
    slice_summary,
)

HUMAN = "human"
HUMAN_MAJORITY = "human-majority"
HUMAN_INHOUSE = "human-inhouse"
HUMAN_INHOUSE_MAJORITY = "human-inhouse-majority"
HUMAN_CROWD = "human-crowd"
HUMAN_CROWD_MAJORITY = "human-crowd-majority"
NO_REPEATED_ANSWERS = "no prompt has two answers or more"
# Why a defined kappa has no interval (kappa_interval's codes), in the row's note: every
# export then says it beside its n/a, null or empty interval.
NO_KAPPA_INTERVAL = {
    kappa_stats.NO_INTERVAL_ONE_CLUSTER: (
        "its prompts are all of one item, which every resample draws"
    ),
    kappa_stats.NO_INTERVAL_NO_SPREAD: (
        "every resample gives the same kappa (each item's prompts answered alike: all in full "
        "agreement, or all split the same way), so the bootstrap measures no spread, which is "
        "not certainty"
    ),
    kappa_stats.NO_INTERVAL_UNDEFINED: "fewer than half of the resamples define kappa",
}
# (answers, majority) per group of people, in the order tables and figures show them.
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
# The slice each people source's prompts form when they differ from everyone's.
SLICE_OF = {HUMAN: "people", HUMAN_INHOUSE: "in-house", HUMAN_CROWD: "crowd"}


def system_label(system: str, prompts: str) -> str:
    """Name a row's system as tables and figures show it: a model scored on the prompts some
    people answered says so ("gpt-4, on people's prompts"); other rows show the name alone."""
    if prompts == SET_PROMPTS or system in PEOPLE:
        return system
    return f"{system}, on {SLICE_LABELS[prompts]}"


def row_order(rows: list[dict]) -> list[tuple[str, str]]:
    """Return the (system, prompts) pairs of a report table in its order: every model on the
    set's prompts, then per slice the models on it and the people who answered it."""
    return list(dict.fromkeys((r["system"], r["prompts"]) for r in rows))


def _prompt_table(evaluation_set: EvaluationSet) -> dict[int, tuple]:
    rows = Prompt.objects.filter(evaluation_set=evaluation_set).values_list(
        "id", "item_id", "item__dataset__name", "mapping__group", "mapping__name", "mode",
        "positive_word", "negative_word", "expected_word",
    )  # fmt: skip
    return {row[0]: row[1:] for row in rows}


@dataclass
class _Coded:
    """Answers coded for scoring: who answered, which prompt, and per rule 1/0/-1 (positive
    word, negative word, invalid), with the prompts they count among (`set` or a slice)."""

    source: np.ndarray
    prompt: np.ndarray
    codes: dict[str, np.ndarray]
    prompts: str = SET_PROMPTS

    def where(self, mask: np.ndarray, prompts: str, *, source: str | None = None) -> _Coded:
        """The answers of `mask`, counted among `prompts` (and all named `source` if given)."""
        codes = {rule: values[mask] for rule, values in self.codes.items()}
        prompt = self.prompt[mask]
        sources = self.source[mask] if source is None else np.full(prompt.size, source, object)
        return _Coded(sources, prompt, codes, prompts)


@dataclass
class _Slice:
    """The prompts one group of people answered (`people`: the sources resting on them)."""

    name: str
    people: list[str]
    prompt_ids: np.ndarray
    studies: list[str]


def _records(evaluation_set: EvaluationSet) -> tuple[Records, list[_Slice], _Coded, dict]:
    """Return every answer as records (each model answer once among the set's prompts and once
    more per people's slice it falls in), the slices, the models' coded answers and the prompt
    table."""
    prompts = _prompt_table(evaluation_set)
    models = _model_codes(evaluation_set, prompts)
    people, crowd, study = _human_codes(evaluation_set, prompts)
    blocks, slices = [models], {}
    for (source, majority_source), chosen in _people_groups(crowd):
        ids = np.unique(people.prompt[chosen])
        everyone = slices.get(SLICE_OF[HUMAN])
        if everyone is not None and np.array_equal(ids, everyone.prompt_ids):
            name = everyone.name  # the same prompts as everyone's: one slice
        else:
            name = SLICE_OF[source]
            studies = sorted(set(study[chosen].tolist()))
            slices[name] = _Slice(name, [], ids, studies)
        slices[name].people += [source, majority_source]
        answers = people.where(chosen, name, source=source)
        majority_prompt, majority_code = majority_codes(answers.prompt, answers.codes["lenient"])
        majority = _Coded(
            np.full(majority_prompt.size, majority_source, dtype=object), majority_prompt,
            {rule: majority_code for rule in RULES}, name,
        )  # fmt: skip
        blocks += [answers, majority]
    for found in slices.values():
        blocks.append(models.where(np.isin(models.prompt, found.prompt_ids), found.name))
    return _to_records(prompts, blocks), list(slices.values()), models, prompts


def _model_codes(evaluation_set: EvaluationSet, prompts: dict[int, tuple]) -> _Coded:
    """Parse every model reply under both rules (a reply repeated on a prompt's words once)."""
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
    return _Coded(
        np.asarray(sources, dtype=object),
        np.asarray(prompt_ids, dtype=np.int64),
        {rule: np.asarray(values, dtype=np.int64) for rule, values in codes.items()},
    )


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


def _human_codes(evaluation_set, prompts) -> tuple[_Coded, np.ndarray, np.ndarray]:
    """Return the counted answers coded 1/0/-1 (their source named later, per group of people),
    whether each is a crowd worker's, and the name of its study."""
    answers = _human_answers(evaluation_set).values_list(
        "prompt_id", "word", "annotator__kind", "study__name"
    )
    ids, values, crowd, studies = [], [], [], []
    for prompt_id, word, kind, study in answers:
        positive, negative = prompts[prompt_id][5:7]
        ids.append(prompt_id)
        values.append(POSITIVE if word == positive else NEGATIVE if word == negative else INVALID)
        crowd.append(kind == AnnotatorKind.CROWD)
        studies.append(study)
    code = np.asarray(values, dtype=np.int64)
    return (
        _Coded(np.full(len(ids), "", dtype=object), np.asarray(ids, dtype=np.int64),
               {rule: code for rule in RULES}),
        np.asarray(crowd, dtype=bool),
        np.asarray(studies, dtype=object),
    )  # fmt: skip


def _to_records(prompts: dict[int, tuple], blocks: list[_Coded]) -> Records:
    prompt_ids = np.concatenate([b.prompt for b in blocks]).tolist() if blocks else []
    info = [prompts[p] for p in prompt_ids]
    column = list(zip(*info, strict=True)) if info else [()] * 8
    expected = np.asarray(
        [POSITIVE if row[7] == row[5] else NEGATIVE for row in info], dtype=np.int64
    )
    parsed = {
        rule: np.concatenate([b.codes[rule] for b in blocks]).astype(np.int64) for rule in RULES
    }
    return Records(
        source=np.concatenate([b.source for b in blocks]).astype(object),
        prompts=np.concatenate([np.full(b.prompt.size, b.prompts, dtype=object) for b in blocks]),
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


def bootstrap_settings() -> dict:
    """The bootstrap behind every interval of the report, as the settings give it (as the
    InFoBench and KIWI reports read them), kept in the report so its exports can say it."""
    return {
        "resamples": settings.REPORT_BOOTSTRAP_RESAMPLES,
        "seed": settings.REPORT_BOOTSTRAP_SEED,
        "level": LEVEL,
    }


@dataclass(frozen=True)
class _Read:
    """What the report is computed from, read as of one moment (_report_read)."""

    rec: Records
    prompts: dict[int, tuple]  # _prompt_table
    systems: list[dict]
    datasets: list[str]
    orders: dict[str, list]
    slices: list[dict]  # _slice_summaries


def _report_read(evaluation_set: EvaluationSet) -> _Read:
    """Read the set's prompts, the models' and people's answers, the systems' runs and the
    studies' prompts in one snapshot (read_snapshot): separate queries, between which an
    answer given or reviewed, or a run finished, would show in one part of the report and not
    in another. Only the parsing of what is read runs in it, no table."""
    with read_snapshot():
        rec, slices, models, prompts = _records(evaluation_set)
        systems = _system_order(evaluation_set, set(rec.source.tolist()))
        mapping_order = list(
            evaluation_set.mappings.order_by("position").values_list("name", flat=True)
        )
        datasets = list(evaluation_set.datasets.order_by("name").values_list("name", flat=True))
        orders = {
            "prompts": list(PROMPTS_ORDER),
            "system": [s["system"] for s in systems],
            "dataset": datasets,
            "group": list(GROUP_ORDER),
            "mapping": mapping_order,
            "mode": ["direct", "cot"],
            "condition": [c[0] for c in FLIPPED_CONDITIONS],
        }
        summaries = _slice_summaries(evaluation_set, slices, models, prompts, systems, orders)
    return _Read(rec, prompts, systems, datasets, orders, summaries)


def verbalizer_report(*, evaluation_set: EvaluationSet) -> dict:
    """Compute the whole report of `evaluation_set` (see the module docstring)."""
    read = _report_read(evaluation_set)
    rec, datasets, orders = read.rec, read.datasets, read.orders
    bootstrap = bootstrap_settings()

    def table(mask: np.ndarray, *keys) -> list[dict]:
        """One row per system, prompts and `keys` (names, or (name, column) pairs)."""
        names = [k if isinstance(k, str) else k[0] for k in keys]
        columns = [k if isinstance(k, str) else k[1] for k in keys]
        found = cells(
            rec, mask, ["source", "prompts", *columns],
            rng_seed=bootstrap["seed"], n_resamples=bootstrap["resamples"],
        )  # fmt: skip
        return _flatten(found, ("system", "prompts", *names))

    direct = rec.mode == "direct"
    condition = _conditions(rec)
    flipped = ("condition", condition)
    report = {
        "set": evaluation_set.name,
        "template_version": evaluation_set.template_version,
        "items_per_dataset": evaluation_set.items_per_dataset,
        "seed": evaluation_set.seed,
        "systems": read.systems,
        "slices": read.slices,
        "rows": [],
        "groups": table(direct, "group"),
        "mappings": table(direct & (rec.group != "neutral"), "group", "mapping"),
        "flipped": table(condition != "", flipped),
        "flipped_by_dataset": [],
        "agreement": _agreement(rec, np.ones(len(rec), dtype=bool), datasets, bootstrap),
        "bootstrap": bootstrap,
        "dataset_items": _dataset_items(read.prompts, datasets),
    }
    for dataset in datasets:
        of_dataset = rec.dataset == dataset
        report["rows"] += table(of_dataset, "dataset", "group", "mapping", "mode")
        report["flipped_by_dataset"] += table((condition != "") & of_dataset, "dataset", flipped)
    for name in ("rows", "groups", "mappings", "flipped", "flipped_by_dataset"):
        report[name] = _sorted(report[name], orders)
    return report


def _slice_summaries(evaluation_set, slices, models, prompts, systems, orders) -> list[dict]:
    """Describe each people's slice: where it lies in the set and which models answered it."""
    if not slices:
        return []
    published: dict[str, set[int]] = {}
    through = HumanStudy.prompts.through.objects.filter(humanstudy__evaluation_set=evaluation_set)
    for study, prompt_id in through.values_list("humanstudy__name", "prompt_id"):
        published.setdefault(study, set()).add(prompt_id)
    set_items: dict[str, set[int]] = {}
    for item, dataset, *_ in prompts.values():
        set_items.setdefault(dataset, set()).add(item)
    model_names = [s["system"] for s in systems if s["system"] not in PEOPLE]
    out = []
    for found in slices:
        answered = models.where(np.isin(models.prompt, found.prompt_ids), found.name)
        out.append(
            slice_summary(
                name=found.name, people=found.people, studies=found.studies,
                prompts=[(prompts[p][0], prompts[p][1], prompts[p][3], prompts[p][4])
                         for p in found.prompt_ids.tolist()],
                published_count=len(set().union(*(published.get(s, ()) for s in found.studies))),
                set_prompt_count=len(prompts),
                set_items={d: len(items) for d, items in set_items.items()},
                orders=orders,
                models={m: int(np.unique(answered.prompt[answered.source == m]).size)
                        for m in model_names},
            )
        )  # fmt: skip
    return out


def _conditions(rec: Records) -> np.ndarray:
    condition = np.full(len(rec), "", dtype=object)
    for name, mapping, mode in FLIPPED_CONDITIONS:
        condition[(rec.mapping == mapping) & (rec.mode == mode)] = name
    return condition


def _dataset_items(prompts: dict[int, tuple], datasets: list[str]) -> dict[str, int]:
    """How many items of each dataset the set holds: intervals draw items within their dataset,
    so one of a single item has none (the exports say so)."""
    items: dict[str, set[int]] = {name: set() for name in datasets}
    for item, dataset, *_ in prompts.values():
        items.setdefault(dataset, set()).add(item)
    return {name: len(found) for name, found in items.items()}


def _agreement(rec: Records, mask: np.ndarray, datasets: list[str], bootstrap: dict) -> list[dict]:
    """Fleiss' kappa of each group of people's answers per dataset and overall (prompts as
    items), with a 95 % percentile bootstrap interval over classification items (a sampled
    item's prompts under every mapping and mode stay together; `bootstrap`'s seed and
    resamples)."""
    out = []
    for source, _ in PEOPLE_SOURCES:
        people = mask & (rec.source == source)
        if not people.any():
            continue
        for name in [*datasets, "all"]:
            selected = people & (rec.dataset == name) if name != "all" else people
            if selected.any():
                kappa = _kappa_with_ci(rec, selected, bootstrap)
                out.append({"source": source, "dataset": name, **kappa})
    return out


def _kappa_with_ci(rec: Records, selected: np.ndarray, bootstrap: dict) -> dict:
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
    left_out = prompt_keys.size - counts.shape[0]
    if counts.shape[0] and left_out and not note:  # else "prompts" reads short with no reason
        note = (
            f"{left_out} of the {prompt_keys.size} prompts answered left out: kappa reads those "
            f"with {result.raters} answers each, the most common number"
        )
    low = high = None
    if counts.shape[0]:
        item_of_prompt = np.zeros(prompt_keys.size, dtype=np.int64)
        item_of_prompt[prompt_index] = rec.item[rows]
        found = kappa_interval(
            counts, item_of_prompt[kept], np.random.default_rng(bootstrap["seed"]),
            n_resamples=bootstrap["resamples"], level=bootstrap["level"],
        )  # fmt: skip
        low, high = found.low, found.high
        if found.missing and result.kappa is not None:  # an undefined kappa's note says why
            why = f"95% CI n/a: {NO_KAPPA_INTERVAL[found.missing]}"
            note = f"{note}; {why}" if note else why
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
    "work_status", "answered_at", "item_source_id", "changed_from", "changed_at", "reject_reason",
]  # fmt: skip


def human_answers_raw(*, evaluation_set: EvaluationSet, scope: IdentityScope = OPERATOR):
    """Yield the header and one row per person's answer, counted or not: `work_status` says
    whether it counts in the report and why not (rejected, worker blocked, not confirmed);
    `item` is the item's position in its imported file, `item_source_id` the id the file gave
    it (blank when it gave none); `changed_from`/`changed_at` the word first chosen and when
    an in-house annotator changed it (blank when unchanged; `word` is the answer that counts);
    `reject_reason` why an admin rejected it, as typed (blank otherwise). A crowd worker is
    named as `scope` lets its viewer see them (a pseudonym otherwise)."""
    answers = _human_answers_all(evaluation_set)
    statuses = human_answer_statuses(answers)
    yield HUMAN_ANSWER_COLUMNS
    rows = answers.select_related(
        "study", "annotator", "prompt__item__dataset", "prompt__mapping"
    ).order_by("study_id", "prompt_id", "id")
    for a in rows.iterator(chunk_size=2000):
        if a.id not in statuses:  # given after the statuses were read: asked now
            statuses.update(human_answer_statuses(answers.filter(pk=a.id)))
        crowd = a.annotator.kind == AnnotatorKind.CROWD
        yield [
            a.study.name, a.prompt_id, a.prompt.item.dataset.name, a.prompt.item.position,
            a.prompt.mapping.name, a.prompt.mode, scope.name_of(a.annotator),
            "crowd" if crowd else "in-house", a.annotator.platform if crowd else "",
            a.word, a.prompt.expected_word, "" if a.seconds is None else a.seconds,
            a.platform_hit_id, a.platform_assignment_id, a.status, statuses[a.id],
            a.created_at.isoformat(), a.prompt.item.external_id, a.changed_from,
            a.changed_at.isoformat() if a.changed_at else "", a.reject_reason,
        ]  # fmt: skip


CACHE_SECONDS = 3600


def _version(evaluation_set: EvaluationSet) -> str:
    """Name the state of the set's answers and studies: rows are only added or deleted, an
    in-house answer's word changes once at most (counted, its stamps summed), and which
    people's answers count (approve, reject, block, a platform's confirmation) is
    fingerprinted."""
    parts = [
        evaluation_set.pk,
        *counted_human_answers_fingerprint(_human_answers_all(evaluation_set)),
    ]
    models_state = ModelAnswer.objects.filter(prompt__evaluation_set=evaluation_set).aggregate(
        n=Count("pk"), last=Max("pk")
    )
    people = HumanAnswer.objects.filter(prompt__evaluation_set=evaluation_set).aggregate(
        n=Count("pk"), last=Max("pk"), changed=Count("changed_at"), stamps=stamps_sum("changed_at")
    )
    parts += [models_state["n"], models_state["last"], people["n"], people["last"]]
    parts += [people["changed"], people["stamps"]]
    runs = SystemRun.objects.filter(evaluation_set=evaluation_set).aggregate(
        n=Count("pk"), last=Max("pk")
    )
    # The studies' prompts: the sentence under the tables says how many of them people answered.
    published = HumanStudy.prompts.through.objects.filter(
        humanstudy__evaluation_set=evaluation_set
    ).aggregate(n=Count("pk"), last=Max("pk"))
    parts += [runs["n"], runs["last"], published["n"], published["last"]]
    return ":".join(str(p) for p in [*parts, _names_shown(evaluation_set)])


def _names_shown(evaluation_set: EvaluationSet) -> str:
    """Hash the names the report shows and groups by, each editable after the answers came in
    (a dataset and a human study in the admin, a system in the InFoBench admin): one query."""
    answered = ModelAnswer.objects.filter(prompt__evaluation_set=evaluation_set)
    datasets = evaluation_set.datasets.values_list(Value("dataset"), "pk", "name")
    studies = HumanStudy.objects.filter(evaluation_set=evaluation_set).values_list(
        Value("study"), "pk", "name"
    )
    systems = System.objects.filter(pk__in=answered.values("system_id")).values_list(
        Value("system"), "pk", "name"
    )
    names = sorted(datasets.order_by().union(studies.order_by(), systems.order_by(), all=True))
    return hashlib.sha256(repr(names).encode()).hexdigest()[:24]


def report_version(evaluation_set: EvaluationSet) -> str:
    """Name the report of the set's answers as they stand: what its cache keys (and those of the
    figures drawn from it) are made of."""
    # v2: cells average their (dataset, mapping) pieces (scoring.py); a report cached by the
    # pooling code is not served again. v3: intervals drawn within each dataset.
    # computation_version: any deploy changing the code, any change of a report's setting
    # (evaluation.caching).
    return f"v3:{computation_version()}:{_version(evaluation_set)}"


def verbalizer_report_cached(*, evaluation_set: EvaluationSet) -> dict:
    """The report, computed once per state of the set's answers (pages draw four figures), and
    stored under the version read in the snapshot of its reads (cache_get_or_build)."""

    def read_key() -> str:
        return f"verbalizer-report:{report_version(evaluation_set)}"

    return cache_get_or_build(
        key=read_key(),
        read_key=read_key,
        build=lambda: verbalizer_report(evaluation_set=evaluation_set),
        timeout=CACHE_SECONDS,
    )
