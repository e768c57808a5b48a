"""The offline platform's prepaid account, as MTurk's: work is paid for when it is offered
(reward × assignments × (1 + fee)), bonuses with their fee, and work never taken or rejected
is given back."""

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd import fake
from annotate.crowd.base import BonusInfo, HitTypeSpec
from annotate.crowd.selectors import publication_spending
from annotate.crowd.services import review
from annotate.errors import CrowdPlatformError
from tests.annotate.crowd.conftest import (
    crowd_assignment,
    published_on_fake,
    submitted_on_fake_platform,
)
from tests.annotate.crowd.test_mturk_fees import _batch

SPEC = HitTypeSpec(
    title="t", description="d", keywords="", reward=Decimal("0.40"),
    assignment_duration_seconds=60, auto_approval_delay_seconds=60,
    fee_rate=Decimal("0.25"),  # published at a flat 25%: $0.40 an assignment costs $0.50
)  # fmt: skip


@pytest.fixture(autouse=True)
def fee(settings):
    settings.CROWD_FEE_RATE = "0.25"


def _hit(platform, *, max_assignments=3, token="tok") -> str:
    return platform.hit_create(
        hit_type_id=platform.hit_type_create(spec=SPEC), question_url="https://x.org/q",
        max_assignments=max_assignments, lifetime_seconds=3600, unique_request_token=token,
    ).hit_id  # fmt: skip


def _balance(amount: str) -> None:
    with fake._changing() as store:
        store.balance = Decimal(amount)


def test_a_hit_and_its_added_assignments_are_paid_when_made_fee_included():
    platform = fake.FakePlatform()
    hit_id = _hit(platform)  # 3 × $0.40 × 1.25
    assert platform.account_balance() == Decimal("9998.50")
    platform.hit_add_assignments(hit_id=hit_id, count=2, unique_request_token="more")
    assert platform.account_balance() == Decimal("9997.50")


def test_a_bonus_costs_its_amount_and_the_fee():
    platform = fake.FakePlatform()
    platform.bonus_send(
        worker_id="W1", assignment_id="A1", amount=Decimal("2.00"), reason="good",
        unique_request_token="bonus-1",
    )  # fmt: skip
    assert platform.account_balance() == Decimal("9997.50")
    # Listed on its assignment, as MTurk's ListBonusPayments (a retry a day later reads it).
    assert platform.bonuses_list(assignment_id="A1") == [
        BonusInfo(worker_id="W1", assignment_id="A1", amount=Decimal("2.00"), reason="good")
    ]
    assert platform.bonuses_list(assignment_id="A2") == []


def test_what_the_balance_cannot_pay_is_refused_naming_it_and_nothing_changes():
    platform = fake.FakePlatform()
    _balance("1.00")
    with pytest.raises(CrowdPlatformError, match=r"costs \$1\.50 .* balance is \$1\.00"):
        _hit(platform)
    assert platform.store.hits == {} and platform.account_balance() == Decimal("1.00")
    _balance("2.00")
    hit_id = _hit(platform)
    with pytest.raises(CrowdPlatformError, match=r"costs \$1\.00 .* balance is \$0\.50"):
        platform.hit_add_assignments(hit_id=hit_id, count=2, unique_request_token="more")
    assert platform.hit_get(hit_id=hit_id).max_assignments == 3
    assert platform.account_balance() == Decimal("0.50")


def test_rejected_work_and_assignments_never_taken_of_a_deleted_hit_are_given_back():
    platform = fake.FakePlatform()
    hit_id = _hit(platform)
    done = [platform.worker_accept(hit_id=hit_id, worker_id=f"W{n}") for n in range(2)]
    for assignment_id in done:
        platform.worker_submit(assignment_id=assignment_id)
    platform.assignment_approve(assignment_id=done[0])
    platform.assignment_reject(assignment_id=done[1], feedback="random")
    assert platform.account_balance() == Decimal("9999.00")  # the rejected one's $0.50 back
    platform.hit_update_expiration(hit_id=hit_id, expires_at=datetime.now(UTC) - timedelta(1))
    platform.hit_delete(hit_id=hit_id)
    assert platform.account_balance() == Decimal("9999.50")  # and the one nobody took


def test_the_replacements_page_shows_the_balance_less_what_was_published(
    client, crowd_batch, admin_user
):
    publication = published_on_fake(crowd_batch, reward_usd=Decimal("0.40"))
    hit = publication.hits.order_by("id").first()
    platform = fake.FakePlatform()
    for n in range(3):
        platform.worker_submit(
            assignment_id=platform.worker_accept(hit_id=hit.hit_id, worker_id=f"DW{n}")
        )
    client.force_login(admin_user)
    page = client.post(
        reverse("crowd:replacements", args=[publication.pk]), {"action": "check"}
    ).text
    # 3 HITs of 3 assignments at $0.50 each were paid when published.
    assert "the account has $9995.50" in page


