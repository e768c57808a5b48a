"""MTurk's fee schedule (https://www.mturk.com/pricing), hand-computed: 20% of each assignment's
reward and of each bonus, 40% of the rewards of a HIT of 10 or more assignments, at least $0.01
per assignment and per bonus; CROWD_FEE_RATE, when set, a flat rate instead."""

from decimal import Decimal

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from annotate.crowd import fake
from annotate.crowd.base import MASTERS, PERCENT_APPROVED
from annotate.crowd.models import Publication
from annotate.crowd.pricing import assignments_cost, fee_override, platform_fee
from annotate.crowd.selectors import publication_spending
from annotate.crowd.services import publishing, replacements, review
from annotate.crowd.services.publishing import PublishSettings
from annotate.errors import PublishError
from tests.annotate.crowd.conftest import (
    crowd_assignment,
    published_on_fake,
    submitted_on_fake_platform,
)
from tests.factories import project_with_tasks

pytestmark = pytest.mark.django_db

CENTS_40 = Decimal("0.40")


@pytest.fixture(autouse=True)
def offline_platform():
    fake.FakePlatform.reset()
    yield fake.FakePlatform()
    fake.FakePlatform.reset()


def _batch(assignments_per_task: int, instructions: int = 1):
    project = project_with_tasks(
        instructions=instructions, systems=2, questions=1, assignments_per_task=assignments_per_task
    )
    return project.batches.get()


# --- The one formula -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "max_assignments", "fee"),
    [
        ("0.40", 3, "0.08"),  # 20 %
        ("0.40", 9, "0.08"),
        ("0.40", 10, "0.16"),  # 20 % + 20 % more: 10 or more assignments
        ("0.03", 3, "0.01"),  # $0.006, the minimum is $0.01
        ("0.03", 10, "0.01"),  # $0.012
        ("0.02", None, "0.01"),  # a bonus: $0.004, the minimum
        ("0.40", None, "0.08"),  # a bonus pays 20 %, whatever its HIT's size
        ("0.33", 3, "0.07"),  # $0.066, rounded per assignment
        ("0.00", 3, "0.00"),  # nothing paid, no fee
    ],
)
def test_the_fee_of_one_payment_is_mturks(amount, max_assignments, fee):
    charged = platform_fee(Decimal(amount), max_assignments=max_assignments, flat_rate=None)
    assert charged == Decimal(fee)


def test_the_fee_is_rounded_per_assignment_as_mturk_charges_it():
    """3 assignments of $0.33: MTurk charges $0.07 on each ($0.066), $1.20 in all; 20 % of the
    total, rounded once, would say $1.19."""
    cost = assignments_cost(hits=[(3, 3)], reward_usd=Decimal("0.33"), flat_rate=None)
    assert cost == Decimal("1.20")


def test_a_flat_override_applies_as_before(settings):
    settings.CROWD_FEE_RATE = "0.25"
    assert fee_override() == Decimal("0.25")
    assert platform_fee(CENTS_40, max_assignments=10, flat_rate=fee_override()) == Decimal("0.1")
    cost = assignments_cost(hits=[(3, 3)], reward_usd=Decimal("0.05"), flat_rate=Decimal("0.25"))
    # $0.0125 of fee on each assignment is charged $0.01: 3 × $0.06, not $0.1875 rounded once.
    assert cost == Decimal("0.18")


@pytest.mark.parametrize("value", ["abc", "-0.1", "10", "0.2555", "NaN"])
def test_a_bad_override_is_refused_naming_the_setting(settings, value):
    settings.CROWD_FEE_RATE = value
    with pytest.raises(ImproperlyConfigured, match=f"CROWD_FEE_RATE .* not '{value}'"):
        fee_override()


def test_an_empty_override_is_mturks_schedule(settings):
    settings.CROWD_FEE_RATE = ""
    assert fee_override() is None


# --- Publish preview -------------------------------------------------------------------------


def test_the_preview_charges_20_percent_on_hits_of_fewer_than_10_and_says_why():
    preview = publishing.publication_preview(
        batch=_batch(3, instructions=2), platform_name="fake", reward_usd=CENTS_40
    )
    # 2 HITs × 3 assignments × ($0.40 + $0.08)
    assert (preview.total_usd, preview.fee_rate) == (Decimal("2.88"), None)
    assert preview.fee.startswith(
        "20% MTurk fee (40% for HITs of 10 or more assignments), at least $0.01 an assignment"
    )
    assert "2 HITs of fewer than 10 assignments: 20%" in preview.fee
    assert "https://www.mturk.com/pricing" in preview.fee


