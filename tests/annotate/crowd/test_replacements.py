"""Workers in place of rejected work, on the publication's own HITs: real boto3 against the fake
MTurk server (CreateAdditionalAssignmentsForHIT), and the offline demo platform's pages."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.fake import FakePlatform
from annotate.crowd.models import (
    HitExtension,
    HitExtensionStatus,
    PlatformAssignment,
    PlatformCall,
)
from annotate.crowd.services import replacements, review
from annotate.errors import ConflictError, PermissionDeniedError, PublishError
from annotate.models import AssignmentStatus
from annotate.selectors.results import counted_assignment_q
from tests.annotate.crowd.conftest import publish_form, published_on_fake
from tests.annotate.crowd.test_review import _sync, work

pytestmark = pytest.mark.django_db
# The page's press that asks the platform what the HITs still offer (its GET asks nothing).
CHECK = {"action": "check"}


def _rejected_on_first_hit(client, live, fake_mturk, admin_user):
    """The first HIT's three workers submit; the admin rejects the second one's work."""
    hit = live.hits.order_by("id").first()
    done = [work(client, fake_mturk, hit, f"AW{n}") for n in range(3)]
    _sync(live)
    review.assignment_reject(assignment_id=done[1].pk, user=admin_user, feedback="random")
    return hit, done


def test_rejected_work_is_replaced_by_a_new_worker_whose_work_counts(
    client,
    live,
    fake_mturk,
    admin_user,
):
    hit, done = _rejected_on_first_hit(client, live, fake_mturk, admin_user)
    with pytest.raises(ValueError, match="cannot be accepted"):  # MTurk has no slot left
        fake_mturk.api.worker_accept(hit.hit_id, "AW9")
    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    assert [(row.hit.pk, row.wanted, row.available, row.add) for row in plan.rows] == [
        (hit.pk, 1, 0, 1)
    ]
    # One assignment at the publication's reward ($1) and MTurk's 20 % on a HIT of 3 assignments.
    expected = Decimal("1.20")
    assert plan.total_usd == expected

    result = replacements.replacements_create(
        publication_id=live.pk, confirm_total=expected, now=timezone.now(), user=admin_user
    )
    assert (result.added, result.hits, result.failed) == (1, 1, [])
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 4
    hit.refresh_from_db()
    assert hit.max_assignments == 4
    assert HitExtension.objects.get(hit=hit).status == HitExtensionStatus.DONE

    new = work(client, fake_mturk, hit, "AW9")  # our page admits the fourth worker
    _sync(live)
    new.refresh_from_db()
    assert new.status == AssignmentStatus.SUBMITTED
    counted = set(
        live.batch.tasks.get(pk=hit.task_id)
        .assignments.filter(counted_assignment_q())
        .values_list("annotator__worker_id", flat=True)
    )
    assert counted == {"AW0", "AW2", "AW9"}
    # Asked for again: nothing is left to replace, and nothing more is asked of MTurk.
    with pytest.raises(PublishError, match="No task of this publication needs"):
        replacements.replacements_create(
            publication_id=live.pk, confirm_total=expected, now=timezone.now(), user=admin_user
        )
    assert fake_mturk.state.calls.count("CreateAdditionalAssignmentsForHIT") == 1


def test_a_total_that_changed_since_it_was_shown_is_refused_and_nothing_is_asked(
    client,
    live,
    fake_mturk,
    admin_user,
):
    _rejected_on_first_hit(client, live, fake_mturk, admin_user)
    with pytest.raises(ConflictError, match="The cost is now"):
        replacements.replacements_create(
            publication_id=live.pk,
            confirm_total=Decimal("0.01"),
            now=timezone.now(),
            user=admin_user,
        )
    assert "CreateAdditionalAssignmentsForHIT" not in fake_mturk.state.calls
    assert not HitExtension.objects.exists()


def test_an_account_that_cannot_pay_is_refused(client, live, fake_mturk, admin_user):
    _rejected_on_first_hit(client, live, fake_mturk, admin_user)
    fake_mturk.state.balance = Decimal("0.50")
    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    assert not plan.affordable
    with pytest.raises(PublishError, match="has \\$0.50, less than"):
        replacements.replacements_create(
            publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(),
            user=admin_user,
        )  # fmt: skip
    assert "CreateAdditionalAssignmentsForHIT" not in fake_mturk.state.calls


def test_a_lost_reply_is_asked_again_with_its_token_and_never_paid_twice(
    client,
    live,
    fake_mturk,
    admin_user,
):
    hit, _ = _rejected_on_first_hit(client, live, fake_mturk, admin_user)
    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    for _ in range(3):  # every attempt boto3 makes fails: the request stays pending here
        fake_mturk.fail_next("CreateAdditionalAssignmentsForHIT", "ServiceUnavailable", status=503)
    with pytest.raises(review.TransientPlatformError):
        replacements.replacements_create(
            publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(),
            user=admin_user,
        )  # fmt: skip
    pending = HitExtension.objects.get(hit=hit)
    assert pending.status == HitExtensionStatus.PENDING
    # MTurk did it after all (the reply was what got lost).
    fake_mturk.api.call(
        "CreateAdditionalAssignmentsForHIT",
        {
            "HITId": hit.hit_id,
            "NumberOfAdditionalAssignments": 1,
            "UniqueRequestToken": pending.unique_request_token,
        },
    )
    result = replacements.replacements_create(
        publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(), user=admin_user
    )
    assert (result.added, result.failed) == (1, [])
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 4  # once, not twice
    hit.refresh_from_db()
    pending.refresh_from_db()
    assert (hit.max_assignments, pending.status) == (4, HitExtensionStatus.DONE)


def test_an_addition_whose_reply_was_lost_is_not_asked_again_once_mturk_forgot_its_token(
    client,
    live,
    fake_mturk,
    admin_user,
):
    """MTurk keeps a UniqueRequestToken for 24 hours: asked again after that, with the same
    token, it adds (and charges) the assignments a second time."""
    hit, _ = _rejected_on_first_hit(client, live, fake_mturk, admin_user)
    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    for _ in range(3):
        fake_mturk.fail_next("CreateAdditionalAssignmentsForHIT", "ServiceUnavailable", status=503)
    with pytest.raises(review.TransientPlatformError):
        replacements.replacements_create(
            publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(),
            user=admin_user,
        )  # fmt: skip
    pending = HitExtension.objects.get(hit=hit)
    fake_mturk.api.call(  # MTurk did it: the reply was what got lost
        "CreateAdditionalAssignmentsForHIT",
        {
            "HITId": hit.hit_id,
            "NumberOfAdditionalAssignments": 1,
            "UniqueRequestToken": pending.unique_request_token,
        },
    )
    fake_mturk.forget_tokens()  # the admin presses the button again two days later
    later = timezone.now() + timedelta(days=2)
    result = replacements.replacements_create(
        publication_id=live.pk, confirm_total=plan.total_usd, now=later, user=admin_user
    )
    assert (result.added, result.failed) == (1, [])
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 4  # once, not twice
    assert fake_mturk.state.calls.count("CreateAdditionalAssignmentsForHIT") == 4  # 3 + ours
    hit.refresh_from_db()
    pending.refresh_from_db()
    assert (hit.max_assignments, pending.status) == (4, HitExtensionStatus.DONE)


def test_a_hit_made_with_fewer_than_ten_assignments_is_never_asked_to_reach_ten(
    client,
    live,
    fake_mturk,
    admin_user,
):
    hit = live.hits.order_by("id").first()
    fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] = 9
    hit.max_assignments = live.batch.project.assignments_per_task = 9
    hit.save()
    live.batch.project.save()
    done = [work(client, fake_mturk, hit, f"AW{n}") for n in range(9)]
    _sync(live)
    review.assignment_reject(assignment_id=done[0].pk, user=admin_user, feedback="random")
    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    first = next(row for row in plan.rows if row.hit.pk == hit.pk)
    assert (first.wanted, first.add) == (1, 0)
    assert "cannot reach 10" in first.refused
    # The other HITs (3 each, the project now asking 9) may still grow to 9.
    assert sorted(row.add for row in plan.rows if row.hit.pk != hit.pk) == [6, 6]


def test_an_expired_hit_is_offered_again_with_its_new_assignments(
    client,
    live,
    fake_mturk,
    admin_user,
):
    hit, _ = _rejected_on_first_hit(client, live, fake_mturk, admin_user)
    past = timezone.now() - timedelta(minutes=1)
    review.hit_set_expiration(hit_pk=hit.pk, expires_at=past, user=admin_user)
    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    assert [row.reopen for row in plan.rows] == [True]
    result = replacements.replacements_create(
        publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(), user=admin_user
    )
    assert result.reopened == 1
    fake_mturk.api.worker_accept(hit.hit_id, "AW9")  # accepted: assignable again


def test_an_expired_hit_is_offered_again_before_its_assignments_are_paid_for(
    client,
    live,
    fake_mturk,
    admin_user,
):
    """Reopening after the addition left, when the reopen failed, paid assignments on a HIT no
    worker could take, and the next plan, seeing them offered, asked for nothing more."""
    hit, _ = _rejected_on_first_hit(client, live, fake_mturk, admin_user)
    past = timezone.now() - timedelta(minutes=1)
    review.hit_set_expiration(hit_pk=hit.pk, expires_at=past, user=admin_user)
    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    for _ in range(3):  # every attempt boto3 makes fails
        fake_mturk.fail_next("UpdateExpirationForHIT", "ServiceUnavailable", status=503)
    with pytest.raises(review.TransientPlatformError):
        replacements.replacements_create(
            publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(),
            user=admin_user,
        )  # fmt: skip
    assert "CreateAdditionalAssignmentsForHIT" not in fake_mturk.state.calls  # nothing paid
    result = replacements.replacements_create(  # pressed again: both done
        publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(), user=admin_user
    )
    assert (result.added, result.reopened) == (1, 1)
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 4
    fake_mturk.api.worker_accept(hit.hit_id, "AW9")  # accepted: assignable again


def test_only_admins_may_ask_for_more_assignments(
    client,
    live,
    fake_mturk,
    admin_user,
    researcher,
):
    _rejected_on_first_hit(client, live, fake_mturk, admin_user)
    with pytest.raises(PermissionDeniedError):
        replacements.replacements_plan(publication_id=live.pk, now=timezone.now(), user=researcher)
    with pytest.raises(PermissionDeniedError):
        replacements.replacements_create(
            publication_id=live.pk, confirm_total=Decimal("1.25"), now=timezone.now(),
            user=researcher,
        )  # fmt: skip
    assert "CreateAdditionalAssignmentsForHIT" not in fake_mturk.state.calls
    client.force_login(researcher)
    page = client.get(reverse("crowd:replacements", args=[live.pk]))
    assert page.status_code in (403, 404)


# --- Pages, on the offline demo platform ----------------------------------------------------


def _demo_used_up(client, crowd_batch, admin_user):
    """The batch on the demo platform; one HIT's three assignments are submitted there by demo
    workers whose work never reached our pages (not ours: the task still needs its three)."""
    publication = published_on_fake(crowd_batch)
    hit = publication.hits.order_by("id").first()
    platform = FakePlatform()
    for n in range(3):
        platform.worker_submit(
            assignment_id=platform.worker_accept(hit_id=hit.hit_id, worker_id=f"DW{n}")
        )
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    assert PlatformAssignment.objects.filter(hit=hit, assignment__isnull=True).count() == 3
    return publication, hit


def test_the_page_shows_the_plan_and_its_cost_and_adds_once_confirmed(
    client, crowd_batch, admin_user
):
    publication, hit = _demo_used_up(client, crowd_batch, admin_user)
    client.force_login(admin_user)
    detail = client.get(reverse("crowd:publication", args=[publication.pk])).text
    assert reverse("crowd:replacements", args=[publication.pk]) in detail
    page = client.post(reverse("crowd:replacements", args=[publication.pk]), CHECK)
    assert page.status_code == 200
    text = page.text
    assert hit.hit_id in text and 'id="replacement-total"' in text
    # The task still needs 3 (the platform's submissions are not our work), the HIT offers 0.
    plan = replacements.replacements_plan(
        publication_id=publication.pk, now=timezone.now(), user=admin_user
    )
    assert f"${plan.total_usd}" in text and plan.assignments == 3
    done = client.post(
        reverse("crowd:replacements", args=[publication.pk]),
        {"confirm_total": str(plan.total_usd)},
    )
    assert done.status_code == 302
    assert FakePlatform().hit_get(hit_id=hit.hit_id).max_assignments == 6
    followed = client.get(done["Location"]).text
    assert "3 assignments added to 1 HIT" in followed
    again = client.post(reverse("crowd:replacements", args=[publication.pk]), CHECK).text
    assert 'id="replacement-none"' in again and 'id="replacement-history"' in again


def test_a_changed_total_on_the_page_is_refused_with_the_new_one(client, crowd_batch, admin_user):
    publication, hit = _demo_used_up(client, crowd_batch, admin_user)
    client.force_login(admin_user)
    refused = client.post(
        reverse("crowd:replacements", args=[publication.pk]),
        {"confirm_total": "0.01"},
        follow=True,
    )
    assert "The cost is now $" in refused.text
    assert FakePlatform().hit_get(hit_id=hit.hit_id).max_assignments == 3


def test_publishing_again_on_the_same_platform_is_refused_before_any_total_is_quoted(
    client, crowd_batch, admin_user
):
    published_on_fake(crowd_batch)
    client.force_login(admin_user)
    page = client.post(reverse("crowd:publish", args=[crowd_batch.pk]), publish_form())
    assert page.status_code == 200
    assert "already published on Offline demo" in page.text
    assert "workers in place of rejected work" in page.text
    assert 'id="cost-preview"' not in page.text


def test_a_selfhosted_link_has_no_hits_to_extend(client, crowd_batch, admin_user):
    from annotate.crowd.services import publishing
    from annotate.crowd.services.publishing import PublishSettings

    publication = publishing.publication_create(
        batch=crowd_batch,
        platform_name="selfhosted",
        chosen=PublishSettings(title="t", description="d"),
        base_url="https://annotate.example.org",
    )
    with pytest.raises(PublishError, match="offered on the link again"):
        replacements.replacements_plan(
            publication_id=publication.pk, now=timezone.now(), user=admin_user
        )


def test_the_api_gives_the_plan_and_asks_only_for_the_confirmed_total(
    client,
    live,
    fake_mturk,
    admin_user,
):
    hit, _ = _rejected_on_first_hit(client, live, fake_mturk, admin_user)
    client.force_login(admin_user)
    url = reverse("crowd-api:replacements", args=[live.pk])
    plan = client.post(reverse("crowd-api:replacements-check", args=[live.pk])).json()
    assert [(h["hit_id"], h["still_needed"], h["add"]) for h in plan["hits"]] == [
        (hit.hit_id, 1, 1)
    ]
    refused = client.post(url, {"confirm_total_usd": "0.01"}, content_type="application/json")
    assert refused.status_code == 409 and "The cost is now" in refused.json()["detail"]
    done = client.post(
        url, {"confirm_total_usd": plan["total_usd"]}, content_type="application/json"
    )
    assert done.status_code == 200 and done.json()["added"] == 1
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 4


def test_a_second_request_while_one_runs_is_refused_and_asks_nothing(
    client, live, fake_mturk, admin_user
):
    """Two admins (or two tabs) confirming the same plan would each ask for its assignments."""
    from annotate.crowd.models import Publication

    hit, _ = _rejected_on_first_hit(client, live, fake_mturk, admin_user)
    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    now = timezone.now()
    running = now + timedelta(seconds=replacements.REPLACING_SECONDS)
    Publication.objects.filter(pk=live.pk).update(replacing_until=running)  # the other request
    with pytest.raises(ConflictError, match="being asked for on this publication right now"):
        replacements.replacements_create(
            publication_id=live.pk, confirm_total=plan.total_usd, now=now, user=admin_user
        )
    assert "CreateAdditionalAssignmentsForHIT" not in fake_mturk.state.calls
    # A request that crashed holding it frees it once its time is over.
    later = running + timedelta(seconds=1)
    done = replacements.replacements_create(
        publication_id=live.pk, confirm_total=plan.total_usd, now=later, user=admin_user
    )
    assert done.added == 1 and fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 4
    live.refresh_from_db()
    assert live.replacing_until is None  # released for the next one


def test_a_request_whose_hold_ran_out_stops_where_the_one_that_took_over_goes_on(
    client, live, fake_mturk, admin_user, monkeypatch
):
    """A request past REPLACING_SECONDS (many HITs, a slow platform) loses the publication to a
    second one, which plans what is left; the first must not go on asking for the same HITs."""
    hits = list(live.hits.order_by("id")[:2])
    for hit in hits:
        done = [work(client, fake_mturk, hit, f"AW{hit.pk}X{n}") for n in range(3)]
        _sync(live)
        review.assignment_reject(assignment_id=done[1].pk, user=admin_user, feedback="random")
    now = timezone.now()
    plan = replacements.replacements_plan(publication_id=live.pk, now=now, user=admin_user)
    assert plan.assignments == 2
    one = Decimal("1.20")  # $1 and MTurk's 20 % on a HIT of 3
    asked = replacements._ask
    second = []

    def the_other_request_takes_over(platform, extension, *, now):
        if not second:  # the first request, about to ask for the first HIT, has run too long
            second.append(None)
            # Past the first's hold as it stands: renewed from the clock, not from `now`, it
            # reaches further the longer the test ran (seconds on a loaded machine).
            later = timezone.now() + timedelta(seconds=replacements.REPLACING_SECONDS + 1)
            second[0] = replacements.replacements_create(
                publication_id=live.pk, confirm_total=one, now=later, user=admin_user
            )
        return asked(platform, extension, now=now)

    monkeypatch.setattr(replacements, "_ask", the_other_request_takes_over)
    first = replacements.replacements_create(
        publication_id=live.pk, confirm_total=plan.total_usd, now=now, user=admin_user
    )
    for hit in hits:  # one assignment added to each, on MTurk and here
        assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 4
        hit.refresh_from_db()
        assert hit.max_assignments == 4
    assert HitExtension.objects.filter(status=HitExtensionStatus.DONE).count() == 2
    assert first.stopped and (first.added, first.hits) == (1, 1)
    assert (second[0].added, second[0].stopped) == (2, False)  # the first's pending one, HIT 2


def _two_pending_on_one_hit(client, live, fake_mturk, admin_user, *, older, newer, by_hand=0):
    """Two additions left pending on the first HIT: the older one (`older` assignments, as many
    works as are rejected) never reached MTurk (every attempt failed); the newer one (`newer`),
    stored by a request that took the publication over, did, and its reply was lost. `by_hand`
    more are added on the requester site."""
    hit, done = _rejected_on_first_hit(client, live, fake_mturk, admin_user)
    for assignment in done[2 : older + 1]:
        review.assignment_reject(assignment_id=assignment.pk, user=admin_user, feedback="random")
    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    for _ in range(3):
        fake_mturk.fail_next("CreateAdditionalAssignmentsForHIT", "ServiceUnavailable", status=503)
    with pytest.raises(review.TransientPlatformError):
        replacements.replacements_create(
            publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(),
            user=admin_user,
        )  # fmt: skip
    first = HitExtension.objects.get(hit=hit)
    assert first.count == older
    HitExtension.objects.create(
        hit=hit, count=newer, reward_usd=first.reward_usd, unique_request_token="newer-token"
    )
    fake_mturk.api.call(
        "CreateAdditionalAssignmentsForHIT",
        {"HITId": hit.hit_id, "NumberOfAdditionalAssignments": newer,
         "UniqueRequestToken": "newer-token"},
    )  # fmt: skip
    fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] += by_hand
    return hit, plan


@pytest.mark.parametrize("days_later", [0, 2], ids=["tokens-remembered", "tokens-forgotten"])
def test_two_pending_additions_of_a_hit_are_each_credited_only_with_what_mturk_made(
    client, live, fake_mturk, admin_user, days_later
):
    """The HIT's rise (2) is the newer addition's: crediting the older one (1) with it counted an
    assignment MTurk never made, and left the newer one to be asked again (and, once MTurk had
    forgotten its token, made and paid twice)."""
    hit, plan = _two_pending_on_one_hit(client, live, fake_mturk, admin_user, older=1, newer=2)
    if days_later:
        fake_mturk.forget_tokens()
    later = timezone.now() + timedelta(days=days_later)
    result = replacements.replacements_create(
        publication_id=live.pk, confirm_total=plan.total_usd, now=later, user=admin_user
    )
    # 3 + 1 + 2 on MTurk and here: each addition made once, and counted once.
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 6
    hit.refresh_from_db()
    assert hit.max_assignments == 6
    assert (result.added, result.hits, result.failed) == (3, 1, [])
    statuses = set(HitExtension.objects.filter(hit=hit).values_list("status", flat=True))
    assert statuses == {HitExtensionStatus.DONE}


def test_pending_additions_that_mturk_s_rise_does_not_add_up_to_are_neither_asked_nor_counted(
    client, live, fake_mturk, admin_user
):
    """A rise of 4 (the newer addition's 3, and 1 added on the requester site) is neither the
    older addition (2), the newer (3) nor both (5): whether MTurk made the older one cannot be
    told, so it is not asked again (it might be paid twice), and neither is counted here."""
    hit, plan = _two_pending_on_one_hit(
        client, live, fake_mturk, admin_user, older=2, newer=3, by_hand=1
    )
    HitExtension.objects.update(created_at=timezone.now() - timedelta(days=2))  # pressed later
    fake_mturk.forget_tokens()
    asked = fake_mturk.state.calls.count("CreateAdditionalAssignmentsForHIT")
    result = replacements.replacements_create(
        publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(), user=admin_user
    )
    assert fake_mturk.state.calls.count("CreateAdditionalAssignmentsForHIT") == asked
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 7
    hit.refresh_from_db()
    assert hit.max_assignments == 3
    assert result.added == 0 and len(result.failed) == 1
    assert hit.hit_id in result.failed[0] and "cannot tell which" in result.failed[0]
    pending = HitExtension.objects.filter(hit=hit, status=HitExtensionStatus.PENDING)
    assert pending.count() == 2
    client.force_login(admin_user)  # pressed again on the page: said again, still nothing asked
    again = client.post(
        reverse("crowd:replacements", args=[live.pk]),
        {"confirm_total": str(plan.total_usd)},
        follow=True,
    ).text
    assert f"Not added: {hit.hit_id}: MTurk" in again and "cannot tell which it made" in again
    assert fake_mturk.state.calls.count("CreateAdditionalAssignmentsForHIT") == asked


def test_an_expired_hit_with_untaken_assignments_is_offered_again_on_the_page_without_paying(
    client, live, fake_mturk, admin_user
):
    """Two of the first HIT's three workers submitted before it expired: its last assignment is
    untaken but no worker can take it. The page said there was nothing to add (the HIT "still
    offers" it); it offers the HIT again, and asks MTurk for nothing to pay."""
    hit = live.hits.order_by("id").first()
    for n in range(2):
        work(client, fake_mturk, hit, f"AW{n}")
    _sync(live)
    review.hit_set_expiration(
        hit_pk=hit.pk, expires_at=timezone.now() - timedelta(minutes=1), user=admin_user
    )
    with pytest.raises(ValueError, match="cannot be accepted"):
        fake_mturk.api.worker_accept(hit.hit_id, "AW9")
    client.force_login(admin_user)
    url = reverse("crowd:replacements", args=[live.pk])
    page = client.post(url, CHECK).text
    assert 'id="replacement-none"' not in page
    assert hit.hit_id in page and "Expired: offered again." in page
    assert 'id="replacement-reopen"' in page and "$0.00" not in page
    api = client.post(reverse("crowd-api:replacements-check", args=[live.pk])).json()
    assert (api["reopens"], api["assignments"], api["total_usd"]) == (1, 0, "0.00")
    done = client.post(url, {"confirm_total": "0.00"})
    assert done.status_code == 302
    followed = client.get(done["Location"]).text
    assert "1 expired HIT offered again" in followed and "assignments added" not in followed
    assert "CreateAdditionalAssignmentsForHIT" not in fake_mturk.state.calls
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 3
    assert fake_mturk.state.hits[hit.hit_id]["Expiration"] > timezone.now().timestamp()
    work(Client(), fake_mturk, hit, "AW9")  # the untaken assignment is taken, and done
    assert 'id="replacement-none"' in client.post(url, CHECK).text  # nothing is offered twice


def test_an_expired_hit_that_cannot_be_extended_is_still_offered_again_for_what_it_has(
    client, live, fake_mturk, admin_user
):
    """MTurk refuses to take a HIT of 9 to 10 or more, but reopening it costs nothing and gives
    workers the assignments it still has."""
    hit = live.hits.order_by("id").first()
    fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] = 9
    hit.max_assignments = 9
    hit.save()
    live.batch.project.assignments_per_task = 11
    live.batch.project.save()
    review.hit_set_expiration(
        hit_pk=hit.pk, expires_at=timezone.now() - timedelta(minutes=1), user=admin_user
    )
    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    first = next(row for row in plan.rows if row.hit.pk == hit.pk)
    assert (first.wanted, first.available, first.add, first.reopen) == (11, 9, 0, True)
    assert "cannot reach 10" in first.refused
    result = replacements.replacements_create(
        publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(), user=admin_user
    )
    assert result.reopened == 1
    fake_mturk.api.worker_accept(hit.hit_id, "AW9")


def _opened(client, fake_mturk, hit, worker, assignment_id) -> str:
    """The worker who accepted `assignment_id` on MTurk opens our page: the task's URL."""
    query = {"assignmentId": assignment_id, "hitId": hit.hit_id, "workerId": worker}
    opened = client.get(
        reverse("crowd:mturk-task", args=[hit.unique_request_token]),
        {**query, "turkSubmitTo": fake_mturk.url},
    )
    assert client.get(opened["Location"]).status_code == 200
    return opened["Location"]


@pytest.mark.parametrize("third", ["accepted-on-mturk", "working-here", "submitted-here"])
def test_a_worker_who_accepted_the_hit_is_not_paid_for_again(
    client, live, fake_mturk, admin_user, third
):
    """Of the first HIT's workers, the second one's work is rejected and the third holds the
    HIT's last assignment: accepted on MTurk (not opened here yet), working on our page, or
    submitted here (the hand-back not on MTurk yet). One assignment replaces the rejected work
    in each case: the third worker, not seen here, used to be paid for again."""
    hit = live.hits.order_by("id").first()
    done = [work(client, fake_mturk, hit, f"AW{n}") for n in range(2)]
    _sync(live)
    review.assignment_reject(assignment_id=done[1].pk, user=admin_user, feedback="random")
    if third == "submitted-here":
        work(Client(), fake_mturk, hit, "AW2", post_back=False)
    else:
        accepted = fake_mturk.api.worker_accept(hit.hit_id, "AW2")
        if third == "working-here":
            _opened(Client(), fake_mturk, hit, "AW2", accepted)
    plan = replacements.replacements_plan(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    [row] = plan.rows
    assert (row.available, row.add) == (0, 1)
    assert row.unseen == (1 if third == "accepted-on-mturk" else 0)
    if third != "accepted-on-mturk":
        return
    client.force_login(admin_user)
    page = client.post(reverse("crowd:replacements", args=[live.pk]), CHECK).text
    assert "1 accepted on Amazon Mechanical Turk by worker not here yet" in page
    replacements.replacements_create(
        publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(), user=admin_user
    )
    assert fake_mturk.state.hits[hit.hit_id]["MaxAssignments"] == 4
    worker = Client()  # the third worker comes, and so does the one in place of the rejected
    url = _opened(worker, fake_mturk, hit, "AW2", accepted)
    names = set(re.findall(r'name="(r\d+_q\d+)"', worker.get(url).text))
    assert worker.post(url, {name: "yes" for name in names}).status_code == 200
    fake_mturk.api.worker_submit(accepted, {"summary": "x"})
    work(Client(), fake_mturk, hit, "AW9")
    _sync(live)
    counted = set(
        live.batch.tasks.get(pk=hit.task_id)
        .assignments.filter(counted_assignment_q())
        .values_list("annotator__worker_id", flat=True)
    )
    assert counted == {"AW0", "AW2", "AW9"}
    again = client.post(reverse("crowd:replacements", args=[live.pk]), CHECK).text
    assert 'id="replacement-none"' in again


# --- Additions settled by hand -------------------------------------------------------------


def _stuck(client, live, fake_mturk, admin_user):
    """The case _made_of cannot tell: additions of 2 (never made) and 3 (made, its reply lost)
    on the first HIT, 1 more added on the requester site (MTurk: 3 + 3 + 1 = 7), both tokens
    forgotten two days later. Return the HIT, the older and newer additions and the plan."""
    hit, plan = _two_pending_on_one_hit(
        client, live, fake_mturk, admin_user, older=2, newer=3, by_hand=1
    )
    HitExtension.objects.update(created_at=timezone.now() - timedelta(days=2))
    fake_mturk.forget_tokens()
    older, newer = HitExtension.objects.filter(hit=hit).order_by("count")
    return hit, older, newer, plan


def _settle(live, extension, outcome, user, now=None):
    return replacements.hit_extension_settle(
        publication_id=live.pk,
        extension_id=extension.pk,
        made=outcome == "made",
        now=now or timezone.now(),
        user=user,
    )


@pytest.mark.parametrize(
    ("outcome", "max_assignments", "counted", "counted_usd"),
    [("made", 6, 3, Decimal("3.60")), ("not_made", 3, 0, Decimal("0.00"))],
)
def test_an_addition_the_hit_cannot_tell_about_is_settled_by_an_admin_and_never_asked_again(
    client, live, fake_mturk, admin_user, outcome, max_assignments, counted, counted_usd
):
    """Made: counted as a done addition is (3 assignments at $1 and MTurk's 20 % on a HIT of 3,
    the HIT's assignments here 3 + 3). Not made: nothing counted. Either way the next press
    names it no more and asks MTurk for nothing."""
    hit, older, newer, plan = _stuck(client, live, fake_mturk, admin_user)
    before = replacements.additions_overview(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    assert (before.assignments, before.total_usd) == (0, Decimal("0.00"))
    assert [row.settle for row in before.rows] == [True, True]
    asked = fake_mturk.state.calls.count("CreateAdditionalAssignmentsForHIT")
    now = timezone.now()

    settled = _settle(live, newer, outcome, admin_user, now=now)
    _settle(live, older, "not_made", admin_user, now=now)

    newer.refresh_from_db()
    older.refresh_from_db()
    hit.refresh_from_db()
    expected = HitExtensionStatus.DONE if outcome == "made" else HitExtensionStatus.NOT_MADE
    assert (settled.status, newer.status, older.status) == (
        expected, expected, HitExtensionStatus.NOT_MADE
    )  # fmt: skip
    assert (newer.settled_by, newer.settled_at) == (admin_user, now)
    assert (older.settled_by, older.settled_at, older.done_at) == (admin_user, now, None)
    assert hit.max_assignments == max_assignments
    after = replacements.additions_overview(
        publication_id=live.pk, now=timezone.now(), user=admin_user
    )
    assert (after.assignments, after.hits, after.total_usd) == (
        counted,
        int(bool(counted)),
        counted_usd,
    )
    assert [row.counted_usd for row in after.rows] == [Decimal("0.00"), counted_usd]
    assert not any(row.settle for row in after.rows)
    # Pressed again: nothing pending, MTurk's HIT offers what the task needs, nothing is asked.
    with pytest.raises(PublishError, match="No task of this publication needs"):
        replacements.replacements_create(
            publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(),
            user=admin_user,
        )  # fmt: skip
    assert fake_mturk.state.calls.count("CreateAdditionalAssignmentsForHIT") == asked
    hit.refresh_from_db()
    assert hit.max_assignments == max_assignments


def test_a_settled_addition_is_no_longer_named_by_the_next_press(
    client, live, fake_mturk, admin_user
):
    hit, older, newer, plan = _stuck(client, live, fake_mturk, admin_user)
    _settle(live, newer, "made", admin_user)  # MTurk 7, here 6: the older 2 still cannot be told
    result = replacements.replacements_create(
        publication_id=live.pk, confirm_total=plan.total_usd, now=timezone.now(), user=admin_user
    )
    [failed] = result.failed
    assert "additions left pending (2) add up to" in failed and "settle each there" in failed
    older.refresh_from_db()
    assert older.status == HitExtensionStatus.PENDING


def test_made_is_refused_when_the_hit_on_mturk_has_no_room_for_it(
    client, live, fake_mturk, admin_user
):
    """MTurk's HIT has 7 assignments; 3 + 3 counted here once the newer is made: the older 2
    would make 8, more than MTurk has, so it cannot have been made too."""
    hit, older, newer, _ = _stuck(client, live, fake_mturk, admin_user)
    _settle(live, newer, "made", admin_user)
    with pytest.raises(ConflictError, match="has 7 assignments .* and 6 are counted here"):
        _settle(live, older, "made", admin_user)
    older.refresh_from_db()
    hit.refresh_from_db()
    assert (older.status, older.settled_at, hit.max_assignments) == (
        HitExtensionStatus.PENDING, None, 6
    )  # fmt: skip


def test_an_addition_whose_token_mturk_still_keeps_is_not_settled_by_hand(
    client, live, fake_mturk, admin_user
):
    """Younger than TOKEN_REMEMBERED, it is asked again with its token, which costs nothing if
    MTurk made it: an admin's guess could only be wrong."""
    hit, plan = _two_pending_on_one_hit(client, live, fake_mturk, admin_user, older=2, newer=3)
    older = HitExtension.objects.get(hit=hit, count=2)
    young = older.created_at + replacements.TOKEN_REMEMBERED - timedelta(seconds=1)
    for outcome in ("made", "not_made"):
        with pytest.raises(ConflictError, match="MTurk keeps its token until"):
            _settle(live, older, outcome, admin_user, now=young)
    older.refresh_from_db()
    assert (older.status, older.settled_at) == (HitExtensionStatus.PENDING, None)
    page = replacements.additions_overview(publication_id=live.pk, now=young, user=admin_user)
    assert not any(row.settle for row in page.rows)
    forgotten = older.created_at + replacements.TOKEN_REMEMBERED
    assert _settle(live, older, "not_made", admin_user, now=forgotten).status == "not_made"


def test_a_settle_waits_for_a_request_for_replacements_running_on_the_publication(
    client, live, fake_mturk, admin_user
):
    """A retry running meanwhile could credit the same addition from MTurk's figures: the
    settle takes the publication's hold as every request for replacements does."""
    from annotate.crowd.models import Publication

    hit, older, newer, _ = _stuck(client, live, fake_mturk, admin_user)
    now = timezone.now()
    running = now + timedelta(seconds=replacements.REPLACING_SECONDS)
    Publication.objects.filter(pk=live.pk).update(replacing_until=running)
    with pytest.raises(ConflictError, match="being asked for on this publication right now"):
        _settle(live, newer, "made", admin_user, now=now)
    newer.refresh_from_db()
    hit.refresh_from_db()
    assert (newer.status, hit.max_assignments) == (HitExtensionStatus.PENDING, 3)
    _settle(live, newer, "made", admin_user, now=running + timedelta(seconds=1))
    live.refresh_from_db()
    assert live.replacing_until is None


def test_a_settled_addition_is_settled_once(client, live, fake_mturk, admin_user):
    hit, older, newer, _ = _stuck(client, live, fake_mturk, admin_user)
    _settle(live, newer, "made", admin_user)
    for outcome in ("made", "not_made"):
        with pytest.raises(ConflictError, match="is settled already"):
            _settle(live, newer, outcome, admin_user)
    hit.refresh_from_db()
    assert hit.max_assignments == 6


def test_the_page_shows_what_each_choice_costs_and_only_admins_may_settle(
    client, live, fake_mturk, admin_user, researcher
):
    hit, older, newer, _ = _stuck(client, live, fake_mturk, admin_user)
    page_url = reverse("crowd:replacements", args=[live.pk])
    settle_url = reverse("crowd:replacement-settle", args=[live.pk])
    client.force_login(researcher)
    refused = client.post(settle_url, {"extension": newer.pk, "outcome": "made"})
    assert refused.status_code == 403
    with pytest.raises(PermissionDeniedError):
        _settle(live, newer, "not_made", researcher)
    newer.refresh_from_db()
    assert (newer.status, newer.settled_at) == (HitExtensionStatus.PENDING, None)

    client.force_login(admin_user)
    page = client.post(page_url, CHECK).text
    assert 'id="additions-counted"' in page and "<strong>$0.00</strong>" in page
    # 3 assignments at $1.20 (MTurk's 20 % on a HIT of 3), 2 at $1.20; MTurk's HIT has 7.
    assert "made it: count 3 assignments and $3.60" in page
    assert "made it: count 2 assignments and $2.40" in page
    assert "from 3 to 6" in page and "(it has 7 assignments; 3 are counted here)" in page
    assert page.count('value="not_made"') == 2
    done = client.post(
        settle_url, {"extension": newer.pk, "outcome": "made"}, HTTP_REFERER=page_url
    )
    assert done.status_code == 302 and done["Location"] == page_url
    after = client.get(page_url).text
    assert "is counted as made" in after and "<strong>$3.60</strong>" in after
    assert after.count('value="not_made"') == 1  # the older one is left to settle
    bad = client.post(
        settle_url, {"extension": older.pk, "outcome": "maybe"}, HTTP_REFERER=page_url, follow=True
    )
    assert "Say whether the platform made the addition" in bad.text
    older.refresh_from_db()
    assert older.status == HitExtensionStatus.PENDING


def test_the_page_asks_the_platform_nothing_until_the_admin_presses_check(
    client, live, fake_mturk, admin_user
):
    """The page's GET asked MTurk about every HIT whose task needed work, for the balance, and
    about the HIT of each addition to settle: slow, rate-limited by MTurk, and a failed page
    in an outage. It shows what is stored; the platform is asked on the admin's press."""
    hit, older, newer, _ = _stuck(client, live, fake_mturk, admin_user)
    url = reverse("crowd:replacements", args=[live.pk])
    asked, recorded = list(fake_mturk.state.calls), PlatformCall.objects.count()
    client.force_login(admin_user)
    page = client.get(url)
    assert page.status_code == 200
    assert fake_mturk.state.calls == asked and PlatformCall.objects.count() == recorded
    text = page.text
    assert 'id="replacement-needed"' in text and 'id="replacement-check"' in text
    # The first task still needs 2 (two works rejected), the two others all 3 of theirs.
    assert "the tasks of 3 HITs still need <strong>8 assignments</strong>" in text
    assert 'id="replacement-total"' not in text and 'id="replacement-none"' not in text
    # The additions to settle are stored: listed, with their buttons, MTurk's count not asked.
    assert text.count('value="not_made"') == 2 and "3 assignments are counted here" in text

    checked = client.post(url, CHECK).text
    assert "GetAccountBalance" in fake_mturk.state.calls[len(asked) :]
    assert "(it has 7 assignments; 3 are counted here)" in checked
    assert 'id="replacement-total"' in checked or 'id="replacement-none"' in checked


def test_the_api_lists_the_additions_and_settles_one_as_the_page_does(
    client, live, fake_mturk, admin_user, researcher
):
    hit, older, newer, _ = _stuck(client, live, fake_mturk, admin_user)
    list_url = reverse("crowd-api:additions", args=[live.pk])
    settle_url = reverse("crowd-api:addition-settle", args=[live.pk])

    def settle(addition, outcome):
        return client.post(
            settle_url, {"addition": addition, "outcome": outcome}, content_type="application/json"
        )

    client.force_login(researcher)
    assert client.get(list_url).status_code == 404
    assert settle(newer.pk, "made").status_code == 404
    client.force_login(admin_user)
    asked = len(fake_mturk.state.calls)
    listed = client.get(list_url).json()
    assert len(fake_mturk.state.calls) == asked  # what is stored: no platform call
    assert (listed["assignments"], listed["hits"], listed["total_usd"]) == (0, 0, "0.00")
    rows = {row["id"]: row for row in listed["additions"]}
    assert (rows[newer.pk]["count"], rows[newer.pk]["status"]) == (3, "pending")
    assert (rows[newer.pk]["cost_usd"], rows[newer.pk]["counted_usd"]) == ("3.60", "0.00")
    assert rows[newer.pk]["to_settle"] and rows[older.pk]["to_settle"]

    bad = settle(older.pk, "maybe")
    assert bad.status_code == 400 and "outcome" in bad.json()
    newer.refresh_from_db()
    assert newer.status == HitExtensionStatus.PENDING
    done = settle(newer.pk, "made")
    assert done.status_code == 200
    body = done.json()
    assert (body["status"], body["counted_usd"], body["to_settle"]) == ("done", "3.60", False)
    assert body["settled_by"] == admin_user.get_username()
    again = settle(newer.pk, "not_made")
    assert again.status_code == 409 and "settled already" in again.json()["detail"]
    assert settle(older.pk, "not_made").json()["status"] == "not_made"
    listed = client.get(list_url).json()
    assert (listed["assignments"], listed["hits"], listed["total_usd"]) == (3, 1, "3.60")
    hit.refresh_from_db()
    assert hit.max_assignments == 6
