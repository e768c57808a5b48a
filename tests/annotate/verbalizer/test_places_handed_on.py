"""A human study's places per channel after answers were given: a kind decided later moves a
person's answers into the channel of that kind within its answers per prompt, every in-house
place that frees goes to the oldest answer counted in-house waiting for one (on whichever HIT,
or through the link), every place of the web accounts' crowd channel that frees goes to the
oldest of its answers waiting for one, and a reject hands its place on in the verdict's own
transaction."""

import threading

import pytest
from django.utils import timezone

from annotate.crowd.platforms import platform_class
from annotate.crowd.services import review
from annotate.errors import ConflictError
from annotate.models import AnnotatorKind
from annotate.selectors.identities import OPERATOR
from annotate.selectors.results import counted_human_answers
from annotate.services.annotators import annotator_kind_set
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.selectors import human_study_progress
from annotate.verbalizer.services import crowd
from annotate.verbalizer.services.humans import (
    human_answer_submit_within_limit,
    human_work_answer_submit,
)
from tests.annotate.crowd.test_blocked_slots import _done_or_waiting_for_a_lock, _postgresql_only
from tests.annotate.verbalizer.test_crowd_spending import _answer_on_fake, _publish
from tests.annotate.verbalizer.test_released_places import _left_out_on_its_hit, admin, study
from tests.factories import AnnotatorFactory
from tests.threads import in_thread, other_verdict_first

pytestmark = pytest.mark.django_db

__all__ = ["admin", "study"]  # fixtures


def _counts(study, prompt_id: int) -> dict[str, int]:
    """The study page's answers holding a place per channel ("" in-house, "fake")."""
    progress = human_study_progress(study=study, platforms=["fake"], scope=OPERATOR)
    return progress.counts[prompt_id]


def _counted(answer: HumanAnswer) -> bool:
    return counted_human_answers(HumanAnswer.objects.filter(pk=answer.pk)).exists()


def _in_house(study, prompt_id: int, times: int) -> list:
    return [
        human_work_answer_submit(
            study=study, prompt_id=prompt_id, annotator=AnnotatorFactory(), key=1, seconds=1.0
        )
        for _ in range(times)
    ]


# --- A kind decided after answering -----------------------------------------------------------


def test_a_worker_counted_as_an_expert_after_answering_waits_when_in_house_is_full(study):
    """Three colleagues hold the prompt's in-house places; a platform's worker whose answer
    counts in the crowd channel is then counted as an expert: their answer moved in-house
    unchecked, and the in-house channel counted four answers of three."""
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    answer = _answer_on_fake(hit, "W1")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    _in_house(study, hit.prompt_id, 3)
    assert _counted(answer)

    annotator_kind_set(annotator=answer.annotator, kind=AnnotatorKind.EXPERT, now=timezone.now())

    answer.refresh_from_db()
    assert answer.place_released and not _counted(answer)
    assert _counts(study, hit.prompt_id) == {"": 3, "fake": 0}


def test_a_worker_counted_as_an_expert_after_answering_counts_when_in_house_has_room(study):
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    answer = _answer_on_fake(hit, "W1")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    _in_house(study, hit.prompt_id, 2)

    annotator_kind_set(annotator=answer.annotator, kind=AnnotatorKind.EXPERT, now=timezone.now())

    answer.refresh_from_db()
    assert not answer.place_released and _counted(answer)
    assert _counts(study, hit.prompt_id) == {"": 3, "fake": 0}


def test_the_crowd_place_a_kind_change_frees_goes_to_the_answer_waiting_on_the_hit(study, admin):
    """REAL1 is then counted as an expert: the crowd place their answer held went to nobody,
    though BAD1's confirmed answer waited on the HIT for one, until a sync of the HIT came."""
    _, hit, (left_out, real, _, _) = _left_out_on_its_hit(study, admin)

    annotator_kind_set(annotator=real.annotator, kind=AnnotatorKind.EXPERT, now=timezone.now())

    left_out.refresh_from_db()
    assert not left_out.place_released and _counted(left_out)
    assert _counts(study, hit.prompt_id) == {"": 1, "fake": 3}


