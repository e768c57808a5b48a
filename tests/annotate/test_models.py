"""Database constraints hold even when a write bypasses the services."""

import pytest
from django.db import IntegrityError, transaction

from annotate.models import ConstraintType, Label, constraint_mask, constraint_names
from tests.factories import (
    DirectScoreFactory,
    LabelFactory,
    QuestionFactory,
    ResponseFactory,
)

pytestmark = pytest.mark.django_db


def test_constraint_mask_round_trips_names():
    mask = constraint_mask(["Content", "format"])
    assert mask == ConstraintType.CONTENT | ConstraintType.FORMAT
    assert constraint_names(mask) == ["Content", "Format"]


@pytest.mark.parametrize("mask", [0, 32, 0b1111])
def test_question_needs_one_to_three_constraint_types(mask):
    with pytest.raises(IntegrityError), transaction.atomic():
        QuestionFactory(constraint_mask=mask)


def test_label_value_out_of_range_is_refused():
    with pytest.raises(IntegrityError), transaction.atomic():
        LabelFactory(value=7)


def test_one_label_per_question_response_annotator():
    label = LabelFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Label.objects.create(
            question=label.question, response=label.response, annotator=label.annotator, value=0
        )


@pytest.mark.parametrize("score", [0, 6])
def test_direct_score_must_be_1_to_5(score):
    with pytest.raises(IntegrityError), transaction.atomic():
        DirectScoreFactory(score=score)


def test_one_response_per_instruction_and_system():
    response = ResponseFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        ResponseFactory(instruction=response.instruction, system=response.system)
