"""The answer history of a session (paper §2.2), as plain functions.

The previous answer a_{t-1} of turn t is the last entry of the history. A turn adds its edit a_t'
when the annotator edited, else its answer a_t, except that a bad answer that was not edited is
removed from the history: the next turn then revises the same previous answer again.
"""

from __future__ import annotations

from collections.abc import Iterable


def next_previous_answer(previous: str, *, answer: str, edited: str, rating: str) -> str:
    """Return the previous answer of the turn after one with this answer, edit and rating.

    An "edit" equal to the answer is no edit (the paper's Figure 3, line 17: a_t != a_t'), so
    a bad answer given back unchanged as its own edit (an imported answer_2) is still dropped.
    """
    if edited and edited != answer:
        return edited
    if rating == "bad":
        return previous
    return answer


def previous_answers(initial: str, turns: Iterable[tuple[str, str, str]]) -> list[str]:
    """Return a_{t-1} for each (answer, edited, rating) turn in order, starting from a0."""
    result, previous = [], initial
    for answer, edited, rating in turns:
        result.append(previous)
        previous = next_previous_answer(previous, answer=answer, edited=edited, rating=rating)
    return result
