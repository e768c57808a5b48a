"""A human study's answer that its platform never confirmed gives up its place on its prompt once
a sync's whole listing of its HIT did not have it past the grace (forged assignment ids, or a
hand-back that never arrived), as a batch's released work gives up its slot: in the
replacements plan, the study page, the next prompt's choice and the per-prompt limit. A sync
that confirms it later gives the place back."""

import contextlib
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from annotate.crowd.fake import FakePlatform
from annotate.crowd.services import replacements, review
from annotate.errors import ConflictError
from annotate.models import Annotator, AnnotatorKind
from annotate.roles import ADMIN
from annotate.selectors.identities import OPERATOR
from annotate.selectors.results import counted_human_answers
from annotate.verbalizer.models import HumanAnswer
from annotate.verbalizer.selectors import human_study_progress
from annotate.verbalizer.services import crowd
from annotate.verbalizer.services.humans import (
    human_answer_submit_within_limit,
    human_study_create,
    human_work_answer_submit,
    human_work_next,
    same_channel_q,
)
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.crowd.test_blocked_slots import _done_or_waiting_for_a_lock, _postgresql_only
from tests.annotate.verbalizer.helpers import fill
from tests.annotate.verbalizer.test_crowd_spending import _answer_on_fake, _publish
from tests.factories import AnnotatorFactory, UserFactory
from tests.threads import in_thread

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(db):
    """Two prompts (SST-2 items 1 and 2, flipped golden, direct), three answers each."""
    fill("SST-2", [True, False])
    evaluation_set = evaluation_set_create(
        name="places", datasets=["SST-2"], items=2, seed=1, mappings="flipped-golden"
    ).evaluation_set
    return human_study_create(evaluation_set=evaluation_set, name="flip", answers_per_prompt=3)


def _forged(hit, worker: str) -> HumanAnswer:
    """An answer under an assignment id the platform never issued (MTurk's requester API shows
    nothing before a submit, so the door cannot tell it from a real accept)."""
    ticket = crowd.mturk_prompt_open(
        hit=hit, assignment_id=f"FORGED-{worker}", hit_id=hit.hit_id, worker_id=worker,
        turk_submit_to="https://www.mturk.com",
    )  # fmt: skip
    return crowd.mturk_answer_submit(ticket=ticket, key=2, seconds=1.0)


def _fake_channel(study):
    progress = human_study_progress(study=study, platforms=["fake"], scope=OPERATOR)
    return progress, next(c for c in progress.channels if c.key == "fake")


def _plan_wanted(publication, now) -> dict[int, int]:
    """What the replacements plan says each HIT's prompt still needs from the platform."""
    return replacements._wanted(publication, now)


def test_forged_answers_hold_no_place_once_a_sync_past_the_grace_misses_them(study):
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    _answer_on_fake(hit, "REAL1")
    forged = [_forged(hit, "FAKE1"), _forged(hit, "FAKE2")]
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    assert _fake_channel(study)[1].prompts_done == 1  # within the grace: they wait, places kept

    later = timezone.now() + timedelta(hours=1)
    changes = review.publication_sync_reported(publication_id=publication.pk, now=later)
    FakePlatform().hit_update_expiration(hit_id=hit.hit_id, expires_at=timezone.now())

    assert changes.released == 2
    assert all(HumanAnswer.objects.get(pk=a.pk).place_released for a in forged)
    assert counted_human_answers(HumanAnswer.objects.filter(prompt=hit.prompt)).count() == 1
    progress, fake = _fake_channel(study)
    assert progress.counts[hit.prompt_id]["fake"] == 1
    assert fake.prompts_done == 0 and fake.answers == 1
    assert progress.outside == 2
    assert hit.prompt_id in progress.needing
    # The expired HIT is offered again for the two places the forger's answers held.
    assert _plan_wanted(publication, later)[hit.pk] == 2