def test_the_preview_charges_40_percent_on_a_hit_of_10():
    preview = publishing.publication_preview(
        batch=_batch(10), platform_name="fake", reward_usd=CENTS_40
    )
    assert preview.total_usd == Decimal("5.60")  # 10 × ($0.40 + $0.16)
    assert "1 HIT of 10 or more assignments: 40%" in preview.fee


def test_the_preview_charges_the_minimum_fee_on_a_small_reward():
    preview = publishing.publication_preview(
        batch=_batch(3), platform_name="fake", reward_usd=Decimal("0.03")
    )
    assert preview.total_usd == Decimal("0.12")  # 3 × ($0.03 + $0.01)


def test_the_preview_uses_the_override_when_set(settings):
    settings.CROWD_FEE_RATE = "0.25"
    preview = publishing.publication_preview(
        batch=_batch(10), platform_name="fake", reward_usd=CENTS_40
    )
    assert (preview.total_usd, preview.fee_rate) == (Decimal("5.00"), Decimal("0.25"))
    assert preview.fee.startswith("25% flat fee (CROWD_FEE_RATE)")
    assert preview.fee.endswith("rounded to cents on each")  # as the account is charged


def test_the_publish_page_shows_the_schedule(client, admin_user):
    from django.urls import reverse

    from tests.annotate.crowd.conftest import publish_form

    batch = _batch(10)
    client.force_login(admin_user)
    page = client.post(
        reverse("crowd:publish", args=[batch.pk]),
        {**publish_form(reward_usd="0.40"), "preview": "1"},
    ).text
    assert 'id="cost-total">$5.60<' in page
    assert "40% for HITs of 10 or more assignments" in page
    assert "1 HIT of 10 or more assignments: 40%" in page


def test_a_publication_stores_the_schedule_or_the_override(settings):
    publication = published_on_fake(_batch(3), reward_usd=CENTS_40)
    assert publication.fee_rate is None
    settings.CROWD_FEE_RATE = "0.3"
    assert published_on_fake(_batch(3), reward_usd=CENTS_40).fee_rate == Decimal("0.3")


def test_the_masters_qualification_is_refused_as_it_is_not_priced():
    masters = {"QualificationTypeId": sorted(MASTERS)[0], "Comparator": "Exists"}
    approved = {
        "QualificationTypeId": PERCENT_APPROVED,
        "Comparator": "GreaterThan",
        "IntegerValues": [90],
    }
    chosen = PublishSettings(
        title="t", description="d", qualification_requirements=[approved, masters]
    )
    with pytest.raises(PublishError, match=r"qualification_requirements\[1\]: the Masters"):
        publishing.publication_create(
            batch=_batch(3), platform_name="fake", chosen=chosen, base_url="https://x.org"
        )
    assert not Publication.objects.exists()


# --- The demo account ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("per_task", "reward", "paid"),
    [(3, "0.40", "1.44"), (10, "0.40", "5.60"), (3, "0.03", "0.12")],
)
def test_the_demo_account_pays_mturks_fee_for_a_hit(offline_platform, per_task, reward, paid):
    published_on_fake(_batch(per_task), reward_usd=Decimal(reward))
    assert offline_platform.account_balance() == Decimal("10000.00") - Decimal(paid)


def test_the_demo_account_pays_the_minimum_fee_on_a_small_bonus(offline_platform):
    offline_platform.bonus_send(
        worker_id="W1", assignment_id="A1", amount=Decimal("0.02"), reason="thanks",
        unique_request_token="bonus-1",
    )  # fmt: skip
    assert offline_platform.account_balance() == Decimal("9999.97")  # $0.02 + $0.01


def test_the_demo_account_gives_back_a_rejected_assignment_at_its_hits_rate(offline_platform):
    publication = published_on_fake(_batch(10), reward_usd=CENTS_40)
    hit = publication.hits.get()
    taken = offline_platform.worker_accept(hit_id=hit.hit_id, worker_id="W1")
    offline_platform.worker_submit(assignment_id=taken)
    offline_platform.assignment_reject(assignment_id=taken, feedback="no")
    assert offline_platform.account_balance() == Decimal("9994.96")  # 10000 - 5.60 + 0.56


# --- Replacements and spent so far -----------------------------------------------------------


def _rejected_on(publication, admin_user):
    """One worker's work on the publication's HIT, rejected: its task needs another worker."""
    hit = publication.hits.get()
    work = submitted_on_fake_platform(
        crowd_assignment(task=hit.task, platform="fake", worker="W1"), publication=publication
    )
    review.assignment_reject(assignment_id=work.pk, user=admin_user, feedback="random")
    return hit


