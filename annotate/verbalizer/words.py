"""How label words are compared (plain Python: no Django import).

One normaliser for both sides: the report's parsing rules (evaluation/verbalizer/parsing.py)
read replies with it, and the catalogue refuses two label words that it cannot tell apart.
"""

from __future__ import annotations

import re

SPACES = re.compile(r"\s+")
EDGE = " \"'`*“”‘’«»"
TRAILING = EDGE + ".,;:!?"


def normalise(text: str) -> str:
    """Return `text` lower-cased, with underscores as spaces, spaces collapsed, edges stripped."""
    text = SPACES.sub(" ", text.lower().replace("_", " "))
    return text.strip(EDGE).rstrip(TRAILING).strip(EDGE)


def label_words_problem(positive: str, negative: str) -> str | None:
    """Say why two label words cannot stand for the two labels, or None when they can: each
    must keep something once normalised, and the two must differ once normalised ("Foo" and
    "foo" are one word to the parser, so no reply could ever be read)."""
    first, second = normalise(positive), normalise(negative)
    if not first or not second:
        return "two non-empty words are needed (quotes, * and ` at the ends do not count)"
    if first == second:
        return (
            f"{positive!r} and {negative!r} are the same word to the reply parser (case, "
            "underscores and punctuation at the ends are ignored); choose two different words"
        )
    return None