def test_released_places_are_offered_again_and_taken_within_the_limit(study):
    """The next prompt's choice (human_work_next's SQL) and the per-prompt limit count the
    channel's places as the plan does: another worker of the platform gets the prompt whose
    places only forged answers filled, and may answer it."""
    publication = _publish(study, "fake", "0.20")
    first, second = publication.hits.order_by("id")
    _answer_on_fake(first, "REAL1")
    _forged(first, "FAKE1")
    _forged(first, "FAKE2")
    _answer_on_fake(second, "REAL2")
    _answer_on_fake(second, "REAL3")
    review.publication_sync(publication_id=publication.pk, now=timezone.now() + timedelta(hours=1))
    newcomer = AnnotatorFactory(kind=AnnotatorKind.CROWD, platform="fake", worker_id="NEW1")

    prompt, _, _ = human_work_next(study=study, annotator=newcomer)

    assert prompt.pk == first.prompt_id  # 1 place of 3 held, against the second's 2
    answer = human_answer_submit_within_limit(
        study=study, prompt_id=first.prompt_id, annotator=newcomer, key=1, seconds=1.0
    )
    assert answer.prompt_id == first.prompt_id


def test_a_full_prompt_is_still_refused_when_no_answer_of_it_was_released(study):
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    for worker in ("REAL1", "REAL2", "REAL3"):
        _answer_on_fake(hit, worker)
    review.publication_sync(publication_id=publication.pk, now=timezone.now() + timedelta(hours=1))
    newcomer = AnnotatorFactory(kind=AnnotatorKind.CROWD, platform="fake", worker_id="NEW1")

    prompt, _, _ = human_work_next(study=study, annotator=newcomer)

    assert prompt.pk != hit.prompt_id
    with pytest.raises(ConflictError):
        human_answer_submit_within_limit(
            study=study, prompt_id=hit.prompt_id, annotator=newcomer, key=1, seconds=1.0
        )


def test_a_hand_back_confirmed_by_a_later_sync_holds_its_place_again(study):
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    late = _answer_on_fake(hit, "SLOW1", hand_back=False)
    later = timezone.now() + timedelta(hours=1)
    released = review.publication_sync_reported(publication_id=publication.pk, now=later)
    assert released.released == 1
    assert _fake_channel(study)[0].counts.get(hit.prompt_id, {}).get("fake", 0) == 0
    assert _plan_wanted(publication, later)[hit.pk] == 3

    assignment_id = late.platform_assignment_id
    FakePlatform().worker_submit(assignment_id=assignment_id)
    again = later + timedelta(minutes=15)
    restored = review.publication_sync_reported(publication_id=publication.pk, now=again)

    assert restored.restored == 1 and restored.confirmed == 1
    late.refresh_from_db()
    assert not late.place_released
    progress, fake = _fake_channel(study)
    assert progress.counts[hit.prompt_id]["fake"] == 1 and progress.outside == 0
    assert _plan_wanted(publication, again)[hit.pk] == 2


def test_forged_answers_of_workers_counted_as_experts_give_the_in_house_places_back(study):
    """A platform's worker whom a researcher counts as an expert answers in the in-house
    channel: their forged answers, once released, no longer keep in-house annotators from
    the prompt."""
    publication = _publish(study, "fake", "0.20")
    first, second = publication.hits.order_by("id")
    forged = [_forged(first, worker) for worker in ("FAKE1", "FAKE2", "FAKE3")]
    for answer in forged:
        answer.annotator.kind = AnnotatorKind.EXPERT
        answer.annotator.save(update_fields=["kind"])
    colleague, reader = AnnotatorFactory(), AnnotatorFactory()
    human_answer_submit_within_limit(
        study=study, prompt_id=second.prompt_id, annotator=colleague, key=1, seconds=1.0
    )
    review.publication_sync(publication_id=publication.pk, now=timezone.now() + timedelta(hours=1))

    prompt, _, _ = human_work_next(study=study, annotator=reader)

    assert prompt.pk == first.prompt_id
    human_answer_submit_within_limit(
        study=study, prompt_id=first.prompt_id, annotator=reader, key=1, seconds=1.0
    )
    assert _fake_channel(study)[0].counts[first.prompt_id][""] == 1


# --- A blocked worker's answers ------------------------------------------------------------


@pytest.fixture
def admin(db):
    return UserFactory(username="places-admin", roles=[ADMIN])


