"""Disagreement levels of questions across systems (paper appendix, Figure 9)."""

from __future__ import annotations

import numpy as np

from evaluation.stats.codes import NO, YES


def disagreement_levels(labels: np.ndarray) -> np.ndarray:
    """Return each question's disagreement level: how many systems' outputs split the annotators.

    `labels` has shape (n_questions, n_systems, n_annotators) with label codes, padded with
    MISSING. One system's output for a question "has disagreement" when its YES/NO votes are
    not unanimous: at least one annotator said YES and another said NO. UNKNOWN is not a vote
    (Figure 9 uses the binary YES/NO evaluations), so an annotator answering UNKNOWN never
    makes an output diverge, and an output with fewer than two YES/NO votes has none. The
    level is the number of such outputs, 0..n_systems. Returns int64 of shape (n_questions,).
    """
    labels = np.asarray(labels)
    if labels.ndim != 3:
        raise ValueError(
            f"labels must have shape (n_questions, n_systems, n_annotators); got {labels.shape}"
        )
    split = (labels == YES).any(axis=2) & (labels == NO).any(axis=2)
    return np.count_nonzero(split, axis=1).astype(np.int64)


def level_distribution(levels: np.ndarray, n_systems: int) -> np.ndarray:
    """Count the questions at each disagreement level 0..n_systems (int64, length n_systems+1)."""
    levels = np.asarray(levels)
    if levels.size and (levels.min() < 0 or levels.max() > n_systems):
        raise ValueError(f"levels must lie in 0..{n_systems}; got {levels.min()}..{levels.max()}")
    return np.bincount(levels.reshape(-1), minlength=n_systems + 1).astype(np.int64)


def judged_levels(
    yes: np.ndarray, no: np.ndarray, question: np.ndarray, n_questions: int
) -> np.ndarray:
    """Return the disagreement level of each question that has an output with two YES/NO votes.

    The votes are given per output: output i is one system's output for question
    `question[i]` (0..n_questions-1), with `yes[i]` YES and `no[i]` NO votes; no two outputs
    share a question and a system. The rule is `disagreement_levels`'s (an output splits when
    both counts are positive, the level counts the question's split outputs), applied to the
    questions where some output has at least two YES/NO votes, as Figure 9 counts them.
    Returns int64 levels, one per such question, in question order.
    """
    yes, no, question = np.asarray(yes), np.asarray(no), np.asarray(question)
    if not yes.shape == no.shape == question.shape or yes.ndim != 1:
        raise ValueError(
            f"yes, no and question must be aligned 1-D arrays; got {yes.shape}, {no.shape}, "
            f"{question.shape}"
        )
    levels = np.bincount(question[(yes > 0) & (no > 0)], minlength=n_questions)
    judged = np.bincount(question[yes + no >= 2], minlength=n_questions) > 0
    return levels[judged].astype(np.int64)


def reachable_level(yes: np.ndarray, no: np.ndarray, question: np.ndarray) -> int:
    """Return the highest disagreement level any question can reach: the most outputs of one
    question with two YES/NO votes (an output splits only with a YES and a NO), 0 when none.

    Arguments as `judged_levels`'s. A benchmark's system that nobody labelled twice adds no
    output here, so a level counting it cannot occur.
    """
    yes, no, question = np.asarray(yes), np.asarray(no), np.asarray(question)
    judged = question[yes + no >= 2]
    return int(np.bincount(judged).max()) if judged.size else 0
