"""Read a YES / NO / UNKNOWN label out of a judge's free-text reply.

The rule, in order:
1. The reply's first word (after leading spaces, quotes, asterisks and the like) is "yes" or
   "no", in any case: YES or NO. "Not", "Nothing", "Noted", "Yesterday" are not such words.
2. Otherwise exactly one of the standalone words YES / NO (any case) occurs in the reply: that
   one. A word boundary is required on both sides, so NOT, KNOW, NOTHING, CANNOT never count.
3. Otherwise (empty, neither word, or both words): UNKNOWN.

The official InFoBench script differs in step 1 (it accepts any reply starting with the letters
"no", e.g. "Not really") and step 2 (it matches the capitals YES / NO anywhere, so "NOT" counts
as NO); those are the misreadings this rule avoids.
"""

from __future__ import annotations

import re

NO, YES, UNKNOWN = 0, 1, 2  # the values of annotate.models.LabelValue

_FIRST_WORD = re.compile(r"^[\W_]*([A-Za-z]+)")
_STANDALONE = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_NUMBERED_LINE = re.compile(r"^\W*(?:q(?:uestion)?\s*)?(\d+)\s*[.):\-]\s*(.*)$", re.IGNORECASE)


def parse_answer(reply: str | None) -> int:
    """Return NO (0), YES (1) or UNKNOWN (2) for one reply, by the rule in the module docstring."""
    text = (reply or "").strip()
    first = _FIRST_WORD.match(text)
    if first and first.group(1).lower() in ("yes", "no"):
        return YES if first.group(1).lower() == "yes" else NO
    found = {word.lower() for word in _STANDALONE.findall(text)}
    if found == {"yes"}:
        return YES
    if found == {"no"}:
        return NO
    return UNKNOWN


def parse_numbered_answers(reply: str | None, count: int) -> list[int]:
    """Return one label per question for an all-in-one reply ("1. YES" lines).

    Lines numbered 1..count are read with parse_answer; a question with no line of its own is
    UNKNOWN. When no line is numbered and there are exactly `count` non-empty lines, they are
    taken in order.
    """
    lines = [line.strip() for line in (reply or "").splitlines() if line.strip()]
    by_number: dict[int, int] = {}
    for line in lines:
        match = _NUMBERED_LINE.match(line)
        if match and 1 <= int(match.group(1)) <= count:
            by_number.setdefault(int(match.group(1)), parse_answer(match.group(2)))
    if not by_number and len(lines) == count:
        return [parse_answer(line) for line in lines]
    return [by_number.get(number, UNKNOWN) for number in range(1, count + 1)]