def test_a_hits_work_and_bonuses_cost_the_fee_it_was_published_at_not_todays(settings):
    """The app prices a publication's work and bonuses at the fee it stored when published
    (Publication.fee_rate); the offline platform charged today's CROWD_FEE_RATE, so a setting
    changed since made its balance disagree with the costs the app reports."""
    platform = fake.FakePlatform()
    hit_id = _hit(platform)  # published at 25%: 3 × $0.50
    settings.CROWD_FEE_RATE = ""  # MTurk's schedule from now on: $0.40 would cost $0.48
    platform.hit_add_assignments(hit_id=hit_id, count=2, unique_request_token="more")
    assert platform.account_balance() == Decimal("9997.50")  # 2 × $0.50, not 2 × $0.48
    done = platform.worker_accept(hit_id=hit_id, worker_id="W1")
    platform.worker_submit(assignment_id=done)
    platform.assignment_approve(assignment_id=done)
    platform.bonus_send(
        worker_id="W1", assignment_id=done, amount=Decimal("2.00"), reason="good",
        unique_request_token="bonus-1",
    )  # fmt: skip
    assert platform.account_balance() == Decimal("9995.00")  # $2.00 + 25%, not + 20%
    other = platform.worker_accept(hit_id=hit_id, worker_id="W2")
    platform.worker_submit(assignment_id=other)
    platform.assignment_reject(assignment_id=other, feedback="random")
    assert platform.account_balance() == Decimal("9995.50")  # its $0.50 back
    # A HIT of the schedule keeps it whatever the setting says later.
    settings.CROWD_FEE_RATE = "0.25"
    on_schedule = HitTypeSpec(**{**SPEC.__dict__, "fee_rate": None})
    platform.hit_create(
        hit_type_id=platform.hit_type_create(spec=on_schedule), question_url="https://x.org/q",
        max_assignments=3, lifetime_seconds=3600, unique_request_token="schedule",
    )  # fmt: skip
    assert platform.account_balance() == Decimal("9994.06")  # 3 × $0.48


def test_the_state_file_keeps_each_hit_types_fee():
    platform = fake.FakePlatform()
    flat = platform.hit_type_create(spec=SPEC)
    schedule = platform.hit_type_create(spec=HitTypeSpec(**{**SPEC.__dict__, "fee_rate": None}))
    assert flat != schedule  # the same HIT but for its fee is another type
    fake._parsed = None  # read the file afresh, as another process does
    kept = platform.store.hit_types
    assert (kept[flat].fee_rate, kept[schedule].fee_rate) == (Decimal("0.25"), None)


def _approved_offline(admin_user):
    fake.FakePlatform.reset()
    publication = published_on_fake(_batch(3), reward_usd=Decimal("0.40"))
    done = submitted_on_fake_platform(
        crowd_assignment(task=publication.hits.get().task, platform="fake", worker="W1"),
        publication=publication,
    )
    review.assignment_approve(assignment_id=done.pk, user=admin_user)
    return publication, done


def _bonus_paid(done, admin_user, amount: str, reason: str = "thanks") -> None:
    bonus = review.bonus_create(
        assignment_id=done.pk, amount_usd=Decimal(amount), reason=reason, user=admin_user
    )
    review.bonus_pay(bonus_id=bonus.pk, user=admin_user, now=timezone.now())


@pytest.mark.django_db
def test_spent_so_far_counts_each_bonus_rounded_as_the_account_is_charged_it(admin_user):
    """Each bonus is a charge of its own, rounded to cents: three $0.03 bonuses at a flat 25%
    take 3 × $0.04 from the account. "Spent so far" added the unrounded fees and rounded the
    total (3 × $0.0375 = $0.1125: $0.11)."""
    publication, done = _approved_offline(admin_user)
    platform = fake.FakePlatform()
    spent_before = publication_spending(publication=publication).approved_usd
    balance_before = platform.account_balance()
    for n in range(3):
        _bonus_paid(done, admin_user, "0.03", reason=f"thanks {n}")
    charged = balance_before - platform.account_balance()
    reported = publication_spending(publication=publication).approved_usd - spent_before
    assert reported == charged == Decimal("0.12"), (reported, charged)


@pytest.mark.django_db
def test_a_hit_type_of_a_state_file_older_than_its_fee_is_charged_todays_fee_rate(admin_user):
    """A state file written before HIT types kept their fee has none: it was read as MTurk's
    schedule (20%), while a publication made since crowd 0009 under CROWD_FEE_RATE 0.25 stores
    0.25 and the app reports its bonuses at 25%. It is charged today's CROWD_FEE_RATE, as the
    offline account charged then."""
    publication, done = _approved_offline(admin_user)
    assert publication.fee_rate == Decimal("0.25")
    path = fake.state_file()
    data = json.loads(path.read_text())
    for spec in data["hit_types"].values():
        del spec["fee_rate"]
    path.write_text(json.dumps(data))
    fake._parsed = None  # read the older file afresh
    platform = fake.FakePlatform()
    before = platform.account_balance()
    spent_before = publication_spending(publication=publication).approved_usd
    _bonus_paid(done, admin_user, "2.00")
    charged = before - platform.account_balance()
    reported = publication_spending(publication=publication).approved_usd - spent_before
    assert charged == reported == Decimal("2.50"), (charged, reported)
