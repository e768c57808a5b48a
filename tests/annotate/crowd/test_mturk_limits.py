"""MTurk's limits on the texts an admin types (annotate.crowd.limits): refused with the field and
the limit before anything is stored, sent or paid, on every platform; and the fake MTurk server
refuses what MTurk refuses, so a text that slips through shows as a failed call."""

from decimal import Decimal

import pytest
from django.urls import reverse

from annotate.crowd.base import HitTypeSpec
from annotate.crowd.limits import (
    DESCRIPTION_MAX_CHARS,
    FEEDBACK_MAX_CHARS,
    MESSAGE_MAX_CHARS,
    QUALIFICATIONS_MAX,
    SUBJECT_MAX_CHARS,
    TITLE_MAX_CHARS,
)
from annotate.crowd.models import Bonus, Publication
from annotate.crowd.platforms import get_platform
from annotate.crowd.services import publishing, review
from annotate.crowd.services.publishing import PublishSettings, default_qualifications
from annotate.errors import CrowdPlatformError, PublishError
from tests.annotate.crowd.conftest import crowd_assignment, fake_publication, publish_form
from tests.annotate.crowd.test_review import work

pytestmark = pytest.mark.django_db


def test_the_fake_mturk_server_refuses_what_mturk_refuses(mturk_settings, fake_mturk):
    """A call with a text longer than MTurk takes fails as on MTurk (ValidationException) and
    does nothing; at the limit it goes through."""
    platform = get_platform("mturk")
    refused = [
        lambda: platform.workers_notify(
            worker_ids=["AW1"], subject="s" * (SUBJECT_MAX_CHARS + 1), message="m"
        ),
        lambda: platform.workers_notify(
            worker_ids=["AW1"], subject="s", message="m" * (MESSAGE_MAX_CHARS + 1)
        ),
        lambda: platform.assignment_reject(
            assignment_id="A" * 30, feedback="f" * (FEEDBACK_MAX_CHARS + 1)
        ),
        lambda: platform.assignment_approve(
            assignment_id="A" * 30, feedback="f" * (FEEDBACK_MAX_CHARS + 1)
        ),
        lambda: platform.hit_get(hit_id="not-an-id"),  # the service model's pattern
    ]
    for call in refused:
        with pytest.raises(CrowdPlatformError) as error:
            call()
        assert error.value.code == "ValidationException", error.value
    assert fake_mturk.state.notifications == []

    platform.workers_notify(
        worker_ids=["AW1"], subject="s" * SUBJECT_MAX_CHARS, message="m" * MESSAGE_MAX_CHARS
    )
    assert len(fake_mturk.state.notifications) == 1


def test_the_fake_mturk_server_refuses_a_hit_type_mturk_refuses(mturk_settings, fake_mturk):
    platform = get_platform("mturk")
    spec = dict(
        title="t", description="d", keywords="", reward=Decimal("1"),
        assignment_duration_seconds=60, auto_approval_delay_seconds=60,
    )  # fmt: skip
    too_many = default_qualifications() * 6
    for wrong in (
        {"title": "t" * (TITLE_MAX_CHARS + 1)},
        {"description": "d" * (DESCRIPTION_MAX_CHARS + 1)},
        {"qualification_requirements": too_many[: QUALIFICATIONS_MAX + 1]},
    ):
        with pytest.raises(CrowdPlatformError) as error:
            platform.hit_type_create(spec=HitTypeSpec(**{**spec, **wrong}))
        assert error.value.code == "ValidationException"
    assert fake_mturk.state.hit_types == {}
    platform.hit_type_create(spec=HitTypeSpec(**{**spec, "title": "t" * TITLE_MAX_CHARS}))
    assert len(fake_mturk.state.hit_types) == 1


def test_a_message_longer_than_mturk_takes_is_refused_before_any_call(
    client, live, fake_mturk, admin_user
):
    """The API sent the subject and text as typed: MTurk refused a subject over 200 characters
    or a text over 4,096 (after the call). Refused first, 400 naming the field and the limit."""
    worker = work(client, fake_mturk, live.hits.first(), "AW1").annotator
    client.force_login(admin_user)
    url = reverse("crowd-api:notify", args=[worker.pk])
    calls_before = len(fake_mturk.state.calls)

    for field, body in (
        ("subject", {"subject": "s" * (SUBJECT_MAX_CHARS + 1), "message": "m"}),
        ("message", {"subject": "s", "message": "m" * (MESSAGE_MAX_CHARS + 1)}),
    ):
        answer = client.post(url, body, content_type="application/json")
        assert answer.status_code == 400, answer.content
        assert answer.json()["field"] == field
        most = SUBJECT_MAX_CHARS if field == "subject" else MESSAGE_MAX_CHARS
        assert f"at most {most} characters" in answer.json()["detail"]
    assert "NotifyWorkers" not in fake_mturk.state.calls[calls_before:]

    longest = {"subject": "s" * SUBJECT_MAX_CHARS, "message": "m" * MESSAGE_MAX_CHARS}
    assert client.post(url, longest, content_type="application/json").status_code == 200
    assert len(fake_mturk.state.notifications) == 1


@pytest.mark.parametrize("platform", ["fake", "selfhosted"])
def test_the_message_limits_hold_on_every_platform_on_the_review_page(
    client, admin_user, crowd_batch, platform
):
    publication = fake_publication(crowd_batch, platform=platform)
    worker = crowd_assignment(task=crowd_batch.tasks.first(), platform=platform).annotator
    client.force_login(admin_user)

    page = client.post(
        reverse("crowd:worker-action", args=[worker.pk]),
        {"action": "notify", "subject": "s" * (SUBJECT_MAX_CHARS + 1), "message": "m"},
        HTTP_REFERER=reverse("crowd:review", args=[publication.pk]),
        follow=True,
    )

    assert f"subject: at most {SUBJECT_MAX_CHARS} characters" in page.text
    if platform == "fake":  # a self-hosted participant is messaged on the recruiting site
        review_page = client.get(reverse("crowd:review", args=[publication.pk])).text
        assert f'name="subject" maxlength="{SUBJECT_MAX_CHARS}"' in review_page


