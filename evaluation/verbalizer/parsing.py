"""Read a label word out of a model's reply (plain Python: no Django import; the normaliser is
annotate.verbalizer.words, which the catalogue uses too).

Both rules compare *normalised* text: lower case, underscores as spaces, runs of white space as
one space, and quotes, asterisks, backticks and trailing sentence punctuation (. , ; : ! ?)
stripped from both ends. The two label words are normalised the same way.

- strict: the normalised reply is exactly one of the two label words.
- lenient (meant for chain of thought): if the reply contains "answer is" or "answer:", the text
  after the *last* such marker must start with one of the label words (the longer word is tried
  first, so "not entailment" is not read as "entailment"); otherwise the reply is read whole, and
  exactly one of the two words must occur in it as a whole word (any number of times). No word,
  or both words, is invalid.

Every function returns POSITIVE (the reply chose the word for the positive label), NEGATIVE, or
INVALID. An invalid reply is neither right nor wrong: reports count it apart.
"""

from __future__ import annotations

import re
from functools import lru_cache

from annotate.verbalizer.words import SPACES, TRAILING, normalise

__all__ = ["INVALID", "NEGATIVE", "POSITIVE", "normalise", "parse_lenient", "parse_strict"]

POSITIVE = 1
NEGATIVE = 0
INVALID = -1

_MARKER = re.compile(r"answer is|answer:")


@lru_cache(maxsize=1024)
def _normalised_word(word: str) -> str:
    return normalise(word)


def parse_strict(reply: str, positive_word: str, negative_word: str) -> int:
    """Return POSITIVE/NEGATIVE when the normalised reply is exactly that word, else INVALID."""
    reply = normalise(reply)
    if reply == _normalised_word(positive_word):
        return POSITIVE
    if reply == _normalised_word(negative_word):
        return NEGATIVE
    return INVALID


@lru_cache(maxsize=256)
def _word_pattern(positive: str, negative: str) -> tuple[re.Pattern, dict[str, int]]:
    words = {positive: POSITIVE, negative: NEGATIVE}
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)"), words


def parse_lenient(reply: str, positive_word: str, negative_word: str) -> int:
    """Return the label word chosen under the lenient rule (see the module docstring)."""
    text = SPACES.sub(" ", reply.lower().replace("_", " "))
    pattern, words = _word_pattern(_normalised_word(positive_word), _normalised_word(negative_word))
    markers = list(_MARKER.finditer(text))
    if markers:
        tail = text[markers[-1].end() :].lstrip(TRAILING + " ")
        match = pattern.match(tail)
        return words[match.group(0)] if match else INVALID
    found = {words[match.group(0)] for match in pattern.finditer(text)}
    return found.pop() if len(found) == 1 else INVALID