def test_an_undecided_worker_counted_as_a_crowd_worker_waits_when_the_crowd_is_full(study):
    """An account of no decided kind holds a place in no channel; decided a crowd worker once
    the platform's three places are taken, its answer waits instead of making it four."""
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    answers = [_answer_on_fake(hit, worker) for worker in ("U1", "REAL1", "REAL2")]
    undecided = answers[0].annotator
    annotator_kind_set(annotator=undecided, kind=AnnotatorKind.UNDECIDED, now=timezone.now())
    newcomer = AnnotatorFactory(kind=AnnotatorKind.CROWD, platform="fake", worker_id="NEW1")
    human_answer_submit_within_limit(
        study=study, prompt_id=hit.prompt_id, annotator=newcomer, key=1, seconds=1.0
    )
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    assert _counts(study, hit.prompt_id)["fake"] == 3

    annotator_kind_set(annotator=undecided, kind=AnnotatorKind.CROWD, now=timezone.now())

    answers[0].refresh_from_db()
    assert answers[0].place_released
    assert _counts(study, hit.prompt_id)["fake"] == 3


def test_an_in_house_answer_takes_the_channel_of_the_kind_decided_before_its_lock(study):
    """The request read the annotator (a crowd worker) before a researcher counted them as an
    expert: the answer went by the stale kind, counted the crowd channel, and the in-house
    channel ended with four answers of three."""
    prompt_id = study.prompts.order_by("pk").first().pk
    _in_house(study, prompt_id, 3)
    stale = AnnotatorFactory(kind=AnnotatorKind.CROWD)
    type(stale).objects.filter(pk=stale.pk).update(kind=AnnotatorKind.EXPERT)

    with pytest.raises(ConflictError):
        human_work_answer_submit(
            study=study, prompt_id=prompt_id, annotator=stale, key=1, seconds=1.0
        )

    assert _counts(study, prompt_id)[""] == 3


# --- The web accounts' crowd channel -----------------------------------------------------------


def _web_crowd_answer(study, prompt_id: int, kind: str = AnnotatorKind.CROWD) -> HumanAnswer:
    """An answer of a web account (platform "") of `kind` on the answering page."""
    return human_work_answer_submit(
        study=study, prompt_id=prompt_id, annotator=AnnotatorFactory(kind=kind), key=1, seconds=1.0
    )


def _web_crowd_waiting(study):
    """Three web accounts counted as crowd workers hold the first prompt's three places of the
    crowd channel of platform "" (same_channel_q); LATE, of no decided kind when answering, is
    then counted as a crowd worker and waits. Return the holders' answers and LATE's."""
    prompt_id = study.prompts.order_by("pk").first().pk
    held = [_web_crowd_answer(study, prompt_id) for _ in range(3)]
    waiting = _web_crowd_answer(study, prompt_id, kind=AnnotatorKind.UNDECIDED)
    annotator_kind_set(annotator=waiting.annotator, kind=AnnotatorKind.CROWD, now=timezone.now())
    waiting.refresh_from_db()
    assert waiting.place_released and not _counted(waiting)
    return held, waiting


def test_a_web_crowd_place_a_kind_change_frees_goes_to_the_web_crowd_answer_waiting(study):
    """A holder then set back to undecided freed a place of that channel, but the hand-on of
    an answer with neither HIT nor link gave in-house places only: LATE waited for good (no
    sync ever comes to a web account's answer)."""
    held, waiting = _web_crowd_waiting(study)

    annotator_kind_set(
        annotator=held[0].annotator, kind=AnnotatorKind.UNDECIDED, now=timezone.now()
    )

    waiting.refresh_from_db()
    assert not waiting.place_released and _counted(waiting)