def test_a_blocked_workers_answer_gives_up_its_place_and_no_sync_gives_it_back(study, admin):
    """A block frees the places its worker's answers held, as it frees a batch's slots: the
    plan offers the HIT again, the study page and the per-prompt limit see the place free, and
    a sync confirming the blocked answer again gives it no place: it never counts."""
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    blocked = _answer_on_fake(hit, "BAD1")
    for worker in ("REAL1", "REAL2"):
        _answer_on_fake(hit, worker)
    now = timezone.now()
    review.publication_sync(publication_id=publication.pk, now=now)
    assert _fake_channel(study)[0].counts[hit.prompt_id]["fake"] == 3

    review.worker_block(annotator_id=blocked.annotator_id, reason="bot", user=admin)
    later = now + timedelta(hours=1)
    review.publication_sync(publication_id=publication.pk, now=later)

    blocked.refresh_from_db()
    assert blocked.place_released and blocked.status == "submitted"  # kept, holding no place
    progress, fake = _fake_channel(study)
    assert progress.counts[hit.prompt_id]["fake"] == 2 and hit.prompt_id in progress.needing
    assert _plan_wanted(publication, later)[hit.pk] == 1
    newcomer = AnnotatorFactory(kind=AnnotatorKind.CROWD, platform="fake", worker_id="NEW1")
    human_answer_submit_within_limit(
        study=study, prompt_id=hit.prompt_id, annotator=newcomer, key=1, seconds=1.0
    )
    assert not counted_human_answers(HumanAnswer.objects.filter(pk=blocked.pk)).exists()


def test_an_unblock_leaves_a_refilled_prompts_answer_out_until_a_place_frees(study, admin):
    """The unblock gives the answer its place back only if its prompt still has one (a
    batch's unblocked work waits for a free slot the same way): the prompt refilled meanwhile
    keeps its three answers, the unblocked one stays out, kept and not counted, and takes the
    place a reject frees later on its HIT."""
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    blocked = _answer_on_fake(hit, "BAD1")
    real = [_answer_on_fake(hit, worker) for worker in ("REAL1", "REAL2")]
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    review.worker_block(annotator_id=blocked.annotator_id, reason="bot", user=admin)
    newcomer = AnnotatorFactory(kind=AnnotatorKind.CROWD, platform="fake", worker_id="NEW1")
    human_answer_submit_within_limit(
        study=study, prompt_id=hit.prompt_id, annotator=newcomer, key=1, seconds=1.0
    )

    done = review.worker_unblock(annotator_id=blocked.annotator_id, user=admin)

    assert (done.restored, done.left_out) == (0, 1)
    blocked.refresh_from_db()
    assert blocked.place_released
    assert _fake_channel(study)[0].counts[hit.prompt_id]["fake"] == 3
    assert not counted_human_answers(HumanAnswer.objects.filter(pk=blocked.pk)).exists()

    review.human_answer_reject(answer_id=real[0].pk, user=admin, feedback="wrong")
    blocked.refresh_from_db()
    assert not blocked.place_released
    assert counted_human_answers(HumanAnswer.objects.filter(pk=blocked.pk)).exists()
    assert _fake_channel(study)[0].counts[hit.prompt_id]["fake"] == 3


def _left_out_on_its_hit(study, admin):
    """BAD1, REAL1 and REAL2 fill the first HIT's three places; BAD1 is blocked, NEW1 takes the
    place, and the unblock leaves BAD1's confirmed answer out. Return the publication, the HIT
    and the answers of BAD1, REAL1, REAL2 and NEW1."""
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    answers = [_answer_on_fake(hit, worker) for worker in ("BAD1", "REAL1", "REAL2")]
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    review.worker_block(annotator_id=answers[0].annotator_id, reason="bot", user=admin)
    newcomer = AnnotatorFactory(kind=AnnotatorKind.CROWD, platform="fake", worker_id="NEW1")
    answers.append(
        human_answer_submit_within_limit(
            study=study, prompt_id=hit.prompt_id, annotator=newcomer, key=1, seconds=1.0
        )
    )
    done = review.worker_unblock(annotator_id=answers[0].annotator_id, user=admin)
    assert (done.restored, done.left_out) == (0, 1)
    return publication, hit, answers


