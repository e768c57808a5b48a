"""Database constraints hold even when a write bypasses the services."""

import os

import pytest
from django.db import IntegrityError, connection, transaction
from django.forms import modelform_factory

from annotate.models import (
    Annotator,
    ConstraintType,
    Label,
    Project,
    constraint_mask,
    constraint_names,
)
from tests.factories import (
    AnnotatorFactory,
    DirectScoreFactory,
    LabelFactory,
    ProjectFactory,
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


@pytest.mark.parametrize("factory", [AnnotatorFactory, ProjectFactory])
def test_annotator_and_project_names_are_unique(factory):
    first = factory()
    with pytest.raises(IntegrityError), transaction.atomic():
        factory(name=first.name)


@pytest.mark.parametrize(
    ("model", "fields", "message"),
    [
        (Annotator, ["name", "kind"], "Annotator with this Name already exists."),
        (Project, ["name", "benchmark", "mode"], "Project with this Name already exists."),
    ],
)
def test_a_form_names_the_taken_name(model, fields, message):
    """The admin's forms: the name's unique constraint reports on the field, as unique=True did."""
    taken = (AnnotatorFactory if model is Annotator else ProjectFactory)()
    data = {"name": taken.name, "kind": "expert", "mode": "drfr"}
    if model is Project:
        data["benchmark"] = taken.benchmark_id
    form = modelform_factory(model, fields=fields)(data=data)
    assert not form.is_valid()
    assert form.errors["name"] == [message]


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="PostgreSQL's pattern-ops index copies: DATABASE_URL=postgres://...",
)
@pytest.mark.parametrize("table", ["annotate_annotator", "annotate_project"])
def test_a_name_has_one_index(table):
    """Only the unique index: a new connection opens every index of these tables on each task
    page and submit (issue 17), and nothing makes a LIKE 'x%' lookup on the names."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
            [table, "%(name%"],
        )
        definitions = [definition for (definition,) in cursor.fetchall()]
    assert len(definitions) == 1, definitions
    assert "UNIQUE" in definitions[0]