def test_a_web_crowd_place_a_reject_frees_goes_to_the_web_crowd_answer_waiting(study, admin):
    """The same channel freed by a reject (crowd_worker_q lets an admin reject an in-house
    account counted as a crowd worker): the reject handed on in-house only, and LATE waited."""
    held, waiting = _web_crowd_waiting(study)

    review.human_answer_reject(answer_id=held[0].pk, user=admin, feedback="copied")

    waiting.refresh_from_db()
    assert not waiting.place_released and _counted(waiting)


def test_a_web_crowd_answer_an_unblock_left_out_takes_the_next_place_that_frees(study, admin):
    """A blocked web account counted as a crowd worker is unblocked once the prompt's three
    places of their channel were taken: their answer is left out, and takes the place a
    reject frees next (it waited for good: nothing handed that channel's places on)."""
    prompt_id = study.prompts.order_by("pk").first().pk
    blocked = _web_crowd_answer(study, prompt_id)
    review.worker_block(annotator_id=blocked.annotator_id, reason="check", user=admin)
    held = [_web_crowd_answer(study, prompt_id) for _ in range(3)]

    done = review.worker_unblock(annotator_id=blocked.annotator_id, user=admin)
    assert (done.restored, done.left_out) == (0, 1)
    review.human_answer_reject(answer_id=held[0].pk, user=admin, feedback="copied")

    blocked.refresh_from_db()
    assert not blocked.place_released and _counted(blocked)


@pytest.mark.django_db(transaction=True)
def test_an_unblock_of_a_web_crowd_account_and_a_link_answer_take_turns(study, admin, monkeypatch):
    """A link participant counted as an expert answers under the link's row, then the study's;
    an unblock of a web account counted as a crowd worker held the study's row and then took
    the link's to give the answer its place back, the other order: PostgreSQL aborted one.
    A web account's answers take turns on the study's row alone."""
    from annotate.crowd.services import workers

    _postgresql_only()
    link = _publish(study, "selfhosted", "0.20")
    participant = crowd.study_link_start(publication=link, params={"PROLIFIC_PID": "EXP1"})
    participant.annotator.kind = AnnotatorKind.EXPERT
    participant.annotator.save(update_fields=["kind"])
    prompts = list(study.prompts.order_by("pk").values_list("pk", flat=True))
    blocked = _web_crowd_answer(study, prompts[0])
    review.worker_block(annotator_id=blocked.annotator_id, reason="check", user=admin)
    locked, go, link_lock = threading.Event(), threading.Event(), workers.study_link_lock

    def held_open(**kwargs):
        link_lock(**kwargs)
        locked.set()
        go.wait(30)

    monkeypatch.setattr(workers, "study_link_lock", held_open)
    answered, unblocked = [], []
    answer = in_thread(
        lambda: crowd.link_answer_submit(
            participant=participant, prompt_id=prompts[1], key=1, seconds=1.0
        ),
        answered,
    )
    assert locked.wait(30)
    unblock = in_thread(
        lambda: review.worker_unblock(annotator_id=blocked.annotator_id, user=admin), unblocked
    )
    _done_or_waiting_for_a_lock(unblock)
    go.set()
    answer.join(30)
    unblock.join(30)

    assert not isinstance(answered[0], Exception), answered
    assert not isinstance(unblocked[0], Exception), unblocked
    blocked.refresh_from_db()
    assert not blocked.place_released and _counted(blocked)


# --- An unblock and a kind decided meanwhile -------------------------------------------------