def test_a_block_gives_the_places_it_frees_to_answers_left_out_on_the_hit(study, admin):
    """The block freed REAL1's place and left it free though BAD1's confirmed answer waited on
    the HIT for one: the prompt counted two answers of three, and the plan asked the platform
    for a new worker, until a reject or a sync of the HIT came by."""
    publication, hit, (left_out, real, _, _) = _left_out_on_its_hit(study, admin)

    review.worker_block(annotator_id=real.annotator_id, reason="bot", user=admin)

    left_out.refresh_from_db()
    assert not left_out.place_released
    assert counted_human_answers(HumanAnswer.objects.filter(pk=left_out.pk)).exists()
    progress, _ = _fake_channel(study)
    assert progress.counts[hit.prompt_id]["fake"] == 3
    assert _plan_wanted(publication, timezone.now()).get(hit.pk, 0) == 0


def test_a_crowd_place_a_block_frees_is_not_handed_to_a_worker_counted_as_an_expert(study, admin):
    """BAD1, left out on the HIT, is then counted as an expert: their answer belongs to the
    in-house channel, whose three places colleagues hold. The crowd place REAL1's block frees
    is the crowd's: handing it to BAD1 made the in-house channel count four answers of three."""
    publication, hit, (left_out, real, _, _) = _left_out_on_its_hit(study, admin)
    left_out.annotator.kind = AnnotatorKind.EXPERT
    left_out.annotator.save(update_fields=["kind"])
    for _ in range(3):
        human_answer_submit_within_limit(
            study=study, prompt_id=hit.prompt_id, annotator=AnnotatorFactory(), key=1, seconds=1.0
        )

    review.worker_block(annotator_id=real.annotator_id, reason="bot", user=admin)

    left_out.refresh_from_db()
    assert left_out.place_released
    progress, _ = _fake_channel(study)
    assert progress.counts[hit.prompt_id][""] == 3
    assert progress.counts[hit.prompt_id]["fake"] == 2


def test_a_confirmed_answer_of_a_worker_counted_as_an_expert_takes_a_free_in_house_place(study):
    """SLOW1, counted as an expert, answers in-house; a sync released their unconfirmed answer,
    and the platform confirms it later: the in-house channel has all three places free, so it
    takes one and counts (handing crowd places only on left it paid and counted nowhere)."""
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    late = _answer_on_fake(hit, "SLOW1", hand_back=False)
    late.annotator.kind = AnnotatorKind.EXPERT
    late.annotator.save(update_fields=["kind"])
    later = timezone.now() + timedelta(hours=1)
    assert review.publication_sync_reported(publication_id=publication.pk, now=later).released == 1

    FakePlatform().worker_submit(assignment_id=late.platform_assignment_id)
    again = later + timedelta(minutes=15)
    assert review.publication_sync_reported(publication_id=publication.pk, now=again).restored == 1

    late.refresh_from_db()
    assert not late.place_released
    assert counted_human_answers(HumanAnswer.objects.filter(pk=late.pk)).exists()
    assert _fake_channel(study)[0].counts[hit.prompt_id][""] == 1


@pytest.mark.django_db(transaction=True)
def test_an_unblock_and_an_in_house_answer_take_turns_for_the_last_in_house_place(
    study, admin, monkeypatch
):
    """BAD1, on a HIT but counted as an expert, is unblocked while a colleague answers the
    prompt's last in-house place: the unblock took only the HIT's lock, the answer the study's,
    and the in-house channel counted four answers of three."""
    _postgresql_only()
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    bad = _answer_on_fake(hit, "BAD1")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    bad.annotator.kind = AnnotatorKind.EXPERT
    bad.annotator.save(update_fields=["kind"])
    review.worker_block(annotator_id=bad.annotator_id, reason="bot", user=admin)
    for _ in range(2):
        human_work_answer_submit(
            study=study, prompt_id=hit.prompt_id, annotator=AnnotatorFactory(), key=1, seconds=1.0
        )
    marked, go, restore = threading.Event(), threading.Event(), review._unblocked_answers_restored

    def held_open(worker):
        done = restore(worker)
        marked.set()
        go.wait(30)
        return done

    monkeypatch.setattr(review, "_unblocked_answers_restored", held_open)
    unblocked, answered = [], []
    one = in_thread(
        lambda: review.worker_unblock(annotator_id=bad.annotator_id, user=admin), unblocked
    )
    assert marked.wait(30)
    last = AnnotatorFactory()
    two = in_thread(
        lambda: human_work_answer_submit(
            study=study, prompt_id=hit.prompt_id, annotator=last, key=1, seconds=1.0
        ),
        answered,
    )
    two.join(2)
    go.set()
    one.join(30)
    two.join(30)
    in_house = HumanAnswer.objects.filter(
        same_channel_q(AnnotatorFactory.build()), study=study, prompt_id=hit.prompt_id
    ).count()
    assert in_house == study.answers_per_prompt
    assert len(unblocked) == 1 and isinstance(answered[0], ConflictError)


