"""Shared fixtures of the evaluation tests: a small benchmark whose report was computed by hand.

Two instructions (i1 easy with 2 questions, i2 hard with 3), two systems (alpha, beta), three
experts, three crowd workers on i1 through assignments, one LLM judge, direct scores from the
experts. The labels (Y YES, N NO, U UNKNOWN), one string per response in question order:

            i1 alpha  i1 beta   i2 alpha  i2 beta
  expert-1    YY        YN        YYY       NNY
  expert-2    YN        NN        YYN       NNN
  expert-3    YU        YN        YYY       YNN     → majority: Y? | YN | YYY | NNN (? = tie)
  judge       YN        YY        YYN       NUN
  crowd-1     YY        NN        (display order alpha, beta)
  crowd-2     YN        YN        (display order beta, alpha)
  crowd-3     YY        NN        (display order alpha, beta) → majority: YY | NN
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from annotate.models import AnnotatorKind, AssignmentStatus, ConstraintType, LabelValue, Subset
from tests.factories import (
    AnnotatorFactory,
    AssignmentFactory,
    BatchFactory,
    BenchmarkFactory,
    DirectScoreFactory,
    InstructionFactory,
    LabelFactory,
    ProjectFactory,
    QuestionFactory,
    ResponseFactory,
    SystemFactory,
    TaskFactory,
)

VALUES = {"Y": LabelValue.YES, "N": LabelValue.NO, "U": LabelValue.UNKNOWN}
EXPERT_LABELS = {
    "expert-1": ["YY", "YN", "YYY", "NNY"],
    "expert-2": ["YN", "NN", "YYN", "NNN"],
    "expert-3": ["YU", "YN", "YYY", "YNN"],
}
JUDGE_LABELS = ["YN", "YY", "YYN", "NUN"]
CROWD_LABELS = {"crowd-1": ["YY", "NN"], "crowd-2": ["YN", "YN"], "crowd-3": ["YY", "NN"]}
# Direct scores (alpha, beta) per expert on i1 and i2: categories 1/0/-1 and 1/1/0.
SCORES = {"expert-1": [(5, 3), (5, 1)], "expert-2": [(4, 4), (5, 2)], "expert-3": [(2, 5), (4, 4)]}


def _label(annotator, questions, response, letters, assignment=None):
    for question, letter in zip(questions, letters, strict=True):
        LabelFactory(
            question=question,
            response=response,
            annotator=annotator,
            value=VALUES[letter],
            assignment=assignment,
        )


@pytest.fixture
def bench(db):
    benchmark = BenchmarkFactory(name="hand-computed")
    alpha, beta = SystemFactory(name="alpha"), SystemFactory(name="beta")
    i1 = InstructionFactory(benchmark=benchmark, subset=Subset.EASY, category="Email")
    i2 = InstructionFactory(benchmark=benchmark, subset=Subset.HARD, category="Poetry")
    q1 = [
        QuestionFactory(instruction=i1, position=1, constraint_mask=ConstraintType.CONTENT),
        QuestionFactory(
            instruction=i1,
            position=2,
            constraint_mask=ConstraintType.FORMAT | ConstraintType.NUMBER,
        ),
    ]
    q2 = [
        QuestionFactory(instruction=i2, position=p, constraint_mask=ConstraintType.CONTENT)
        for p in (1, 2, 3)
    ]
    responses = [
        (q1, ResponseFactory(instruction=i1, system=alpha)),
        (q1, ResponseFactory(instruction=i1, system=beta)),
        (q2, ResponseFactory(instruction=i2, system=alpha)),
        (q2, ResponseFactory(instruction=i2, system=beta)),
    ]
    for name, rows in EXPERT_LABELS.items():
        expert = AnnotatorFactory(name=name, kind=AnnotatorKind.EXPERT)
        for (questions, response), letters in zip(responses, rows, strict=True):
            _label(expert, questions, response, letters)
        for (alpha_score, beta_score), i in zip(SCORES[name], (0, 2), strict=True):
            DirectScoreFactory(response=responses[i][1], annotator=expert, score=alpha_score)
            DirectScoreFactory(response=responses[i + 1][1], annotator=expert, score=beta_score)
    judge = AnnotatorFactory(name="judge", kind=AnnotatorKind.LLM)
    for (questions, response), letters in zip(responses, JUDGE_LABELS, strict=True):
        _label(judge, questions, response, letters)

    project = ProjectFactory(benchmark=benchmark, reward_usd=Decimal("1.00"))
    task = TaskFactory(batch=BatchFactory(project=project), instruction=i1)
    start = timezone.now() - timedelta(hours=2)
    orders = {"crowd-1": [alpha.pk, beta.pk], "crowd-2": [beta.pk, alpha.pk]}
    for n, (name, rows) in enumerate(CROWD_LABELS.items()):
        worker = AnnotatorFactory(name=name, kind=AnnotatorKind.CROWD, worker_id=name)
        assignment = AssignmentFactory(
            task=task,
            annotator=worker,
            status=AssignmentStatus.SUBMITTED,
            claimed_at=start + timedelta(minutes=n),
            submitted_at=start + timedelta(minutes=10 * (n + 1)),
            display_order=orders.get(name, [alpha.pk, beta.pk]),
        )
        for (questions, response), letters in zip(responses[:2], rows, strict=True):
            _label(worker, questions, response, letters, assignment=assignment)
    return benchmark


@pytest.fixture
def drawn_figure(monkeypatch):
    """Render through `module`'s `render(*args)` and return the matplotlib Figure it drew, laid
    out (draw_without_rendering), instead of its bytes: for tests of where things sit."""

    def capture(module, render, *args):
        drawn = []
        monkeypatch.setattr(module, "figure_bytes", lambda figure, fmt: drawn.append(figure) or b"")
        render(*args)
        (figure,) = drawn
        figure.draw_without_rendering()
        return figure

    return capture
