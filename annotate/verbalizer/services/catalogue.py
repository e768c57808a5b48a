"""Researchers' own datasets and mappings, added from the app's page."""

from __future__ import annotations

from django.db import transaction

from annotate.errors import FieldInputError
from annotate.verbalizer.models import (
    ClassificationDataset,
    Group,
    Mapping,
    MappingKind,
    TaskFamily,
)
from annotate.verbalizer.words import label_words_problem


class CatalogueError(FieldInputError):
    """A dataset or mapping cannot be added as asked."""


@transaction.atomic
def mapping_create(*, group: str, positive_word: str, negative_word: str) -> Mapping:
    """Add a literal mapping named ``positive|negative`` to `group`."""
    positive_word, negative_word = positive_word.strip(), negative_word.strip()
    if group not in Group.values:
        raise CatalogueError(f"group: expected one of {Group.values}", field="group")
    if not positive_word or not negative_word or positive_word == negative_word:
        raise CatalogueError("words: two different, non-empty words are needed")
    problem = label_words_problem(positive_word, negative_word)
    if problem:
        raise CatalogueError(f"words: {problem}")
    if "|" in positive_word + negative_word:
        raise CatalogueError("words: '|' separates the two words in names; use another character")
    name = f"{positive_word}|{negative_word}"
    if Mapping.objects.filter(name=name).exists():
        raise CatalogueError(f"a mapping named {name!r} exists already")
    return Mapping.objects.create(
        name=name, group=group, kind=MappingKind.LITERAL,
        positive_word=positive_word, negative_word=negative_word,
    )  # fmt: skip


@transaction.atomic
def dataset_create(
    *, name: str, family: str, positive_name: str, negative_name: str, description: str = ""
) -> ClassificationDataset:
    """Add an empty dataset; its items come from `import_classification`."""
    name, positive_name, negative_name = name.strip(), positive_name.strip(), negative_name.strip()
    if not name:
        raise CatalogueError("name: required", field="name")
    if family not in TaskFamily.values:
        raise CatalogueError(f"family: expected one of {TaskFamily.values}", field="family")
    if not positive_name or not negative_name or positive_name == negative_name:
        raise CatalogueError("label names: two different, non-empty names are needed")
    problem = label_words_problem(positive_name, negative_name)
    if problem:
        raise CatalogueError(f"label names: {problem}")
    if ClassificationDataset.objects.filter(name=name).exists():
        raise CatalogueError(f"a dataset named {name!r} exists already", field="name")
    return ClassificationDataset.objects.create(
        name=name, family=family, positive_name=positive_name,
        negative_name=negative_name, description=description,
    )  # fmt: skip


@transaction.atomic
def table1_ensure() -> None:
    """Create whatever is missing of the paper's nine datasets and twelve mappings (Table 1).

    The migration adds them; this puts them back where the tables were emptied since (a flushed
    test database, a hand-cleaned install). Existing rows are left as they are.
    """
    from annotate.verbalizer.table1 import DATASETS, MAPPINGS

    for name, family, positive, negative, description in DATASETS:
        ClassificationDataset.objects.get_or_create(
            name=name,
            defaults={"family": family, "positive_name": positive, "negative_name": negative,
                      "description": description},
        )  # fmt: skip
    for position, (name, group, kind, positive, negative) in enumerate(MAPPINGS, start=1):
        Mapping.objects.get_or_create(
            name=name,
            defaults={"group": group, "kind": kind, "positive_word": positive,
                      "negative_word": negative, "position": position},
        )  # fmt: skip