@pytest.mark.django_db(transaction=True)
def test_a_block_handing_its_place_on_and_a_sync_of_the_hit_take_turns(study, admin, monkeypatch):
    """The block takes the HIT's row before its worker's answers, and hands the freed place on
    after marking them; a sync takes the HIT's row before the answers it links: the sync waits
    for the block, then finds the prompt full. A sync that locked the answers first held the
    waiting one while it waited for the blocked worker's, which the block held, and the
    block's hand-on then waited for the waiting one: PostgreSQL aborted one of the two."""
    _postgresql_only()
    publication, hit, (left_out, real, _, _) = _left_out_on_its_hit(study, admin)
    marked, go, original = threading.Event(), threading.Event(), review._blocked_answers_released

    def held_open(**kwargs):
        holding = original(**kwargs)
        marked.set()
        go.wait(30)
        return holding

    monkeypatch.setattr(review, "_blocked_answers_released", held_open)
    blocked, synced = [], []
    block = in_thread(
        lambda: review.worker_block(annotator_id=real.annotator_id, reason="bot", user=admin),
        blocked,
    )
    assert marked.wait(30)
    later = timezone.now() + timedelta(minutes=1)
    sync = in_thread(
        lambda: review.publication_sync(publication_id=publication.pk, now=later), synced
    )
    _done_or_waiting_for_a_lock(sync)
    go.set()
    block.join(30)
    sync.join(30)

    assert not isinstance(blocked[0], Exception), blocked
    assert not isinstance(synced[0], Exception), synced
    left_out.refresh_from_db()
    assert not left_out.place_released
    assert _fake_channel(study)[0].counts[hit.prompt_id]["fake"] == 3


def test_an_unblock_gives_the_place_back_when_the_prompt_still_has_it(study, admin):
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    blocked = _answer_on_fake(hit, "BAD1")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    review.worker_block(annotator_id=blocked.annotator_id, reason="bot", user=admin)
    assert _fake_channel(study)[0].counts.get(hit.prompt_id, {}).get("fake", 0) == 0

    done = review.worker_unblock(annotator_id=blocked.annotator_id, user=admin)

    assert (done.restored, done.left_out) == (1, 0)
    assert _fake_channel(study)[0].counts[hit.prompt_id]["fake"] == 1
    assert counted_human_answers(HumanAnswer.objects.filter(pk=blocked.pk)).exists()


@pytest.mark.django_db(transaction=True)
def test_a_sync_confirming_an_answer_while_its_workers_block_commits_gives_it_no_place(
    study, admin, monkeypatch
):
    """The sync that confirms a released answer waits for the answer's row, which the block
    holds once it has marked it, and reads the block after: the answer stays out. Read before,
    a block committing meanwhile left the blocked answer holding a place of its prompt."""
    _postgresql_only()
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    late = _answer_on_fake(hit, "SLOW1", hand_back=False)
    later = timezone.now() + timedelta(hours=1)
    assert review.publication_sync_reported(publication_id=publication.pk, now=later).released
    FakePlatform().worker_submit(assignment_id=late.platform_assignment_id)
    marked, go, original = threading.Event(), threading.Event(), review._blocked_answers_released

    def held_open(**kwargs):
        done = original(**kwargs)
        marked.set()
        go.wait(30)
        return done

    monkeypatch.setattr(review, "_blocked_answers_released", held_open)
    blocked, synced = [], []
    block = in_thread(
        lambda: review.worker_block(annotator_id=late.annotator_id, reason="bot", user=admin),
        blocked,
    )
    assert marked.wait(30)
    again = later + timedelta(minutes=15)
    sync = in_thread(
        lambda: review.publication_sync(publication_id=publication.pk, now=again), synced
    )
    _done_or_waiting_for_a_lock(sync)
    go.set()
    block.join(30)
    sync.join(30)

    assert not isinstance(blocked[0], Exception), blocked
    assert not isinstance(synced[0], Exception), synced
    late.refresh_from_db()
    assert late.place_released
    assert _fake_channel(study)[0].counts.get(hit.prompt_id, {}).get("fake", 0) == 0
    assert not counted_human_answers(HumanAnswer.objects.filter(pk=late.pk)).exists()


