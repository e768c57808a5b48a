"""An in-house annotator's answers to one prompt in two studies of a set, posted at once (two
tabs): reports read one answer per person and prompt, so the second must be refused, not stored
to fill one of the prompt's places and count nowhere."""

import threading
import time

import pytest
from django.db import connection, transaction
from django.utils import timezone

from annotate.crowd.models import Hit, HitStatus, PlatformAssignment, Publication, PublicationStatus
from annotate.crowd.services import review
from annotate.errors import ConflictError
from annotate.models import Annotator
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.services import humans
from annotate.verbalizer.services.humans import human_study_create, human_work_answer_submit
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.verbalizer.helpers import fill
from tests.factories import UserFactory
from tests.threads import in_thread, waiting_for_a_row_lock


@pytest.mark.django_db(transaction=True)
def test_answers_to_one_prompt_in_two_studies_posted_at_once_store_one(monkeypatch):
    """The first answer (study A) is held open after its insert; the second (study B) took
    only B's lock, did not see A's uncommitted answer and was stored too. It now waits for the
    person's row, which the first holds, then sees the first answer and is refused."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks: SQLite runs one writer at a time")
    fill("SST-2", [True, False, True])
    evaluation_set = evaluation_set_create(
        name="s", datasets=["SST-2"], items=3, seed=1, mappings="all", modes=["direct"]
    ).evaluation_set
    first, second = (
        human_study_create(
            evaluation_set=evaluation_set,
            name=name,
            mappings=["flipped-golden"],
            items_per_dataset=2,
            answers_per_prompt=2,
        )  # fmt: skip
        for name in ("A", "B")
    )
    prompt = first.prompts.first()
    assert second.prompts.filter(pk=prompt.pk).exists()
    user = UserFactory(username="two-tabs", roles=["annotator"])
    person = Annotator.objects.create(user=user, name=user.username, kind="expert")

    stored, go, original = threading.Event(), threading.Event(), humans.human_answer_submit

    def held_open(**kwargs):
        answer = original(**kwargs)
        if kwargs["study"].pk == first.pk:
            stored.set()
            go.wait(30)
        return answer

    monkeypatch.setattr(humans, "human_answer_submit", held_open)

    def answer(study):
        return lambda: human_work_answer_submit(
            study=study, prompt_id=prompt.pk, annotator=person, key=1, seconds=None
        )

    outcomes_a, outcomes_b = [], []
    tab_a = in_thread(answer(first), outcomes_a)
    assert stored.wait(30)
    tab_b = in_thread(answer(second), outcomes_b)
    deadline = time.monotonic() + 30
    while tab_b.is_alive() and not waiting_for_a_row_lock():
        assert time.monotonic() < deadline, "neither done nor waiting for a lock"
        time.sleep(0.01)
    go.set()
    tab_a.join(30)
    tab_b.join(30)

    assert isinstance(outcomes_a[0], HumanAnswer), outcomes_a
    assert isinstance(outcomes_b[0], ConflictError), outcomes_b
    assert "another study" in str(outcomes_b[0]) and "'A'" not in str(outcomes_b[0])
    assert list(
        HumanAnswer.objects.filter(annotator=person).values_list("study_id", flat=True)
    ) == [first.pk]


@pytest.mark.django_db(transaction=True)
def test_two_confirmations_for_one_free_place_give_it_to_one_answer():
    """Two confirmed answers kept out of a full prompt (a sync released their places, and the
    platform confirmed them after replacements took them), and one place frees up: two syncs
    (the beat's and an admin's) restoring places at once each counted one free and gave it to
    a different answer, one answer more than the study's answers per prompt. They take turns
    on the HIT's row: the second counts again and finds the prompt full."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's row locks: SQLite runs one writer at a time")
    fill("SST-2", [True])
    evaluation_set = evaluation_set_create(
        name="s", datasets=["SST-2"], items=1, seed=1, mappings="flipped-golden", modes=["direct"]
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="A", answers_per_prompt=2)
    prompt = study.prompts.first()
    publication = Publication.objects.create(
        human_study=study, platform="mturk", title="t", description="d", reward_usd="0.05",
        assignments_per_task=2, assignment_duration_seconds=3600,
        auto_approval_delay_seconds=3600, lifetime_seconds=3600,
        task_base_url="https://annotate.example.org", link_token="race",
        status=PublicationStatus.PUBLISHED,
    )  # fmt: skip
    hit = Hit.objects.create(
        publication=publication, prompt=prompt, unique_request_token="t", max_assignments=4,
        hit_id="HIT1", status=HitStatus.CREATED,
    )  # fmt: skip

    def confirmed_answer(worker: str, *, released: bool) -> HumanAnswer:
        person = Annotator.objects.create(
            name=f"mturk:{worker}", kind="crowd", platform="mturk", worker_id=worker
        )
        answer = HumanAnswer.objects.create(
            study=study, prompt=prompt, annotator=person, word=prompt.positive_word,
            platform_hit_id="HIT1", platform_assignment_id=f"A-{worker}", place_released=released,
        )  # fmt: skip
        PlatformAssignment.objects.create(
            hit=hit, platform_assignment_id=f"A-{worker}", worker_id=worker, status="Submitted",
            human_answer=answer, synced_at=timezone.now(),
        )  # fmt: skip
        return answer

    confirmed_answer("AHOLDS", released=False)  # one place held, one free
    kept_out = [confirmed_answer(worker, released=True) for worker in ("AOUT1", "AOUT2")]
    restored, go = threading.Event(), threading.Event()

    def first_sync():
        with transaction.atomic():
            count = review._answer_places_handed_on(study_id=study.pk, prompt_id=prompt.pk, hit=hit)
            restored.set()
            go.wait(30)
            return count

    def second_sync():
        with transaction.atomic():
            return review._answer_places_handed_on(study_id=study.pk, prompt_id=prompt.pk, hit=hit)

    first_outcomes, second_outcomes = [], []
    first = in_thread(first_sync, first_outcomes)
    assert restored.wait(30)
    second = in_thread(second_sync, second_outcomes)
    deadline = time.monotonic() + 30
    while second.is_alive() and not waiting_for_a_row_lock():
        assert time.monotonic() < deadline, "neither done nor waiting for a lock"
        time.sleep(0.01)
    go.set()
    first.join(30)
    second.join(30)

    assert (first_outcomes, second_outcomes) == ([1], [0])
    holding = HumanAnswer.objects.filter(prompt=prompt, place_released=False)
    assert holding.count() == study.answers_per_prompt
    assert HumanAnswer.objects.get(pk=kept_out[0].pk).place_released is False  # oldest first
