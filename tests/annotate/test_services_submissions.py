from datetime import timedelta

import pytest
from django.utils import timezone

from annotate.errors import AssignmentNotLiveError, ConflictError, NotFoundError, SubmissionError
from annotate.models import AssignmentStatus, DirectScore, Label, LabelValue, ProjectMode, Response
from annotate.services.assignments import assignment_claim_next, assignment_return
from annotate.services.submissions import Outcome, assignment_submit
from tests.factories import AnnotatorFactory, project_with_tasks

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def full_answers(assignment, value="yes", questions=2):
    return {
        f"r{n}_q{m}": value
        for n in range(1, len(assignment.display_order) + 1)
        for m in range(1, questions + 1)
    }


def scores(assignment, score="4"):
    return {f"r{n}_score": score for n in range(1, len(assignment.display_order) + 1)}


@pytest.fixture
def claimed():
    project = project_with_tasks(instructions=2, systems=3, questions=2, assignments_per_task=1)
    annotator = AnnotatorFactory()
    return assignment_claim_next(annotator=annotator, project=project, now=NOW)


def submit(assignment, answers, *, now=NOW, annotator=None, seconds=30):
    return assignment_submit(
        assignment_id=assignment.id,
        annotator=annotator or assignment.annotator,
        answers=answers,
        active_seconds=seconds,
        now=now + timedelta(minutes=1),
    )


def test_labels_land_on_the_response_shown_at_each_position(claimed):
    answers = full_answers(claimed)
    answers["r2_q1"] = "no"
    answers["r3_q2"] = "unknown"
    result = submit(claimed, answers)
    assert result.outcome == Outcome.ACCEPTED
    claimed.refresh_from_db()
    assert claimed.status == AssignmentStatus.SUBMITTED and claimed.active_seconds == 30
    assert Label.objects.filter(assignment=claimed).count() == 6
    second_system = Response.objects.get(
        instruction=claimed.task.instruction, system_id=claimed.display_order[1]
    )
    label = Label.objects.get(response=second_system, question__position=1)
    assert label.value == LabelValue.NO and label.annotator == claimed.annotator
    third = Response.objects.get(
        instruction=claimed.task.instruction, system_id=claimed.display_order[2]
    )
    assert Label.objects.get(response=third, question__position=2).value == LabelValue.UNKNOWN


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: a.pop("r1_q1"), "missing: r1_q1"),
        (lambda a: a.update(r1_q3="yes"), "Unexpected field"),
        (lambda a: a.update(r4_q1="yes"), "Unexpected field"),
        (lambda a: a.update(r1_q1="maybe"), "not one of"),
        (lambda a: a.update(r1_score="3"), "Unexpected field"),
        (lambda a: a.update(system_7="yes"), "Unexpected field"),
    ],
)
def test_invalid_submissions_write_nothing(claimed, change, message):
    answers = full_answers(claimed)
    change(answers)
    with pytest.raises(SubmissionError, match=message):
        submit(claimed, answers)
    claimed.refresh_from_db()
    assert claimed.status == AssignmentStatus.CLAIMED and claimed.submission is None
    assert not Label.objects.exists()


def test_missing_answers_are_listed(claimed):
    answers = full_answers(claimed)
    del answers["r2_q2"], answers["r3_q1"]
    with pytest.raises(SubmissionError) as raised:
        submit(claimed, answers)
    assert raised.value.missing == ["r2_q2", "r3_q1"]


def test_missing_answers_and_a_bad_value_are_both_named(claimed):
    answers = full_answers(claimed)
    del answers["r2_q2"]
    answers["r1_q1"] = "maybe"
    with pytest.raises(SubmissionError) as raised:
        submit(claimed, answers)
    assert "missing: r2_q2" in str(raised.value)
    assert "r1_q1: 'maybe' is not one of" in str(raised.value)
    assert raised.value.missing == ["r2_q2"]
    assert not Label.objects.exists()


def test_someone_elses_assignment_is_not_found(claimed):
    with pytest.raises(NotFoundError):
        submit(claimed, full_answers(claimed), annotator=AnnotatorFactory())


def test_returned_assignment_takes_no_answers(claimed):
    assignment_return(assignment_id=claimed.id, annotator=claimed.annotator, now=NOW)
    with pytest.raises(AssignmentNotLiveError):
        submit(claimed, full_answers(claimed))
    assert not Label.objects.exists()


