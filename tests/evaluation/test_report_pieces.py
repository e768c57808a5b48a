"""The report is computed in pieces of instructions and merged: any piece size gives the same report.

On the hand-computed benchmark of conftest.py plus a third instruction that one expert never
labelled (a missing rater, a tie, a question nobody answered YES or NO), and crowd work that must
not count: a rejected assignment and a blocked worker's submitted one.
"""

from __future__ import annotations

import io
import threading
from concurrent.futures import Future

import pytest
from django.db import connection, transaction

from annotate.crowd.models import WorkerBlock
from annotate.models import (
    Annotator,
    AnnotatorKind,
    AssignmentStatus,
    Instruction,
    Label,
    Subset,
    System,
    Task,
)
from annotate.selectors.identities import OPERATOR
from evaluation.conventions import UNKNOWN_MODES
from evaluation.selectors import report_data
from evaluation.selectors.report_data import (
    fetch_label_columns,
    label_columns_meanwhile,
)
from evaluation.services import reports
from evaluation.services.reports import (
    labels_aggregated_csv,
    piece_bounds,
    report_build,
    report_inputs,
)
from tests.evaluation.conftest import _label
from tests.factories import (
    AnnotatorFactory,
    AssignmentFactory,
    InstructionFactory,
    QuestionFactory,
    ResponseFactory,
    SystemFactory,
)

pytestmark = pytest.mark.django_db
ONE_PIECE = 10**9


@pytest.fixture
def pieces_bench(bench):
    """bench + i3 (easy, 2 questions) labelled by expert-1 and expert-2 only, and two crowd
    workers on i1 whose work does not count: crowd-4's assignment was rejected, crowd-5 is
    blocked. Their labels contradict every counted crowd label."""
    i3 = InstructionFactory(benchmark=bench, subset=Subset.EASY, category="Email")
    questions = [QuestionFactory(instruction=i3, position=p) for p in (1, 2)]
    alpha, beta = (
        ResponseFactory(instruction=i3, system=System.objects.get(name=name))
        for name in ("alpha", "beta")
    )
    for name, letters in (("expert-1", ("YN", "UY")), ("expert-2", ("NN", "UY"))):
        expert = Annotator.objects.get(name=name)
        _label(expert, questions, alpha, letters[0])
        _label(expert, questions, beta, letters[1])
    task = Task.objects.get(instruction__benchmark=bench)
    i1_responses = list(task.instruction.responses.order_by("system__name"))
    for name, status in (
        ("crowd-4", AssignmentStatus.REJECTED),
        ("crowd-5", AssignmentStatus.SUBMITTED),
    ):
        worker = AnnotatorFactory(name=name, kind=AnnotatorKind.CROWD, worker_id=name)
        assignment = AssignmentFactory(task=task, annotator=worker, status=status)
        q1 = list(task.instruction.questions.order_by("position"))
        _label(worker, q1, i1_responses[0], "NN", assignment=assignment)
        _label(worker, q1, i1_responses[1], "YY", assignment=assignment)
    WorkerBlock.objects.create(annotator=Annotator.objects.get(name="crowd-5"), reason="spam")
    return bench


def _without_time(report: dict) -> dict:
    return {key: value for key, value in report.items() if key != "generated_at"}


@pytest.mark.parametrize("unknown", UNKNOWN_MODES)
def test_report_in_pieces_equals_the_report_at_once(pieces_bench, unknown):
    inputs = report_inputs(benchmark=pieces_bench)
    # Items: i1 and i3 have 2 questions × 2 systems, i2 3 × 2, so 4 items per piece gives 3.
    assert len(piece_bounds(inputs.data, 4)) - 1 == 3
    assert len(piece_bounds(inputs.data, 10)) - 1 == 2
    at_once = report_build(
        scope=OPERATOR,
        benchmark=pieces_bench,
        unknown=unknown,
        inputs=inputs,
        piece_items=ONE_PIECE,
    )
    for piece_items in (1, 4, 10):
        in_pieces = report_build(
            scope=OPERATOR,
            benchmark=pieces_bench,
            unknown=unknown,
            inputs=inputs,
            piece_items=piece_items,
        )
        assert _without_time(in_pieces) == _without_time(at_once)


def test_missing_rater_tie_and_no_vote_in_the_majority(pieces_bench):
    report = report_build(scope=OPERATOR, benchmark=pieces_bench, piece_items=4)
    votes = {row["source"]: row for row in report["votes"]}
    # bench: 10 expert items, 1 tie. i3: alpha q1 Y/N tie, q2 N; beta q1 U/U no vote, q2 Y.
    assert votes["expert-majority"] == {
        "source": "expert-majority",
        "items": 14,
        "ties": 2,
        "no_votes": 1,
    }
    # Counted crowd work only: i1 alpha YY, beta NN (rejected and blocked work said the opposite).
    assert votes["crowd-majority"]["items"] == 4
    crowd = next(
        r
        for r in report["leaderboard"]
        if r["source"] == "crowd-majority" and r["subset"] == "easy" and r["system"] == "alpha"
    )
    assert (crowd["yes"], crowd["questions"]) == (2, 2)


def test_work_that_does_not_count_changes_nothing(pieces_bench):
    """The rejected and the blocked worker's labels leave the report exactly as if never given."""
    with_them = report_build(scope=OPERATOR, benchmark=pieces_bench, piece_items=4)
    deleted, _ = Label.objects.filter(annotator__name__in=["crowd-4", "crowd-5"]).delete()
    assert deleted == 8
    assert _without_time(
        report_build(scope=OPERATOR, benchmark=pieces_bench, piece_items=4)
    ) == _without_time(with_them)


