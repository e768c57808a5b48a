"""A cached report is stored under the key of the data it was computed from
(evaluation.caching.cache_get_or_build), however the data moves while it is read."""

import pytest
from django.core.cache import cache

from annotate.models import Annotator, AnnotatorKind, Label, LabelValue, Question, Response
from annotate.selectors.identities import OPERATOR
from tests.factories import AnnotatorFactory, LabelFactory, benchmark_with_responses
from tests.threads import in_thread

pytestmark = pytest.mark.django_db(transaction=True)
NO = LabelValue.NO


@pytest.fixture(autouse=True)
def empty_cache():
    # Transactional tests reuse ids: a report cached by another test could have this one's key.
    cache.clear()
    yield
    cache.clear()


def _labellers(report: dict) -> set[str]:
    return {row["source"] for row in report["leaderboard"]} - {"expert-majority"}


def test_a_label_committed_as_the_report_is_read_is_not_served_once_deleted(monkeypatch):
    """The key was read before the report's snapshot: a label committed between the two was in
    the report stored under the key of the labels without it. Deleted again (in the admin), the
    labels had that key once more, and the report counting the deleted label was served as
    current (for up to 600 s). The report of the labels read with its key is stored under it."""
    from evaluation.services import reports

    benchmark, _ = benchmark_with_responses(instructions=1, systems=1, questions=1)
    question, response = Question.objects.get(), Response.objects.get()
    LabelFactory(question=question, response=response, annotator__name="first")
    late = AnnotatorFactory(name="late", kind=AnnotatorKind.EXPERT)
    read_inputs, committed = reports.report_inputs, []

    def label_committed_first(**kwargs):
        if not committed:  # another annotator's submit, on a connection of its own
            label = {"question": question, "response": response, "annotator": late, "value": NO}
            in_thread(lambda: Label.objects.create(**label), committed).join(30)
        return read_inputs(**kwargs)

    monkeypatch.setattr(reports, "report_inputs", label_committed_first)
    first = reports.report_cached(benchmark=benchmark, scope=OPERATOR)
    assert isinstance(committed[0], Label)
    assert _labellers(first) == {"first"}  # read as of the key, before the late label
    monkeypatch.setattr(reports, "report_inputs", read_inputs)
    assert _labellers(reports.report_cached(benchmark=benchmark, scope=OPERATOR)) == {
        "first",
        "late",
    }

    Label.objects.filter(annotator=late).delete()
    assert Annotator.objects.filter(name="late").exists()
    assert _labellers(reports.report_cached(benchmark=benchmark, scope=OPERATOR)) == {"first"}