@pytest.mark.django_db(transaction=True)
def test_a_link_participant_counted_as_an_expert_and_an_in_house_answer_take_turns(
    study, monkeypatch
):
    """A self-hosted participant counted as an expert answers in-house, but took only their own
    row and the link's: a colleague's in-house answer, stored and not yet committed under the
    study's row, was not in their count, and the prompt ended with four in-house answers of
    three."""
    from annotate.verbalizer.services import humans

    _postgresql_only()
    link = _publish(study, "selfhosted", "0.20")
    participant = crowd.study_link_start(publication=link, params={"PROLIFIC_PID": "EXP1"})
    participant.annotator.kind = AnnotatorKind.EXPERT
    participant.annotator.save(update_fields=["kind"])
    prompt_id = study.prompts.order_by("pk").first().pk
    for _ in range(2):
        human_work_answer_submit(
            study=study, prompt_id=prompt_id, annotator=AnnotatorFactory(), key=1, seconds=1.0
        )
    stored, go, colleague = threading.Event(), threading.Event(), AnnotatorFactory()
    within_limit = humans.human_answer_submit_within_limit

    def held_open(**kwargs):
        answer = within_limit(**kwargs)
        if kwargs["annotator"] == colleague:
            stored.set()
            go.wait(20)
        return answer

    monkeypatch.setattr(humans, "human_answer_submit_within_limit", held_open)
    first, second = [], []
    one = in_thread(
        lambda: human_work_answer_submit(
            study=study, prompt_id=prompt_id, annotator=colleague, key=1, seconds=1.0
        ),
        first,
    )
    assert stored.wait(20)
    two = in_thread(
        lambda: crowd.link_answer_submit(
            participant=participant, prompt_id=prompt_id, key=1, seconds=1.0
        ),
        second,
    )
    two.join(2)
    go.set()
    one.join(20)
    two.join(20)
    in_house = HumanAnswer.objects.filter(
        same_channel_q(AnnotatorFactory.build()), study=study, prompt_id=prompt_id
    ).count()
    assert in_house == study.answers_per_prompt
    assert isinstance(second[0], ConflictError)


def test_an_answer_on_a_hit_of_a_worker_counted_as_an_expert_waits_when_in_house_is_full(study):
    """Three colleagues hold the prompt's in-house places; a platform's worker counted as an
    expert answers its HIT: the HIT's MaxAssignments was the only limit, and the in-house
    channel counted four answers of three. The answer is kept and waits for a place."""
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    for _ in range(3):
        human_work_answer_submit(
            study=study, prompt_id=hit.prompt_id, annotator=AnnotatorFactory(), key=1, seconds=1.0
        )
    AnnotatorFactory(kind=AnnotatorKind.EXPERT, platform="fake", worker_id="EXP1")

    answer = _answer_on_fake(hit, "EXP1")

    assert answer.pk is not None and answer.place_released
    assert not counted_human_answers(HumanAnswer.objects.filter(pk=answer.pk)).exists()
    assert _fake_channel(study)[0].counts[hit.prompt_id][""] == 3


def test_an_answer_on_a_hit_of_a_worker_counted_as_an_expert_counts_when_in_house_has_room(
    study,
):
    publication = _publish(study, "fake", "0.20")
    hit = publication.hits.order_by("id").first()
    AnnotatorFactory(kind=AnnotatorKind.EXPERT, platform="fake", worker_id="EXP1")

    answer = _answer_on_fake(hit, "EXP1")
    review.publication_sync(publication_id=publication.pk, now=timezone.now())

    answer.refresh_from_db()
    assert not answer.place_released
    assert counted_human_answers(HumanAnswer.objects.filter(pk=answer.pk)).exists()


