"""Publishing a batch: cost preview, HIT type and HITs, retries that never duplicate."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd import selectors
from annotate.crowd.base import NUMBER_APPROVED, PERCENT_APPROVED
from annotate.crowd.fake import FakePlatform
from annotate.crowd.models import HitStatus, Publication, PublicationStatus
from annotate.crowd.services import publishing
from annotate.crowd.services.publishing import PublishSettings
from annotate.errors import PublishError, TransientPlatformError
from annotate.models import AssignmentStatus
from tests.annotate.crowd.conftest import publish_form
from tests.factories import AnnotatorFactory, AssignmentFactory

pytestmark = pytest.mark.django_db


def _note(publication) -> str:
    """What the publication page and the API say of how it stands (selectors.publication_note)."""
    progress = selectors.publication_progress(publication=publication)
    return selectors.publication_note(publication=publication, progress=progress)


BASE = "https://annotate.example.org"


def _create(batch, platform="fake", **overrides):
    fields = {"title": "Judge AI answers", "description": "Yes/no questions", **overrides}
    chosen = PublishSettings(**fields)
    return publishing.publication_create(
        batch=batch, platform_name=platform, chosen=chosen, base_url=BASE
    )


def _publish(publication, *, retry_follows=False):
    return publishing.publication_publish(
        publication_id=publication.pk, now=timezone.now(), retry_follows=retry_follows
    )


def _resume(publication):
    """The admin's Resume: the missing HITs' total confirmed as quoted."""
    quote = publishing.publication_resume_quote(publication=publication)
    return publishing.publication_resume(
        publication_id=publication.pk, confirm_total=quote.total_usd, now=timezone.now()
    )


def test_cost_is_tasks_times_assignments_times_reward_plus_fee(crowd_batch):
    preview = publishing.publication_preview(
        batch=crowd_batch, platform_name="fake", reward_usd=Decimal("1.00")
    )
    # 3 HITs of 3 assignments × ($1 + MTurk's 20% fee)
    assert preview.total_usd == Decimal("10.80") and preview.fee_rate is None
    assert preview.balance_usd == Decimal("10000.00") and preview.affordable


def test_selfhosted_preview_costs_the_reward_with_no_fee_paid_outside(crowd_batch):
    preview = publishing.publication_preview(
        batch=crowd_batch, platform_name="selfhosted", reward_usd=Decimal("2.00")
    )
    # 3 tasks × 3 assignments × $2, paid on the recruiting site: no platform fee, no balance.
    assert preview.total_usd == Decimal("18.00") and preview.fee_rate == 0
    assert preview.paid_outside and preview.balance_usd is None and preview.affordable


def test_default_qualifications_are_the_papers():
    requirements = publishing.default_qualifications(locale="us")
    assert requirements[0] == {
        "QualificationTypeId": PERCENT_APPROVED,
        "Comparator": "GreaterThan",
        "IntegerValues": [90],
    }
    assert requirements[1]["QualificationTypeId"] == NUMBER_APPROVED
    assert requirements[1]["Comparator"] == "GreaterThanOrEqualTo"
    assert requirements[1]["IntegerValues"] == [500]
    assert requirements[2]["LocaleValues"] == [{"Country": "US"}]


def test_publish_creates_one_hit_per_task_with_stored_token(crowd_batch):
    publication = _publish(_create(crowd_batch))
    assert publication.status == PublicationStatus.PUBLISHED
    hits = list(publication.hits.all())
    assert len(hits) == 3 and all(h.status == HitStatus.CREATED for h in hits)
    store = FakePlatform.store
    assert sorted(store.tokens) == sorted(h.unique_request_token for h in hits)
    for hit in hits:
        url = store.questions[hit.hit_id]
        assert url == f"{BASE}/crowd/mturk/{hit.unique_request_token}/"
        assert store.hits[hit.hit_id].max_assignments == 3


def test_publishing_twice_makes_no_new_hits(crowd_batch):
    publication = _publish(_create(crowd_batch))
    _publish(publication)
    assert len(FakePlatform.store.hits) == 3


def test_same_batch_cannot_be_published_twice_on_one_platform(crowd_batch):
    _create(crowd_batch)
    with pytest.raises(PublishError, match="already published"):
        _create(crowd_batch)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"title": " "}, "Title and description"),
        ({"reward_usd": Decimal("0")}, "at least \\$0.01"),
        ({"lifetime_seconds": 5}, "lifetime seconds"),
        ({"lifetime_seconds": 366 * 24 * 3600}, "lifetime seconds must be at most 31536000"),
        ({"assignment_duration_seconds": 10**30}, "assignment duration seconds must be at most"),
        ({"auto_approval_delay_seconds": 31 * 24 * 3600}, "at most 2592000 seconds \\(30 days\\)"),
    ],
)
def test_bad_settings_are_refused_and_nothing_is_stored(crowd_batch, overrides, message):
    with pytest.raises(PublishError, match=message):
        _create(crowd_batch, **overrides)
    assert not crowd_batch.publications.exists()


def test_http_site_address_is_refused_unless_on_this_machine(settings):
    settings.CROWD_PUBLIC_URL = ""
    with pytest.raises(PublishError, match="HTTPS"):
        publishing.task_base_url(request_base="http://annotate.example.org")
    assert (
        publishing.task_base_url(request_base="http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    )
    settings.CROWD_PUBLIC_URL = "https://public.example.org/"
    assert publishing.task_base_url(request_base="http://x") == "https://public.example.org"


# --- Against the fake MTurk server, with the real boto3 client --------------------------------


def test_mturk_publish_sends_the_hit_settings(mturk_settings, fake_mturk, crowd_batch):
    publication = _publish(
        _create(crowd_batch, platform="mturk", reward_usd=Decimal("1.5"), lifetime_seconds=7200)
    )
    assert publication.status == PublicationStatus.PUBLISHED
    (hit_type,) = fake_mturk.state.hit_types.values()
    assert hit_type["Reward"] == "1.50" and hit_type["Title"] == "Judge AI answers"
    assert len(hit_type["QualificationRequirements"]) == 2
    assert len(fake_mturk.state.hits) == 3
    for hit in publication.hits.all():
        remote = fake_mturk.state.hits[hit.hit_id]
        assert remote["MaxAssignments"] == 3
        assert remote["Expiration"] - remote["CreationTime"] == pytest.approx(7200)


def test_lost_reply_is_recovered_without_a_duplicate(mturk_settings, fake_mturk, crowd_batch):
    fake_mturk.state.lose_create_replies = 2  # the HIT is made, the reply lost, boto3 retries
    publication = _publish(_create(crowd_batch, platform="mturk"))
    assert publication.status == PublicationStatus.PUBLISHED
    assert len(fake_mturk.state.hits) == 3
    ours = set(publication.hits.values_list("hit_id", flat=True))
    assert ours == set(fake_mturk.state.hits)


def test_a_hit_whose_reply_was_lost_is_adopted_once_mturk_forgot_its_token(
    mturk_settings, fake_mturk, crowd_batch
):
    """MTurk keeps a UniqueRequestToken for 24 hours: a HIT made with it more than a day before
    is made again (and paid twice) by a create sent with the same token."""
    from tests.annotate.crowd.fake_mturk import FakeMTurkError

    publication = _create(crowd_batch, platform="mturk")
    original = fake_mturk.api.op_CreateHITWithHITType
    made = []

    def made_then_every_reply_lost(body):
        if not made:
            made.append(original(body))
        raise FakeMTurkError("ServiceUnavailable", "Service unavailable", status=503)

    fake_mturk.api.op_CreateHITWithHITType = made_then_every_reply_lost
    with pytest.raises(TransientPlatformError):
        _publish(publication, retry_follows=True)
    assert Publication.objects.get(pk=publication.pk).status == PublicationStatus.PENDING
    assert len(fake_mturk.state.hits) == 1  # made on MTurk, still waiting to be made here
    assert not publication.hits.filter(status=HitStatus.CREATED).exists()

    fake_mturk.api.op_CreateHITWithHITType = original
    fake_mturk.forget_tokens()  # Resume, two days later
    later = timezone.now() + timedelta(days=2)
    done = publishing.publication_publish(publication_id=publication.pk, now=later)
    assert done.status == PublicationStatus.PUBLISHED
    assert len(fake_mturk.state.hits) == 3  # the lost one adopted, not made twice
    assert set(publication.hits.values_list("hit_id", flat=True)) == set(fake_mturk.state.hits)


def test_persistent_throttling_leaves_a_partial_publication_that_resumes(
    mturk_settings, fake_mturk, crowd_batch
):
    publication = _create(crowd_batch, platform="mturk")
    fake_mturk.state.throttle_rate = 0.0
    _publish_first_hit_then_throttle = [0]

    original = fake_mturk.api.op_CreateHITWithHITType

    def throttle_after_first(body):
        _publish_first_hit_then_throttle[0] += 1
        if _publish_first_hit_then_throttle[0] > 1:
            from tests.annotate.crowd.fake_mturk import FakeMTurkError

            raise FakeMTurkError("ThrottlingException", "Rate exceeded")
        return original(body)

    fake_mturk.api.op_CreateHITWithHITType = throttle_after_first
    with pytest.raises(TransientPlatformError):
        _publish(publication)  # the task's last retry: none follows
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PARTIAL
    assert "Rate exceeded" in publication.error and "Resume makes the 2 missing" in _note(
        publication
    )
    assert publication.hits.filter(status=HitStatus.CREATED).count() == 1

    fake_mturk.api.op_CreateHITWithHITType = original
    assert _publish(publication).status == PublicationStatus.PARTIAL  # a stray delivery: nothing
    assert len(fake_mturk.state.hits) == 1
    _resume(publication)
    assert _publish(publication).status == PublicationStatus.PUBLISHED
    assert len(fake_mturk.state.hits) == 3


def test_refused_hit_is_reported_and_retried_later(mturk_settings, fake_mturk, crowd_batch):
    publication = _create(crowd_batch, platform="mturk")
    fake_mturk.fail_next("CreateHITWithHITType", "RequestError", "Question is not valid")
    _publish(publication)
    publication.refresh_from_db()
    assert publication.status == PublicationStatus.PARTIAL
    assert "2 of 3 HITs made; Resume makes the 1 missing" in _note(publication)
    failed = publication.hits.get(status=HitStatus.FAILED)
    assert "Question is not valid" in failed.error
    _resume(publication)
    assert _publish(publication).status == PublicationStatus.PUBLISHED
    assert len(fake_mturk.state.hits) == 3


def test_the_cost_preview_rounds_half_a_cent_up_as_every_figure():
    """A flat 25 % on $0.02 is $0.005, charged $0.01 (Decimal's default rounds halves to even:
    $0.00, below what the platform charges): 2 HITs × 1 assignment cost 2 × $0.03."""
    from annotate.crowd.pricing import assignments_cost

    flat = Decimal("0.25")  # a flat CROWD_FEE_RATE, rounded on each payment as MTurk's fee
    cost = assignments_cost(hits=[(1, 1), (1, 1)], reward_usd=Decimal("0.02"), flat_rate=flat)
    assert cost == Decimal("0.06")
    # 3 × ($0.05 + $0.0125 charged $0.01)
    assert assignments_cost(hits=[(3, 3)], reward_usd=Decimal("0.05"), flat_rate=flat) == Decimal(
        "0.18"
    )
    # MTurk's fee on $0.05 is $0.01 an assignment (20 % of it, also the minimum)
    assert assignments_cost(hits=[(3, 3)], reward_usd=Decimal("0.05"), flat_rate=None) == Decimal(
        "0.18"
    )


@pytest.mark.parametrize(
    "field", ["assignment_duration_seconds", "auto_approval_delay_seconds", "lifetime_seconds"]
)
def test_the_api_refuses_a_time_too_long_naming_its_field(
    client, admin_user, crowd_batch, settings, field
):
    settings.CROWD_PUBLIC_URL = BASE
    client.force_login(admin_user)
    url = reverse("crowd-api:publish", args=[crowd_batch.pk])
    body = {"platform": "fake", "title": "t", "description": "d", "reward_usd": "1.00"}
    body["confirm_total_usd"] = "10.80"  # 3 HITs of 3 assignments × ($1 + 20 % fee)
    answer = client.post(url, {**body, field: 10**30}, content_type="application/json")
    assert answer.status_code == 400 and field in answer.json()
    assert not crowd_batch.publications.exists()
    accepted = client.post(url, body, content_type="application/json")
    assert accepted.status_code == 201, accepted.json()


def test_the_api_preview_refuses_a_negative_reward_as_the_page_does(
    client, admin_user, crowd_batch
):
    client.force_login(admin_user)
    url = reverse("crowd-api:preview", args=[crowd_batch.pk])
    answer = client.post(url, {"platform": "fake", "reward_usd": "-1"}, "application/json")
    assert answer.status_code == 400 and "reward_usd" in answer.json()
    quoted = client.post(url, {"platform": "fake", "reward_usd": "1"}, "application/json")
    assert quoted.status_code == 200 and quoted.json()["total_usd"] == "10.80"


# --- Only the assignments still open are published -------------------------------------------


def _in_house(task, status=AssignmentStatus.SUBMITTED, **fields):
    """An in-house annotator's assignment of `task` (not through any platform)."""
    return AssignmentFactory(task=task, annotator=AnnotatorFactory(), status=status, **fields)