def test_an_unblock_whose_worker_was_counted_as_an_expert_meanwhile_restores_in_house(
    study, admin, monkeypatch
):
    """A researcher counts the blocked worker as an expert while the unblock's platform call
    is out. The unblock went by the kind it read before the call (crowd): no answer of that
    channel was found, so the answer was left out though the in-house channel had room, and
    waited until another in-house place freed (for a link participant, maybe never)."""
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    answer = _answer_on_fake(hit, "W1")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    review.worker_block(annotator_id=answer.annotator_id, reason="check", user=admin)
    # The class get_platform uses now (a test elsewhere reloads annotate.crowd.fake, after
    # which the FakePlatform imported here is no longer it: the patch went unheard in CI).
    offline = platform_class("fake")
    unblock_there = offline.worker_unblock

    def kind_decided_during_the_call(self, **kwargs):
        annotator_kind_set(
            annotator=answer.annotator, kind=AnnotatorKind.EXPERT, now=timezone.now()
        )
        return unblock_there(self, **kwargs)

    monkeypatch.setattr(offline, "worker_unblock", kind_decided_during_the_call)
    done = review.worker_unblock(annotator_id=answer.annotator_id, user=admin)

    answer.refresh_from_db()
    assert (done.restored, done.left_out) == (1, 0)
    assert not answer.place_released and _counted(answer)
    assert _counts(study, hit.prompt_id) == {"": 1, "fake": 0}


def test_a_blocked_web_crowd_account_made_an_expert_can_still_be_unblocked(study, admin):
    """A web account counted as a crowd worker is blocked, then made an expert on the
    Annotators page: the unblock looked the account up among crowd workers only (an in-house
    expert is none), answered "No such crowd worker", and the block stayed on for good, the
    expert's answers counting in no result."""
    prompt_id = study.prompts.order_by("pk").first().pk
    blocked = _web_crowd_answer(study, prompt_id)
    review.worker_block(annotator_id=blocked.annotator_id, reason="check", user=admin)
    annotator_kind_set(annotator=blocked.annotator, kind=AnnotatorKind.EXPERT, now=timezone.now())
    assert not _counted(blocked)

    done = review.worker_unblock(annotator_id=blocked.annotator_id, user=admin)

    blocked.refresh_from_db()
    assert (done.restored, done.left_out) == (1, 0)
    assert not blocked.place_released and _counted(blocked)
    assert _counts(study, prompt_id)[""] == 1


def test_a_web_account_is_blocked_and_unblocked_without_a_call_to_mturk(
    study, admin, mturk_settings, fake_mturk
):
    """A web account has no platform account: with CROWD_BACKEND=mturk its block and its
    unblock were sent to MTurk with an empty WorkerId, which boto3 refuses before sending, so
    neither could be done (the page a 500)."""
    prompt_id = study.prompts.order_by("pk").first().pk
    answer = _web_crowd_answer(study, prompt_id)
    review.worker_block(annotator_id=answer.annotator_id, reason="check", user=admin)
    assert not _counted(answer)
    annotator_kind_set(annotator=answer.annotator, kind=AnnotatorKind.EXPERT, now=timezone.now())

    review.worker_unblock(annotator_id=answer.annotator_id, user=admin)

    answer.refresh_from_db()
    assert _counted(answer)
    assert not {"CreateWorkerBlock", "DeleteWorkerBlock"} & set(fake_mturk.state.calls)


# --- In-house places freed elsewhere ----------------------------------------------------------


def _expert_waiting_on_the_hit(study):
    """A link participant counted as an expert and two colleagues hold the first prompt's three
    in-house places; EXP1, a worker counted as an expert, answers on its HIT (confirmed) and
    waits. Return the link participant's answer, the colleagues' and EXP1's."""
    publication = _publish(study, "fake", "0.20")
    link = _publish(study, "selfhosted", "0.20")
    hit = publication.hits.order_by("id").first()
    participant = crowd.study_link_start(publication=link, params={"PROLIFIC_PID": "P1"})
    participant.annotator.kind = AnnotatorKind.EXPERT
    participant.annotator.save(update_fields=["kind"])
    through_link = crowd.link_answer_submit(
        participant=participant, prompt_id=hit.prompt_id, key=1, seconds=1.0
    )
    colleagues = _in_house(study, hit.prompt_id, 2)
    AnnotatorFactory(kind=AnnotatorKind.EXPERT, platform="fake", worker_id="EXP1")
    waiting = _answer_on_fake(hit, "EXP1")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    waiting.refresh_from_db()
    assert waiting.place_released
    return through_link, colleagues, waiting


