"""The verbalizer report reads the set as of one moment (evaluation.selectors.snapshot), whatever
commits between its reads."""

import pytest
from django.core.cache import cache
from django.db import transaction

from annotate.models import Annotator
from annotate.verbalizer.models import HumanAnswer, HumanStudy, Prompt
from tests.threads import in_thread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_cache():
    # Transactional tests reuse ids: a report cached by another test could have this one's key.
    cache.clear()
    yield
    cache.clear()


def _publish_and_answer(study: HumanStudy) -> HumanAnswer:
    """Publish one more prompt to `study` and record a person's answer to it, in one commit."""
    prompt = Prompt.objects.filter(evaluation_set=study.evaluation_set, mode="direct").exclude(
        pk__in=study.prompts.values("pk")
    )[0]
    with transaction.atomic():
        study.prompts.add(prompt)
        person = Annotator.objects.get(name="p0")
        return HumanAnswer.objects.create(study=study, prompt=prompt, annotator=person, word="foo")


def test_a_prompt_published_and_answered_between_two_reads_is_in_both_parts_or_neither(
    with_humans, monkeypatch
):
    """The people's slice takes its answered prompts from the answers (_records) and its published
    count from the study's prompts (_slice_summaries), two queries: a prompt published and
    answered between them made the slice say 2 of 3 published prompts answered, a state the study
    was never in (2 of 2 before, 3 of 3 after)."""
    from evaluation.verbalizer import report

    study = HumanStudy.objects.get(name="h")
    summaries, committed = report._slice_summaries, []

    def published_and_answered_first(*args):
        in_thread(lambda: _publish_and_answer(study), committed).join(30)
        return summaries(*args)

    monkeypatch.setattr(report, "_slice_summaries", published_and_answered_first)
    (during,) = report.verbalizer_report(evaluation_set=with_humans)["slices"]
    assert isinstance(committed[0], HumanAnswer)
    assert (during["prompt_count"], during["published_count"]) == (2, 2)

    monkeypatch.setattr(report, "_slice_summaries", summaries)
    (after,) = report.verbalizer_report(evaluation_set=with_humans)["slices"]
    assert (after["prompt_count"], after["published_count"]) == (3, 3)


def test_an_answer_committed_as_the_report_is_read_is_not_served_once_deleted(
    with_humans, monkeypatch
):
    """The report's cache key (report_version) was read before the report's snapshot: an answer
    committed between the two was in the report stored under the version of the answers without
    it, served again for an hour once that answer was deleted (the version back where it was)."""
    from evaluation.verbalizer import report

    study = HumanStudy.objects.get(name="h")
    read, committed = report._report_read, []

    def answered_first(evaluation_set):
        if not committed:
            in_thread(lambda: _publish_and_answer(study), committed).join(30)
        return read(evaluation_set)

    def prompts_answered() -> int:
        (found,) = report.verbalizer_report_cached(evaluation_set=with_humans)["slices"]
        return found["prompt_count"]

    monkeypatch.setattr(report, "_report_read", answered_first)
    assert prompts_answered() == 2  # as of its key, before the answer
    monkeypatch.setattr(report, "_report_read", read)
    assert prompts_answered() == 3
    committed[0].delete()
    study.prompts.remove(committed[0].prompt)
    assert prompts_answered() == 2