def _partly_done(batch):
    """Of 3 tasks × 3 assignments: the first full (3 submitted), the second with one submitted
    and one live claim (an expired claim and a late submission hold no slot), the third
    untouched: 1 + 3 = 4 assignments left."""
    full, partial, _ = batch.tasks.order_by("position")
    for _ in range(3):
        _in_house(full)
    _in_house(partial)
    _in_house(partial, status=AssignmentStatus.CLAIMED)
    past = timezone.now() - timedelta(hours=2)
    _in_house(partial, status=AssignmentStatus.CLAIMED, claimed_at=past - timedelta(hours=1))
    _in_house(partial, status=AssignmentStatus.EXPIRED, is_late=True)
    return full, partial


def test_the_preview_counts_only_the_assignments_still_open(crowd_batch):
    _partly_done(crowd_batch)
    preview = publishing.publication_preview(
        batch=crowd_batch, platform_name="fake", reward_usd=Decimal("1.00")
    )
    assert (preview.assignments, preview.assignments_taken, preview.tasks) == (4, 5, 2)
    assert preview.total_usd == Decimal("4.80")  # 4 × $1.20, not 3 × 3 × $1.20


def test_hits_ask_each_task_for_what_it_still_needs(mturk_settings, fake_mturk, crowd_batch):
    """The walkthrough's batch: tasks done in-house were published again with every assignment,
    and a crowd worker got a third assignment on a task of two."""
    full, partial = _partly_done(crowd_batch)
    publication = _publish(_create(crowd_batch, platform="mturk"))
    assert publication.status == PublicationStatus.PUBLISHED
    asked = {
        hit.task_id: fake_mturk.state.hits[hit.hit_id]["MaxAssignments"]
        for hit in publication.hits.all()
    }
    untouched = crowd_batch.tasks.exclude(pk__in=[full.pk, partial.pk]).get()
    assert asked == {partial.pk: 1, untouched.pk: 3}
    assert len(fake_mturk.state.hits) == 2