def test_an_in_house_place_a_link_reject_frees_goes_to_an_expert_waiting_on_a_hit(study, admin):
    """The reject handed the place on to the link's answers only: EXP1 waited on its HIT
    until the HIT's next sync, the in-house channel two answers of three meanwhile."""
    through_link, _, waiting = _expert_waiting_on_the_hit(study)

    review.human_answer_reject(answer_id=through_link.pk, user=admin, feedback="bot")

    waiting.refresh_from_db()
    assert not waiting.place_released and _counted(waiting)
    assert _counts(study, waiting.prompt_id)[""] == 3


def test_an_in_house_place_a_colleagues_kind_frees_goes_to_an_expert_waiting_on_a_hit(study):
    _, colleagues, waiting = _expert_waiting_on_the_hit(study)

    annotator_kind_set(
        annotator=colleagues[0].annotator, kind=AnnotatorKind.UNDECIDED, now=timezone.now()
    )

    waiting.refresh_from_db()
    assert not waiting.place_released and _counted(waiting)
    assert _counts(study, waiting.prompt_id)[""] == 3


@pytest.mark.django_db(transaction=True)
def test_an_in_house_hand_on_and_a_sync_of_the_waiting_answers_hit_take_turns(
    study, admin, monkeypatch
):
    """The link's reject holds the study's row and hands the in-house place on to EXP1's
    answer on the HIT; a sync of that HIT locked the HIT's answers (EXP1's among them) and
    then waited for the study's row to hand places on itself: PostgreSQL aborted one of the
    two. The sync takes the study's row before any answer's, so it waits for the reject."""
    _postgresql_only()
    through_link, _, waiting = _expert_waiting_on_the_hit(study)
    held, go, original = threading.Event(), threading.Event(), review._answer_place_handed_on

    def held_open(answer):
        held.set()
        go.wait(30)
        return original(answer)

    monkeypatch.setattr(review, "_answer_place_handed_on", held_open)
    rejected, synced = [], []
    reject = in_thread(
        lambda: review.human_answer_reject(answer_id=through_link.pk, user=admin, feedback="x"),
        rejected,
    )
    assert held.wait(30)
    publication = waiting.study.publications.get(platform="fake")
    sync = in_thread(
        lambda: review.publication_sync(publication_id=publication.pk, now=timezone.now()),
        synced,
    )
    _done_or_waiting_for_a_lock(sync)
    go.set()
    reject.join(30)
    sync.join(30)

    assert not isinstance(rejected[0], Exception), rejected
    assert not isinstance(synced[0], Exception), synced
    waiting.refresh_from_db()
    assert not waiting.place_released
    assert _counts(study, waiting.prompt_id)[""] == 3


# --- A reject's verdict and its hand-on ------------------------------------------------------