def test_a_bonus_reason_longer_than_feedback_takes_is_refused_before_it_is_paid(
    client, live, fake_mturk, admin_user
):
    """A bonus's reason had no limit (the review page's field none either): a reason as long
    as the worker may be sent as feedback is the longest; longer, 400 on "feedback", no bonus
    stored, nothing paid."""
    done = work(client, fake_mturk, live.hits.first(), "AW1")
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    client.force_login(admin_user)
    url = reverse("crowd-api:bonus", args=[done.pk])

    answer = client.post(
        url,
        {"amount_usd": "0.50", "feedback": "r" * (FEEDBACK_MAX_CHARS + 1)},
        content_type="application/json",
    )

    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == "feedback"
    assert f"at most {FEEDBACK_MAX_CHARS} characters" in answer.json()["detail"]
    assert not Bonus.objects.exists() and fake_mturk.state.bonuses == []
    assert "SendBonus" not in fake_mturk.state.calls
    paid = client.post(
        url,
        {"amount_usd": "0.50", "feedback": "r" * FEEDBACK_MAX_CHARS},
        content_type="application/json",
    )
    assert paid.status_code == 200 and paid.json()["status"] == "paid"
    page = client.get(reverse("crowd:review", args=[live.pk])).text
    assert f'name="feedback" maxlength="{FEEDBACK_MAX_CHARS}" required></label>' in page


@pytest.mark.parametrize("platform", ["fake", "selfhosted"])
def test_a_title_mturk_refuses_is_refused_on_the_publish_page_for_every_platform(
    client, admin_user, crowd_batch, platform
):
    """The form took titles up to 200 characters; MTurk takes 128. Refused beside the field
    before a total is quoted, for a self-hosted link too (the same settings work everywhere)."""
    client.force_login(admin_user)
    extra = {"completion_code": "C0DE"} if platform == "selfhosted" else {}
    form = publish_form(platform, title="t" * (TITLE_MAX_CHARS + 1), preview="1", **extra)

    page = client.post(reverse("crowd:publish", args=[crowd_batch.pk]), form)

    assert page.status_code == 200
    assert f"at most {TITLE_MAX_CHARS} characters" in page.text
    assert 'id="cost-total"' not in page.text
    assert not Publication.objects.exists()


def test_the_publish_api_refuses_what_mturk_refuses(client, admin_user, crowd_batch, settings):
    settings.CROWD_PUBLIC_URL = "https://annotate.example.org"
    client.force_login(admin_user)
    url = reverse("crowd-api:publish", args=[crowd_batch.pk])
    body = {"platform": "fake", "title": "t", "description": "d", "reward_usd": "1.00"}
    body["confirm_total_usd"] = "10.80"  # 3 HITs of 3 assignments × ($1 + 20 % fee)
    for field, value in (
        ("title", "t" * (TITLE_MAX_CHARS + 1)),
        ("description", "d" * (DESCRIPTION_MAX_CHARS + 1)),
        ("keywords", "k" * 501),
        ("qualification_requirements", default_qualifications() * 6),
    ):
        answer = client.post(url, {**body, field: value}, content_type="application/json")
        assert answer.status_code == 400 and field in answer.json(), (field, answer.json())
    assert not Publication.objects.exists()
    assert client.post(url, body, content_type="application/json").status_code == 201


def test_the_publish_check_holds_the_limits_for_commands_too(crowd_batch):
    """verbalizer_publish and every other caller of the publish check, not only the forms."""
    for field, chosen in (
        ("title", PublishSettings(title="t" * (TITLE_MAX_CHARS + 1), description="d")),
        ("description", PublishSettings(title="t", description="d" * (DESCRIPTION_MAX_CHARS + 1))),
        (
            "qualification_requirements",
            PublishSettings(
                title="t", description="d", qualification_requirements=default_qualifications() * 6
            ),
        ),
    ):
        with pytest.raises(PublishError) as error:
            publishing.publish_settings_check(
                platform_name="selfhosted", chosen=chosen, reward_usd=Decimal("1")
            )
        assert error.value.field == field and "at most" in str(error.value)


def test_the_publish_pages_offer_a_title_they_take_for_a_long_stored_name(
    client, admin_user, crowd_batch
):
    """The default title holds the project's or study's name (200 characters at most): one
    over TITLE_MAX_CHARS was offered, and the form sent as it stood was refused on its title."""
    import html
    import re

    from annotate.verbalizer.services.humans import human_study_create
    from annotate.verbalizer.services.sets import evaluation_set_create
    from tests.annotate.verbalizer.helpers import fill

    crowd_batch.project.name = "p" * 200
    crowd_batch.project.save(update_fields=["name"])
    fill("SST-2", [True, False])
    evaluation_set = evaluation_set_create(
        name="long", datasets=["SST-2"], items=2, seed=1, mappings="flipped-golden"
    ).evaluation_set
    study = human_study_create(evaluation_set=evaluation_set, name="s" * 200)
    client.force_login(admin_user)
    for url in (
        reverse("crowd:publish", args=[crowd_batch.pk]),
        reverse("verbalizer:study-publish", args=[study.pk]),
    ):
        page = client.get(url).text
        title = html.unescape(re.search(r'name="title"[^>]*value="([^"]*)"', page)[1])
        assert len(title) == TITLE_MAX_CHARS and title.endswith("…"), url