def _filled(batch):
    for task in batch.tasks.all():
        for _ in range(batch.project.assignments_per_task):
            _in_house(task)


def test_a_batch_with_nothing_left_is_refused_naming_why(crowd_batch):
    _filled(crowd_batch)
    with pytest.raises(PublishError, match="Nothing left to publish") as refused:
        publishing.publication_preview(batch=crowd_batch, platform_name="selfhosted")
    assert refused.value.field == "batch"
    with pytest.raises(PublishError, match="already has its 3 assignments per task"):
        _create(crowd_batch)
    assert not crowd_batch.publications.exists()


def test_the_api_and_the_page_refuse_a_batch_with_nothing_left(
    client, admin_user, crowd_batch, settings
):
    settings.CROWD_PUBLIC_URL = BASE
    _filled(crowd_batch)
    client.force_login(admin_user)
    body = {"platform": "fake", "reward_usd": "1.00"}
    preview = client.post(
        reverse("crowd-api:preview", args=[crowd_batch.pk]), body, "application/json"
    )
    assert preview.status_code == 400 and preview.json()["field"] == "batch"
    assert "Nothing left to publish" in preview.json()["detail"]
    body |= {"title": "t", "description": "d", "confirm_total_usd": "11.25"}
    publish = client.post(
        reverse("crowd-api:publish", args=[crowd_batch.pk]), body, "application/json"
    )
    assert publish.status_code == 400 and publish.json()["field"] == "batch"
    page = client.post(
        reverse("crowd:publish", args=[crowd_batch.pk]), {**publish_form(), "preview": "1"}
    )
    assert page.status_code == 200 and "Nothing left to publish" in page.text
    assert 'id="cost-total"' not in page.text
    assert not crowd_batch.publications.exists()