def test_a_link_answer_takes_the_channel_of_the_kind_decided_before_its_lock(study):
    """The request read the participant (crowd) from its token; a researcher counted them as an
    expert before the answer's transaction locked their row: the answer went by the stale kind,
    skipped the in-house count and lock, and the in-house channel counted four of three."""
    link = _publish(study, "selfhosted", "0.20")
    participant = crowd.study_link_start(publication=link, params={"PROLIFIC_PID": "P1"})
    prompt_id = study.prompts.order_by("pk").first().pk
    for _ in range(3):
        human_work_answer_submit(
            study=study, prompt_id=prompt_id, annotator=AnnotatorFactory(), key=1, seconds=1.0
        )
    type(participant.annotator).objects.filter(pk=participant.annotator.pk).update(
        kind=AnnotatorKind.EXPERT
    )

    with pytest.raises(ConflictError):
        crowd.link_answer_submit(participant=participant, prompt_id=prompt_id, key=1, seconds=1.0)

    in_house = HumanAnswer.objects.filter(
        same_channel_q(AnnotatorFactory.build()), study=study, prompt_id=prompt_id
    )
    assert in_house.count() == study.answers_per_prompt


@pytest.mark.django_db(transaction=True)
def test_two_blocks_of_workers_on_two_studies_each_hand_their_places_on(monkeypatch):
    """W answered study 2 then study 1, V study 1 then study 2; each HIT has a waiting answer of
    a worker counted as an expert (the in-house channel full). Each block handed its places on
    answer by answer, taking the studies' rows in its answers' order: the two blocks deadlocked
    (PostgreSQL aborted one after the platform had been told of the block)."""
    _postgresql_only()
    fill("SST-2", [True, False])
    evaluation_set = evaluation_set_create(
        name="two", datasets=["SST-2"], items=2, seed=1, mappings="flipped-golden"
    ).evaluation_set
    studies = [
        human_study_create(evaluation_set=evaluation_set, name=name, answers_per_prompt=3)
        for name in ("s1", "s2")
    ]
    publications = [_publish(study, "fake", "0.20") for study in studies]
    hits = [list(publication.hits.order_by("prompt_id")) for publication in publications]
    for study, its_hits in zip(studies, hits, strict=True):
        for i, hit in enumerate(its_hits):
            for _ in range(3):
                human_work_answer_submit(
                    study=study, prompt_id=hit.prompt_id, annotator=AnnotatorFactory(),
                    key=1, seconds=1.0,
                )  # fmt: skip
            waiting = f"EXP{study.pk}-{i}"
            AnnotatorFactory(kind=AnnotatorKind.EXPERT, platform="fake", worker_id=waiting)
            assert _answer_on_fake(hit, waiting).place_released  # the in-house places taken
    for hit, worker in ((hits[1][0], "W"), (hits[0][1], "W"), (hits[0][0], "V"), (hits[1][1], "V")):
        _answer_on_fake(hit, worker)
    for publication in publications:
        review.publication_sync(publication_id=publication.pk, now=timezone.now())
    admin = UserFactory(username="two-admin", roles=[ADMIN])
    barrier, seen = threading.Barrier(2, timeout=10), threading.local()
    handed_on = review._answer_place_handed_on

    def paused(answer):  # each block hands its first place on, then waits for the other's
        done = handed_on(answer)
        if not getattr(seen, "once", False):
            seen.once = True
            # The other may wait for this one's locks: then there is nothing to meet.
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()
        return done

    monkeypatch.setattr(review, "_answer_place_handed_on", paused)
    outcomes = []
    blocks = [
        in_thread(
            lambda who=who: review.worker_block(
                annotator_id=Annotator.objects.get(platform="fake", worker_id=who).pk,
                reason="bot",
                user=admin,
            ),
            outcomes,
        )
        for who in ("W", "V")
    ]
    for block in blocks:
        block.join(30)
    assert len(outcomes) == 2 and not [o for o in outcomes if isinstance(o, Exception)]
