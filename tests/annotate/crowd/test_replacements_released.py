"""Released work whose hand-back reached MTurk after the last sync fills its place: the
replacements plan (the page's Check, the API's check) and Add ask MTurk about those HITs'
assignments first, and never pay for a worker in its place. Real boto3 and real HTTP against the
fake MTurk server."""

from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.services import replacements, review
from annotate.errors import PublishError
from annotate.models import Assignment
from annotate.selectors.results import counted_assignment_q
from annotate.verbalizer.models import HumanAnswer
from tests.annotate.crowd.test_counted_work import _hand_back
from tests.annotate.crowd.test_review import _sync, work
from tests.annotate.verbalizer.test_crowd import (  # noqa: F401  the study on MTurk
    answer_hit,
    on_mturk,
    right_key,
    study,
)

pytestmark = pytest.mark.django_db
CHECK = {"action": "check"}


def _released_then_handed_back(client, live, fake_mturk, admin_user):
    """The first HIT's three workers submit here; the third one's hand-back has not reached
    MTurk when a sync past the grace releases the work's slot, and reaches it just after."""
    hit = live.hits.order_by("id").first()
    work(client, fake_mturk, hit, "AW0")
    work(Client(), fake_mturk, hit, "AW1")
    slow = work(Client(), fake_mturk, hit, "AW2", post_back=False)
    _sync(live)
    slow.refresh_from_db()
    assert slow.is_late  # released: the task needs a worker in its place, as stored here
    assert replacements._wanted(live, timezone.now())[hit.pk] == 1  # as stored here
    _hand_back(fake_mturk, slow.platform_assignment_id, expect=200)  # MTurk: submitted
    return hit, slow


def test_the_check_finds_the_released_work_handed_back_and_plans_no_replacement(
    client, live, fake_mturk, admin_user
):
    hit, slow = _released_then_handed_back(client, live, fake_mturk, admin_user)
    client.force_login(admin_user)

    page = client.post(reverse("crowd:replacements", args=[live.pk]), CHECK).text

    assert 'id="replacement-none"' in page and "confirm_total" not in page  # nothing to pay
    assert "1 released assignment was handed back since the last sync" in page
    slow.refresh_from_db()
    assert not slow.is_late  # confirmed: it holds its slot and counts
    counted = set(
        Assignment.objects.filter(counted_assignment_q(), task_id=hit.task_id).values_list(
            "annotator__worker_id", flat=True
        )
    )
    assert counted == {"AW0", "AW1", "AW2"}
    with pytest.raises(PublishError, match="No task of this publication needs"):
        replacements.replacements_create(
            publication_id=live.pk, confirm_total=Decimal("1.20"), now=timezone.now(),
            user=admin_user,
        )  # fmt: skip
    assert "CreateAdditionalAssignmentsForHIT" not in fake_mturk.state.calls
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 3


def test_the_api_check_says_what_it_found_and_plans_nothing(client, live, fake_mturk, admin_user):
    _released_then_handed_back(client, live, fake_mturk, admin_user)
    client.force_login(admin_user)

    plan = client.post(reverse("crowd-api:replacements-check", args=[live.pk])).json()

    assert plan["hits"] == [] and plan["total_usd"] == "0.00"
    assert plan["handed_back"] == 1


def test_an_add_pressed_after_the_hand_back_arrived_pays_nothing(
    client, live, fake_mturk, admin_user
):
    """The Add itself looks first: a total confirmed without a fresh Check ($1.20, what the
    plan asked for this place before) is refused, nothing is asked, and the admin is told why."""
    hit, slow = _released_then_handed_back(client, live, fake_mturk, admin_user)
    client.force_login(admin_user)

    added = client.post(
        reverse("crowd:replacements", args=[live.pk]), {"confirm_total": "1.20"}, follow=True
    ).text

    assert "CreateAdditionalAssignmentsForHIT" not in fake_mturk.state.calls
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 3
    assert "1 released assignment was handed back since the last sync" in added
    slow.refresh_from_db()
    assert not slow.is_late


def test_only_the_place_no_confirmed_work_fills_is_paid_for(client, live, fake_mturk, admin_user):
    """On one HIT, the second worker's work is rejected and the third one's released, then
    handed back: one assignment is asked for, in place of the rejected work, and paid once."""
    hit = live.hits.order_by("id").first()
    work(client, fake_mturk, hit, "AW0")
    rejected = work(Client(), fake_mturk, hit, "AW1")
    slow = work(Client(), fake_mturk, hit, "AW2", post_back=False)
    _sync(live)
    review.assignment_reject(assignment_id=rejected.pk, user=admin_user, feedback="random")
    _hand_back(fake_mturk, slow.platform_assignment_id, expect=200)

    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )

    assert (plan.assignments, plan.total_usd) == (1, Decimal("1.20"))
    assert plan.handed_back == 1
    done = replacements.replacements_create(
        publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(), user=admin_user
    )
    assert (done.added, done.failed) == (1, [])
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 4
    assert fake_mturk.state.calls.count("CreateAdditionalAssignmentsForHIT") == 1


def test_a_study_answer_handed_back_since_the_last_sync_is_not_replaced(
    client,
    on_mturk,  # noqa: F811  the fixture imported above
    fake_mturk,
    admin_user,
):
    """A human study's answer released by a sync (its place given up) and handed back to MTurk
    just after: the plan restores its place (as a sync does) and asks for nothing."""
    hit = on_mturk.hits.order_by("id").first()
    answer_hit(client, fake_mturk, hit, "AS0", right_key(hit))
    slow_id = answer_hit(Client(), fake_mturk, hit, "AS1", right_key(hit), hand_back=False)
    later = timezone.now() + review.release_grace()
    review.publication_sync(publication_id=on_mturk.pk, now=later)
    slow = HumanAnswer.objects.get(platform_assignment_id=slow_id)
    assert slow.place_released
    _hand_back(fake_mturk, slow_id, expect=200)

    with pytest.raises(PublishError, match="1 released answer was handed back since the last"):
        replacements.replacements_create(
            publication_id=on_mturk.pk, confirm_total=Decimal("0.00"), now=later, user=admin_user
        )

    slow.refresh_from_db()
    assert not slow.place_released
    plan = replacements.replacements_plan(publication_id=on_mturk.pk, now=later, user=admin_user)
    assert (plan.handed_back, plan.assignments) == (0, 0)
    assert "CreateAdditionalAssignmentsForHIT" not in fake_mturk.state.calls