def test_aggregated_labels_keep_the_order_of_responses_then_questions(bench):
    """Rows follow the responses' ids, then the questions, even when a later response belongs
    to an earlier instruction (the report lays items out instruction by instruction)."""
    i1 = bench.instructions.order_by("id").first()
    gamma = ResponseFactory(instruction=i1, system=SystemFactory(name="gamma"))
    questions = list(i1.questions.order_by("position"))
    for name, letters in (("expert-1", "NY"), ("expert-2", "NY"), ("expert-3", "UY")):
        _label(Annotator.objects.get(name=name), questions, gamma, letters)
    output = io.StringIO()
    labels_aggregated_csv(benchmark=bench, output=output)
    rows = [line.split(",") for line in output.getvalue().splitlines()[1:]]
    experts = [(r[1], r[3], r[4]) for r in rows if r[2] == "expert-majority"]
    # i1 alpha, i1 beta, i2 alpha, i2 beta, then i1 gamma (created last).
    assert experts == [
        ("alpha", "1", "YES"),
        ("alpha", "2", "UNKNOWN"),
        ("beta", "1", "YES"),
        ("beta", "2", "NO"),
        ("alpha", "1", "YES"),
        ("alpha", "2", "YES"),
        ("alpha", "3", "YES"),
        ("beta", "1", "NO"),
        ("beta", "2", "NO"),
        ("beta", "3", "NO"),
        ("gamma", "1", "NO"),
        ("gamma", "2", "YES"),
    ]


@pytest.mark.django_db(transaction=True)
def test_labels_read_on_a_second_connection_give_the_same_report(pieces_bench):
    """On PostgreSQL in autocommit mode a thread reads the labels on its own connection while
    the rest is read; inside a transaction they are read in line. Same report either way."""
    if connection.vendor != "postgresql":
        pytest.skip("the labels are read on a second connection on PostgreSQL only")
    assert not connection.in_atomic_block
    pending = label_columns_meanwhile(pieces_bench.pk)
    assert isinstance(pending, Future)  # read by the thread
    stored = Label.objects.filter(response__instruction__benchmark=pieces_bench).count()
    # All but the rejected and the blocked worker's labels.
    assert len(pending.result().value) == stored - 8
    threaded = report_build(scope=OPERATOR, benchmark=pieces_bench)
    with transaction.atomic():
        in_line = report_build(scope=OPERATOR, benchmark=pieces_bench)
    assert _without_time(threaded) == _without_time(in_line)


@pytest.mark.django_db(transaction=True)
def test_costs_are_read_on_a_second_connection_meanwhile(pieces_bench, monkeypatch):
    """On PostgreSQL outside a transaction the sources' costs (database reads only) are read by
    a thread on its own connection, in the labels' snapshot, while the labels are read; inside
    a transaction in line, after the labels. Same report either way."""
    if connection.vendor != "postgresql":
        pytest.skip("the costs are read on a second connection on PostgreSQL only")
    readers, again = [], []
    read = reports.source_costs_and_kinds

    def costs_spy(**kwargs):
        readers.append(threading.current_thread().name)
        return read(**kwargs)

    monkeypatch.setattr(reports, "source_costs_and_kinds", costs_spy)
    # Read again only when a kind changed between the two reads: never here.
    monkeypatch.setattr(reports, "source_costs", lambda **kwargs: again.append(kwargs))
    threaded = report_build(scope=OPERATOR, benchmark=pieces_bench)
    with transaction.atomic():
        in_line = report_build(scope=OPERATOR, benchmark=pieces_bench)
    assert [name.startswith("report-costs") for name in readers] == [True, False]
    assert again == []
    assert _without_time(threaded) == _without_time(in_line)
    assert any(row["cost_usd"] is not None for row in threaded["sources"])


class _ReadAfter:
    """Labels that the report sees as still being read for the first `polls` checks."""

    def __init__(self, benchmark_id: int, polls: int):
        self.benchmark_id, self.polls = benchmark_id, polls

    def done(self) -> bool:
        self.polls -= 1
        return self.polls < 0

    def result(self):
        return fetch_label_columns(self.benchmark_id)


@pytest.mark.parametrize("polls", [0, 1, 2, 3, 1000])
@pytest.mark.parametrize("first_expert_skips_i3", [False, True])
def test_weights_drawn_while_the_labels_are_read_give_the_same_report(
    pieces_bench, monkeypatch, polls, first_expert_skips_i3
):
    """The bootstrap draws its weights ahead for the easy, hard and all instructions while the
    labels are read, for as long as they are: the report is the same however far it got, and
    when the first source's sets of instructions are not the subsets (expert-1 never labelled
    i3, so its easy set has one instruction, not two) the weights are drawn again."""
    if first_expert_skips_i3:
        i3 = Instruction.objects.filter(benchmark=pieces_bench).order_by("id").last()
        assert Label.objects.filter(annotator__name="expert-1", response__instruction=i3).delete()[
            0
        ]
    inputs = report_inputs(benchmark=pieces_bench)
    # Few resamples, so that the intervals depend on which weights were drawn.
    expected = report_build(scope=OPERATOR, benchmark=pieces_bench, inputs=inputs, n_resamples=9)
    monkeypatch.setattr(report_data, "label_columns_meanwhile", lambda pk: _ReadAfter(pk, polls))
    report = report_build(scope=OPERATOR, benchmark=pieces_bench, n_resamples=9)
    assert _without_time(report) == _without_time(expected)
