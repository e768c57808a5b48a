"""A kind's change that leaves a person's verbalizer answers out of every result (their new
channel's places of those prompts are taken) is said where it is made: the annotators page asks
first, counting the answers, and the message after the change counts them again."""

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.services import review
from annotate.models import AnnotatorKind
from annotate.selectors.results import counted_human_answers
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.services.humans import human_work_answer_submit
from tests.annotate.verbalizer.test_crowd_spending import _answer_on_fake, _publish
from tests.annotate.verbalizer.test_released_places import admin, study
from tests.factories import AnnotatorFactory

pytestmark = pytest.mark.django_db

__all__ = ["admin", "study"]  # fixtures


def _worker_with_answers_on_full_prompts(study) -> HumanAnswer:
    """A platform worker's answers to both prompts, counted in the crowd channel, while three
    colleagues fill the in-house places of both; returns the first answer."""
    publication = _publish(study, "fake", "0.20")
    hits = list(publication.hits.order_by("id"))
    platform_answers = [_answer_on_fake(hit, "W1") for hit in hits]
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    for hit in hits:
        for _ in range(3):
            human_work_answer_submit(
                study=study, prompt_id=hit.prompt_id, annotator=AnnotatorFactory(), key=1,
                seconds=1.0,
            )  # fmt: skip
    assert counted_human_answers(HumanAnswer.objects.filter(annotator__worker_id="W1")).count() == 2
    return platform_answers[0]


def _texts(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_making_a_worker_an_expert_asks_first_when_their_answers_would_stop_counting(
    client, study, admin
):
    worker = _worker_with_answers_on_full_prompts(study).annotator
    client.force_login(admin)
    url = reverse("annotators:kind", args=[worker.pk])

    asked = client.post(url, {"kind": "expert", "filter_kind": "crowd"})

    assert asked.status_code == 200
    assert (
        "Their 2 verbalizer answers will no longer count in any result: the in-house answers "
        "of these prompts are full" in asked.text
    )
    worker.refresh_from_db()
    assert worker.kind == AnnotatorKind.CROWD  # nothing changed until confirmed
    assert counted_human_answers(HumanAnswer.objects.filter(annotator=worker)).count() == 2
    assert 'name="confirmed"' in asked.text and 'value="crowd"' in asked.text  # filters kept

    done = client.post(url, {"kind": "expert", "confirmed": "1", "filter_kind": "crowd"})
    assert done.status_code == 302 and done["Location"].endswith("?kind=crowd")
    worker.refresh_from_db()
    assert worker.kind == AnnotatorKind.EXPERT
    assert not counted_human_answers(HumanAnswer.objects.filter(annotator=worker)).exists()
    page = client.get(done["Location"])
    assert (
        f"{worker.name} is now: Expert. Their 2 verbalizer answers no longer count in any "
        "result: the in-house answers of these prompts are full" in " ".join(_texts(page))
    )


def test_making_a_worker_an_expert_where_in_house_has_room_asks_nothing(client, study, admin):
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    worker = _answer_on_fake(hit, "W1").annotator
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    client.force_login(admin)

    done = client.post(reverse("annotators:kind", args=[worker.pk]), {"kind": "expert"})

    assert done.status_code == 302
    worker.refresh_from_db()
    assert worker.kind == AnnotatorKind.EXPERT
    assert _texts(client.get(done["Location"])) == [f"{worker.name} is now: Expert."]
