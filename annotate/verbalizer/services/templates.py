"""Versioned instruction templates (annotate/verbalizer/prompts/<version>.json) and rendering."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from annotate.errors import AnnotateError
from annotate.verbalizer.models import ClassificationItem, Mode

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
CURRENT_VERSION = "v1"


class TemplateError(AnnotateError):
    """An unknown template version or mode."""


@cache
def template_load(version: str = CURRENT_VERSION) -> dict:
    """Return the template file of `version` (cached: the files never change once shipped)."""
    path = PROMPTS_DIR / f"{version}.json"
    if not path.name.startswith("v") or not path.is_file():
        raise TemplateError(f"no instruction templates of version {version!r}")
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("version") != version:
        raise TemplateError(f"{path}: its 'version' field is not {version!r}")
    return data


def prompt_render(
    *,
    item: ClassificationItem,
    positive_word: str,
    negative_word: str,
    mode: str,
    version: str = CURRENT_VERSION,
) -> str:
    """Return the instruction for `item` under the words given, in `mode` (direct or cot)."""
    if mode not in Mode.values:
        raise TemplateError(f"unknown mode {mode!r}; expected one of {Mode.values}")
    templates = template_load(version)
    dataset = item.dataset
    condition = templates["conditions"][dataset.family]
    text_input = templates["inputs"][dataset.family].format_map(
        {"text": item.text, "text_b": item.text_b}
    )
    return templates["modes"][mode].format_map(
        {
            "positive_word": positive_word,
            "negative_word": negative_word,
            "positive_condition": condition.format_map({"name": f'"{dataset.positive_name}"'}),
            "negative_condition": condition.format_map({"name": f'"{dataset.negative_name}"'}),
            "input": text_input,
        }
    )
