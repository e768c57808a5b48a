"""Evaluation sets: a seeded sample of items per dataset, rendered under every mapping and mode.

The sample is drawn once per dataset with numpy's PCG64 seeded by (seed, dataset name), so the
same items appear under every mapping (groups differ only in the verbalizer) and the same seed
gives the same items again.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
from django.db import transaction
from django.template.defaultfilters import pluralize

from annotate.errors import AnnotateError
from annotate.verbalizer.models import (
    ClassificationDataset,
    ClassificationItem,
    EvaluationSet,
    Group,
    Mapping,
    Mode,
    Prompt,
)
from annotate.verbalizer.services.catalogue import table1_ensure
from annotate.verbalizer.services.templates import CURRENT_VERSION, prompt_render


class SetError(AnnotateError):
    """An evaluation set cannot be built as asked; the message names the argument."""


@dataclass(frozen=True)
class SetSummary:
    evaluation_set: EvaluationSet
    prompts: int

    @property
    def message(self) -> str:
        s = self.evaluation_set
        datasets, mappings, modes = s.datasets.count(), s.mappings.count(), len(s.modes)
        return (
            f"Set {s.name}: {self.prompts:,} prompt{pluralize(self.prompts)} ({datasets} "
            f"dataset{pluralize(datasets)} x {mappings} mapping{pluralize(mappings)} x {modes} "
            f"mode{pluralize(modes)} x up to {s.items_per_dataset} "
            f"item{pluralize(s.items_per_dataset)}, seed {s.seed}, "
            f"templates {s.template_version})."
        )


def mappings_select(spec: str) -> list[Mapping]:
    """Resolve `all`, a group name, or comma-separated mapping names to mappings (in order)."""
    spec = spec.strip()
    if not Mapping.objects.exists():
        table1_ensure()  # first use after the tables were emptied
    if spec == "all":
        return list(Mapping.objects.all())
    if spec in Group.values:
        return list(Mapping.objects.filter(group=spec))
    names = [name.strip() for name in spec.split(",") if name.strip()]
    found = {m.name: m for m in Mapping.objects.filter(name__in=names)}
    unknown = [name for name in names if name not in found]
    if unknown or not names:
        raise SetError(f"--mappings: unknown mapping(s) {unknown}; known: {_known_mappings()}")
    return [found[name] for name in names]


def _known_mappings() -> str:
    return ", ".join(Mapping.objects.values_list("name", flat=True))


def sample_items(dataset: ClassificationDataset, n: int, seed: int) -> list[ClassificationItem]:
    """Return `n` items of `dataset` drawn without replacement (all of them when fewer)."""
    ids = list(dataset.items.order_by("position").values_list("pk", flat=True))
    if n < len(ids):
        rng = np.random.default_rng([seed & 0xFFFFFFFF, zlib.crc32(dataset.name.encode())])
        ids = [ids[i] for i in np.sort(rng.choice(len(ids), size=n, replace=False))]
    by_id = ClassificationItem.objects.in_bulk(ids)
    return [by_id[pk] for pk in ids]


@transaction.atomic
def evaluation_set_create(
    *,
    name: str,
    datasets: list[str],
    items: int,
    seed: int,
    mappings: str = "all",
    modes: list[str] | None = None,
    version: str = CURRENT_VERSION,
    created_by=None,
) -> SetSummary:
    """Create set `name` and its prompts; raise SetError on a bad argument (nothing written)."""
    modes = modes or [Mode.DIRECT]
    if EvaluationSet.objects.filter(name=name).exists():
        raise SetError(f"a set named {name!r} exists already")
    bad_modes = [m for m in modes if m not in Mode.values]
    if bad_modes:
        raise SetError(f"--modes: unknown {bad_modes}; expected {','.join(Mode.values)}")
    if items < 1:
        raise SetError("--items must be at least 1")
    chosen = _datasets(datasets)
    chosen_mappings = mappings_select(mappings)
    evaluation_set = EvaluationSet.objects.create(
        name=name, modes=modes, items_per_dataset=items, seed=seed,
        template_version=version, created_by=created_by,
    )  # fmt: skip
    evaluation_set.datasets.set(chosen)
    evaluation_set.mappings.set(chosen_mappings)
    prompts = []
    for dataset in chosen:
        for item in sample_items(dataset, items, seed):
            for mapping in chosen_mappings:
                prompts.extend(_prompts(evaluation_set, item, dataset, mapping, modes, version))
    Prompt.objects.bulk_create(prompts, batch_size=2000)
    return SetSummary(evaluation_set, len(prompts))


def _datasets(names: list[str]) -> list[ClassificationDataset]:
    found = {d.name: d for d in ClassificationDataset.objects.filter(name__in=names)}
    unknown = [name for name in names if name not in found]
    if unknown or not names:
        raise SetError(f"--dataset: unknown dataset(s) {unknown}")
    empty = [name for name in names if not found[name].items.exists()]
    if empty:
        raise SetError(f"--dataset: no items imported yet in {empty}")
    return [found[name] for name in dict.fromkeys(names)]


def _prompts(evaluation_set, item, dataset, mapping, modes, version) -> list[Prompt]:
    positive, negative = mapping.words_for(dataset)
    item.dataset = dataset
    return [
        Prompt(
            evaluation_set=evaluation_set, item=item, mapping=mapping, mode=mode,
            template_version=version,
            text=prompt_render(
                item=item, positive_word=positive, negative_word=negative, mode=mode,
                version=version,
            ),
            positive_word=positive, negative_word=negative,
            expected_word=positive if item.is_positive else negative,
        )
        for mode in modes
    ]  # fmt: skip
