"""An in-house annotator's answers to one prompt in two studies of a set, posted at once (two
tabs): reports read one answer per person and prompt, so the second must be refused, not stored
to fill one of the prompt's places and count nowhere."""

import threading
import time

import pytest
from django.db import connection

from annotate.errors import ConflictError
from annotate.models import Annotator
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.services import humans
from annotate.verbalizer.services.humans import human_study_create, human_work_answer_submit
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.verbalizer.helpers import fill
from tests.factories import UserFactory
from tests.threads import in_thread


def _waiting_for_a_row_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


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
    while tab_b.is_alive() and not _waiting_for_a_row_lock():
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
