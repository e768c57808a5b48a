"""Which runs set a judge's labels: the counts the report's note is made of, on answer rows
written directly (the stub-driven runs are in test_judge_mixed_runs.py)."""

import pytest

from annotate.models import Label, LabelValue, Question, Response
from evaluation.models import ConversationStatus, JudgeCall, JudgeConversation, JudgeRun, RunStatus
from evaluation.selectors.judge_label_runs import judge_label_runs
from tests.evaluation.judge_helpers import make_benchmark, make_judge

pytestmark = pytest.mark.django_db


def _answer(run, response, questions, *, done):
    """Write the run's answers to `questions` of `response`, each setting the judge's label."""
    conversation = JudgeConversation.objects.create(
        run=run,
        response=response,
        status=ConversationStatus.DONE if done else ConversationStatus.PENDING,
    )
    for question in questions:
        label, _ = Label.objects.get_or_create(
            question=question,
            response=response,
            annotator=run.config.annotator,
            defaults={"value": LabelValue.YES},
        )
        JudgeCall.objects.create(
            conversation=conversation, question=question, parsed=1, prompt_version="v1", label=label
        )


def test_a_run_replacing_two_runs_on_one_response_counts_it_once(django_assert_num_queries):
    """Run #3 replaced #2 and #1 on one response, answered only in part: the note's count of
    such responses is 1, not one per run replaced; a second judge's runs stay apart."""
    benchmark, _, (instruction,) = make_benchmark(
        questions_per_instruction=(2,), systems=("a", "b")
    )
    first_q, second_q = Question.objects.filter(instruction=instruction).order_by("position")
    response_a, response_b = Response.objects.filter(instruction=instruction).order_by("pk")
    judge, other = make_judge(name="judge-1"), make_judge(name="judge-2")
    run_1 = JudgeRun.objects.create(config=judge, benchmark=benchmark, status=RunStatus.DONE)
    for response in (response_a, response_b):
        _answer(run_1, response, [first_q, second_q], done=True)
    run_2 = JudgeRun.objects.create(config=judge, benchmark=benchmark, status=RunStatus.FAILED)
    _answer(run_2, response_a, [first_q, second_q], done=True)
    _answer(run_2, response_b, [first_q], done=False)
    run_3 = JudgeRun.objects.create(config=judge, benchmark=benchmark, status=RunStatus.CANCELLED)
    _answer(run_3, response_b, [first_q], done=False)
    other_run = JudgeRun.objects.create(config=other, benchmark=benchmark, status=RunStatus.DONE)
    _answer(other_run, response_a, [first_q], done=True)

    # The answer rows are counted in one statement (with the runs and their conversations'
    # counts: 3), whatever their number, never read one by one.
    with django_assert_num_queries(3):
        found = judge_label_runs(benchmark_id=benchmark.pk)

    runs = found[judge.annotator_id].runs
    assert [(run.run_id, run.replaced, run.answered_in_part) for run in runs] == [
        (run_3.pk, {run_2.pk: 1, run_1.pk: 1}, 1),
        (run_2.pk, {run_1.pk: 1}, 0),
        (run_1.pk, {}, 0),
    ]
    assert [(run.responses_done, run.responses_total) for run in runs] == [(0, 1), (1, 2), (2, 2)]
    assert [run.run_id for run in found[other.annotator_id].runs] == [other_run.pk]
    assert set(judge_label_runs(benchmark_id=benchmark.pk, annotator_ids=[other.annotator_id])) == {
        other.annotator_id
    }
    assert judge_label_runs(benchmark_id=benchmark.pk, annotator_ids=[]) == {}