def test_the_page_quotes_the_open_assignments_and_publishes_them(
    client, admin_user, crowd_batch, settings, django_capture_on_commit_callbacks
):
    settings.CROWD_PUBLIC_URL = BASE
    _partly_done(crowd_batch)
    client.force_login(admin_user)
    url = reverse("crowd:publish", args=[crowd_batch.pk])
    page = client.post(url, {**publish_form(), "preview": "1"})
    assert 'id="assignments-open">4 on 2 tasks<' in page.text
    assert 'id="assignments-taken">5 ' in page.text and 'id="cost-total">$4.80<' in page.text
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url, {**publish_form(), "confirm_total": "4.80", "publish": "1"})
    publication = crowd_batch.publications.get()
    assert publication.status == PublicationStatus.PUBLISHED
    asked = sorted(
        FakePlatform.store.hits[h.hit_id].max_assignments for h in publication.hits.all()
    )
    assert asked == [1, 3]


def test_a_total_the_balance_cannot_pay_publishes_nothing_even_when_confirmed(
    client, admin_user, crowd_batch, settings, django_capture_on_commit_callbacks
):
    """The page hides its Confirm button then, but a form sent anyway (an old tab, a script) or
    the API published, and the platform made HITs until the money ran out: a batch half on it."""
    from annotate.crowd import fake

    settings.CROWD_PUBLIC_URL = BASE
    with fake._changing() as store:
        store.balance = Decimal("5.00")  # 3 HITs of 3 assignments × $1.20 = $10.80
    client.force_login(admin_user)
    url = reverse("crowd:publish", args=[crowd_batch.pk])
    with django_capture_on_commit_callbacks(execute=True):
        page = client.post(url, {**publish_form(), "confirm_total": "10.80", "publish": "1"})
    assert page.status_code == 200 and "The balance does not cover this" in page.text
    api = reverse("crowd-api:publish", args=[crowd_batch.pk])
    body = {"platform": "fake", "title": "t", "description": "d", "reward_usd": "1.00"}
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            api, {**body, "confirm_total_usd": "10.80"}, content_type="application/json"
        )
    assert answer.status_code == 400
    assert "has $5.00, less than the $10.80" in answer.json()["detail"]
    assert not crowd_batch.publications.exists() and FakePlatform.store.hits == {}


def test_two_confirms_at_once_make_one_publication_and_refuse_the_other(crowd_batch, monkeypatch):
    """Both requests of a double click pass published_check before either stores its row: the
    second met the unique constraint as a server error (500) instead of the refusal."""
    monkeypatch.setattr(publishing, "published_check", lambda **kwargs: None)
    first = _create(crowd_batch)
    with pytest.raises(PublishError, match="already published on Offline demo"):
        _create(crowd_batch)
    assert list(crowd_batch.publications.all()) == [first]