def test_a_reject_whose_hand_on_fails_stores_no_verdict_and_sent_again_does_both(
    study, admin, monkeypatch
):
    """The verdict was stored in a transaction of its own before the place was handed on: a
    failure in between left the answer rejected here and BAD1 waiting with a place free,
    and a reject sent again found nothing to do."""
    _, hit, (left_out, real, _, _) = _left_out_on_its_hit(study, admin)
    handed_on = review._answer_place_handed_on

    def failing(answer):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(review, "_answer_place_handed_on", failing)
    with pytest.raises(RuntimeError):
        review.human_answer_reject(answer_id=real.pk, user=admin, feedback="wrong")
    real.refresh_from_db()
    assert real.status == "submitted"

    monkeypatch.setattr(review, "_answer_place_handed_on", handed_on)
    review.human_answer_reject(answer_id=real.pk, user=admin, feedback="wrong")

    real.refresh_from_db()
    left_out.refresh_from_db()
    assert real.status == "rejected"
    assert not left_out.place_released and _counted(left_out)
    assert _counts(study, hit.prompt_id)["fake"] == 3


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_kind_change_waits_for_an_answer_in_flight_and_moves_it_too(study, monkeypatch):
    """Three colleagues hold the prompt's in-house places. A web account counted as a crowd
    worker answers it (its crowd channel has room) while a researcher counts them as an
    expert. The change holds the person's row, as the answer does before reading their kind:
    it waits for the answer, then finds it and moves it in-house, where it waits for a place.
    Had the change not waited, it would have moved no answer, and the answer, stored by the
    kind read before, would have counted in-house as a fourth answer of three."""
    _postgresql_only()
    prompt_id = study.prompts.order_by("pk").first().pk
    _in_house(study, prompt_id, 3)
    person = AnnotatorFactory(kind=AnnotatorKind.CROWD)
    from annotate.verbalizer.services import humans

    storing, go, original = threading.Event(), threading.Event(), humans.human_answer_submit
    monkeypatch.setattr(
        humans,
        "human_answer_submit",
        lambda **kwargs: (storing.set(), go.wait(30), original(**kwargs))[2],
    )
    answered, changed = [], []
    answer = in_thread(
        lambda: human_work_answer_submit(
            study=study, prompt_id=prompt_id, annotator=person, key=1, seconds=1.0
        ),
        answered,
    )
    assert storing.wait(30)
    change = in_thread(
        lambda: annotator_kind_set(
            annotator=type(person).objects.get(pk=person.pk),
            kind=AnnotatorKind.EXPERT,
            now=timezone.now(),
        ),
        changed,
    )
    _done_or_waiting_for_a_lock(change)
    assert change.is_alive()  # waiting for the answer's hold on the person's row
    go.set()
    answer.join(30)
    change.join(30)
    (stored,) = answered
    assert isinstance(stored, HumanAnswer) and len(changed) == 1, (answered, changed)
    stored.refresh_from_db()
    assert stored.place_released and not _counted(stored)
    assert _counts(study, prompt_id)[""] == 3


def test_an_approve_that_read_submitted_does_not_undo_a_reject_that_came_meanwhile(
    study, admin, monkeypatch
):
    """Admin B's reject handed the place on to LATE, then admin A's approve, which had read the
    answer submitted, wrote APPROVED over it: a prompt of three places counting four."""
    held, waiting = _web_crowd_waiting(study)
    other_verdict_first(
        monkeypatch,
        lambda: review.human_answer_reject(answer_id=held[0].pk, user=admin, feedback="copied"),
    )
    with pytest.raises(ConflictError, match="rejected meanwhile"):
        review.human_answer_approve(answer_id=held[0].pk, user=admin)
    held[0].refresh_from_db()
    waiting.refresh_from_db()
    assert held[0].status == "rejected" and not _counted(held[0])
    assert _counted(waiting)
    prompt_id = held[0].prompt_id
    assert counted_human_answers(HumanAnswer.objects.filter(prompt_id=prompt_id)).count() == 3


def test_a_reject_that_read_submitted_does_not_undo_an_approve_that_came_meanwhile(
    study, admin, monkeypatch
):
    held, waiting = _web_crowd_waiting(study)
    other_verdict_first(
        monkeypatch, lambda: review.human_answer_approve(answer_id=held[0].pk, user=admin)
    )
    with pytest.raises(ConflictError, match="approved meanwhile"):
        review.human_answer_reject(answer_id=held[0].pk, user=admin, feedback="copied")
    held[0].refresh_from_db()
    waiting.refresh_from_db()
    assert held[0].status == "approved" and _counted(held[0])
    assert waiting.place_released and not _counted(waiting)