def test_identical_repeat_is_a_no_op_and_a_different_one_conflicts(claimed):
    submit(claimed, full_answers(claimed))
    again = submit(claimed, full_answers(claimed))
    assert again.outcome == Outcome.UNCHANGED
    with pytest.raises(ConflictError):
        submit(claimed, full_answers(claimed, value="no"))
    assert set(Label.objects.values_list("value", flat=True)) == {LabelValue.YES}


def test_active_time_is_clamped_to_elapsed_time(claimed):
    submit(claimed, full_answers(claimed), seconds=10_000)
    claimed.refresh_from_db()
    assert claimed.active_seconds == 60
    with pytest.raises(SubmissionError):
        submit(claimed, full_answers(claimed), seconds="soon")


def test_late_submit_with_a_free_slot_is_accepted(claimed):
    late = claimed.expires_at + timedelta(minutes=5)
    result = submit(claimed, full_answers(claimed), now=late)
    assert result.outcome == Outcome.ACCEPTED
    assert Label.objects.filter(assignment=claimed).count() == 6


def test_late_submit_when_the_slot_was_taken_is_kept_but_not_counted():
    project = project_with_tasks(instructions=1, assignments_per_task=1)
    first = assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=NOW)
    later = first.expires_at + timedelta(minutes=1)
    second = assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=later)
    assert second.task_id == first.task_id
    result = submit(first, full_answers(first), now=later)
    assert result.outcome == Outcome.LATE
    first.refresh_from_db()
    assert first.is_late and first.submission["labels"]["r1_q1"] == "yes"
    assert first.status == AssignmentStatus.EXPIRED
    assert not Label.objects.filter(assignment=first).exists()
    assert submit(first, full_answers(first), now=later).outcome == Outcome.UNCHANGED
    assert submit(second, full_answers(second), now=later).outcome == Outcome.ACCEPTED


def test_direct_score_mode_writes_scores():
    project = project_with_tasks(instructions=1, mode=ProjectMode.DIRECT_SCORE)
    assignment = assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=NOW)
    with pytest.raises(SubmissionError, match="Unexpected"):
        submit(assignment, full_answers(assignment))
    with pytest.raises(SubmissionError, match="not one of"):
        submit(assignment, scores(assignment, "6"))
    assert submit(assignment, scores(assignment)).outcome == Outcome.ACCEPTED
    assert list(DirectScore.objects.values_list("score", flat=True)) == [4, 4, 4]


def test_both_mode_takes_scores_first_then_questions():
    project = project_with_tasks(instructions=1, mode=ProjectMode.BOTH)
    assignment = assignment_claim_next(annotator=AnnotatorFactory(), project=project, now=NOW)
    with pytest.raises(SubmissionError, match="direct score"):
        submit(assignment, full_answers(assignment))
    given = scores(assignment, "2")
    given["r1_score"] = "5"
    assert submit(assignment, given).outcome == Outcome.SCORED
    assignment.refresh_from_db()
    assert assignment.scored_at is not None and assignment.direct_scores["r1_score"] == 5
    assert not DirectScore.objects.exists()
    assert submit(assignment, given).outcome == Outcome.UNCHANGED
    with pytest.raises(ConflictError):
        submit(assignment, scores(assignment, "3"))
    assert submit(assignment, full_answers(assignment)).outcome == Outcome.ACCEPTED
    first = Response.objects.get(
        instruction=assignment.task.instruction, system_id=assignment.display_order[0]
    )
    assert DirectScore.objects.get(response=first).score == 5
    assert DirectScore.objects.count() == 3 and Label.objects.count() == 6


@pytest.mark.parametrize("earlier", ["label", "score"])
def test_a_response_labelled_elsewhere_since_the_claim_conflicts_and_nothing_is_written(
    claimed, earlier
):
    """An import of the annotator's labels or scores after the claim blocks the submit."""
    last = Response.objects.get(
        instruction=claimed.task.instruction, system_id=claimed.display_order[-1]
    )
    if earlier == "label":
        question = claimed.task.instruction.questions.get(position=2)
        Label.objects.create(
            question=question, response=last, annotator=claimed.annotator, value=LabelValue.NO
        )
    else:
        DirectScore.objects.create(response=last, annotator=claimed.annotator, score=3)
    with pytest.raises(ConflictError, match="another project"):
        submit(claimed, full_answers(claimed))
    claimed.refresh_from_db()
    assert claimed.status == AssignmentStatus.CLAIMED and claimed.submitted_at is None
    assert Label.objects.filter(assignment=claimed).count() == 0
    assert Label.objects.filter(annotator=claimed.annotator).count() == (earlier == "label")