@pytest.mark.parametrize(("per_task", "one"), [(3, "0.48"), (10, "0.56")])
def test_a_replacement_costs_the_rate_of_its_hits_max_assignments(admin_user, per_task, one):
    publication = published_on_fake(_batch(per_task), reward_usd=CENTS_40)
    _rejected_on(publication, admin_user)
    plan = replacements.replacements_plan(
        publication_id=publication.pk, now=timezone.now(), user=admin_user
    )
    assert plan.assignments == 1 and plan.total_usd == Decimal(one)
    rate = "40%" if per_task >= 10 else "20%"
    assert f"1 HIT of {'10 or more' if per_task >= 10 else 'fewer than 10'}" in plan.fee
    assert plan.fee.endswith(f"assignments: {rate} (https://www.mturk.com/pricing)")


@pytest.mark.parametrize(
    ("per_task", "reward", "one"), [(3, "0.40", "0.48"), (10, "0.40", "0.56"), (3, "0.03", "0.04")]
)
def test_spent_so_far_prices_work_at_its_hits_rate_and_a_bonus_at_20_percent(
    admin_user, offline_platform, per_task, reward, one
):
    publication = published_on_fake(_batch(per_task), reward_usd=Decimal(reward))
    hit = publication.hits.get()
    work = submitted_on_fake_platform(
        crowd_assignment(task=hit.task, platform="fake", worker="W1"), publication=publication
    )
    review.publication_sync(publication_id=publication.pk, now=timezone.now())
    assert publication_spending(publication=publication).waiting_usd == Decimal(one)
    review.assignment_approve(assignment_id=work.pk, user=admin_user)
    before = offline_platform.account_balance()
    bonus = review.bonus_create(
        assignment_id=work.pk, amount_usd=Decimal("0.02"), reason="thanks", user=admin_user
    )
    review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())
    assert before - offline_platform.account_balance() == Decimal("0.03")
    spent = publication_spending(publication=publication)
    assert spent.approved_usd == spent.total_usd == Decimal(one) + Decimal("0.03")


def test_the_demo_platform_charges_a_bonus_what_the_app_reports_after_the_fee_changed(
    admin_user, offline_platform, settings
):
    """Spent so far and Table 4 price a bonus at its publication's fee (the flat rate it was
    published at); the offline platform charged today's CROWD_FEE_RATE, so after the setting
    changed its account paid another amount than the one reported."""
    settings.CROWD_FEE_RATE = "0.25"
    publication = published_on_fake(_batch(3), reward_usd=CENTS_40)
    hit = publication.hits.get()
    work = submitted_on_fake_platform(
        crowd_assignment(task=hit.task, platform="fake", worker="W1"), publication=publication
    )
    review.assignment_approve(assignment_id=work.pk, user=admin_user)
    settings.CROWD_FEE_RATE = ""  # MTurk's schedule from now on: a $2.00 bonus would pay $0.40
    before = offline_platform.account_balance()
    bonus = review.bonus_create(
        assignment_id=work.pk, amount_usd=Decimal("2.00"), reason="thanks", user=admin_user
    )
    review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())
    charged = before - offline_platform.account_balance()
    assert charged == Decimal("2.50")  # 25%, the publication's fee
    spent = publication_spending(publication=publication)
    assert spent.approved_usd == Decimal("0.50") + charged


def test_a_bad_override_stops_the_start(settings):
    from django.apps import apps

    settings.CROWD_FEE_RATE = "25%"
    with pytest.raises(ImproperlyConfigured, match="CROWD_FEE_RATE"):
        apps.get_app_config("crowd").ready()


@pytest.mark.django_db(transaction=True)
def test_the_migration_turns_the_old_default_into_the_schedule_on_mturk_and_the_demo():
    """Every publication stored CROWD_FEE_RATE's old default, 25%, which MTurk never charged;
    another rate was an operator's choice and stays, and a self-hosted link has no fee."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from tests.factories import BatchFactory

    before = [("crowd", "0008_publication_replacing_until")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    OldPublication = executor.loader.project_state(before).apps.get_model("crowd", "Publication")
    stored = {}
    for token, (platform, rate) in enumerate(
        [("mturk", "0.25"), ("fake", "0.25"), ("mturk", "0.300"), ("selfhosted", "0.25")]
    ):
        stored[platform, rate] = OldPublication.objects.create(
            batch_id=BatchFactory().pk, platform=platform, title="t", description="d",
            reward_usd=Decimal("1"), fee_rate=Decimal(rate), assignments_per_task=3,
            assignment_duration_seconds=60, auto_approval_delay_seconds=60, lifetime_seconds=60,
            task_base_url="https://x.org", link_token=f"tok{token}",
        ).pk  # fmt: skip
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    rates = {key: Publication.objects.get(pk=pk).fee_rate for key, pk in stored.items()}
    assert rates == {
        ("mturk", "0.25"): None,
        ("fake", "0.25"): None,
        ("mturk", "0.300"): Decimal("0.300"),
        ("selfhosted", "0.25"): Decimal("0.250"),
    }
