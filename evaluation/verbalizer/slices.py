"""The prompts people answered, described, so models can be shown on exactly those prompts.

People answer a human study's slice of a set (some datasets, mappings, modes and items); a
model's own rows pool every prompt of the set it answered. The report therefore scores each
model a second time on each slice people answered (rows whose `prompts` is the slice's name
instead of `set`), and says in one sentence which slice that is. Plain Python: no Django.
"""

from __future__ import annotations

SET_PROMPTS = "set"
# The slices, in the order tables and figures show them: everyone's prompts, then those of
# in-house annotators or crowd workers alone when theirs differ from everyone's.
SLICE_LABELS = {
    "people": "people's prompts",
    "in-house": "in-house annotators' prompts",
    "crowd": "crowd workers' prompts",
}
SLICE_WHO = {"people": "people", "in-house": "in-house annotators", "crowd": "crowd workers"}
PROMPTS_ORDER = (SET_PROMPTS, *SLICE_LABELS)
SLICE_COLUMNS = [
    "prompts", "people", "studies", "prompt_count", "published_count", "set_prompt_count",
    "datasets", "items", "mappings", "modes", "models", "note",
]  # fmt: skip


def slice_summary(
    *,
    name: str,
    people: list[str],
    studies: list[str],
    prompts: list[tuple[int, str, str, str]],
    published_count: int,
    set_prompt_count: int,
    set_items: dict[str, int],
    orders: dict[str, list],
    models: dict[str, int],
) -> dict:
    """Describe slice `name`: `prompts` are its (item, dataset, mapping, mode) rows, `models`
    how many of them each model answered (in the report's system order)."""

    def ordered(column: int, key: str) -> list:
        present = {p[column] for p in prompts}
        return [v for v in orders[key] if v in present] + sorted(present - set(orders[key]))

    datasets = ordered(1, "dataset")
    summary = {
        "prompts": name,
        "label": SLICE_LABELS[name],
        "people": people,
        "studies": studies,
        "prompt_count": len(prompts),
        "published_count": published_count,
        "set_prompt_count": set_prompt_count,
        "datasets": datasets,
        "items": {d: len({p[0] for p in prompts if p[1] == d}) for d in datasets},
        "set_items": {d: set_items.get(d, 0) for d in datasets},
        "mappings": ordered(2, "mapping"),
        "modes": ordered(3, "mode"),
        "models": models,
    }
    summary["note"] = slice_note(summary)
    return summary


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _joined(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _names(word: str, names: list[str], *, plural: str = "", quoted: bool = False) -> str:
    if quoted:  # a study's name may hold a colon or a semicolon of its own
        names = [f"\u201c{name}\u201d" for name in names]
    return f"{word if len(names) == 1 else plural or word + 's'} {_joined(names)}"


def slice_note(summary: dict) -> str:
    """The sentence under every table that puts people beside models: which prompts the people
    answered, how the model rows on them are scored, and which models answered them."""
    n, studies = summary["prompt_count"], summary["studies"]
    published = ""
    if summary["published_count"] != n:
        published = f" (of the {summary['published_count']} " + (
            "it publishes)" if len(studies) == 1 else "they publish)"
        )
    people = _joined(summary["people"])
    return (
        f"The rows {people} rest on the {_count(n, 'prompt')} {SLICE_WHO[summary['prompts']]} "
        f"answered in {_names('study', studies, plural='studies', quoted=True)}{published}: {_where(summary)}. Rows \u201cmodel, on "
        f"{summary['label']}\u201d score each model on exactly these prompts, with the same "
        f"rules and bootstrap as every row; the other model rows pool every prompt of the "
        f"set's {summary['set_prompt_count']} that the model answered. "
        + _coverage(summary["models"], n)
    )


def _where(summary: dict) -> str:
    datasets = ", ".join(
        f"{d} ({summary['items'][d]} of the set's {_count(summary['set_items'][d], 'item')})"
        for d in summary["datasets"]
    )
    mappings, modes = _names("mapping", summary["mappings"]), _names("mode", summary["modes"])
    return f"{datasets}; {mappings}; {modes}"


def _coverage(models: dict[str, int], n: int) -> str:
    if not any(models.values()):
        return (
            "No model answered these prompts, so no model row stands beside these people on them."
        )
    return "; ".join(f"{model} answered {_share(k, n)}" for model, k in models.items()) + "."


def _share(k: int, n: int) -> str:
    if k == 0:
        return "none"
    if k == n:
        return {1: "it", 2: "both"}.get(n, f"all {n}")
    return f"{k} of them"
