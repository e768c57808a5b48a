"""A GET of a crowd page or API endpoint reads what is stored and asks the platform nothing
(slow, rate-limited by MTurk, and a failed page in an outage): the account balance is shown as
last checked, with its time, and asked for on an admin's POST (Check balance, Resume's
confirmation, the replacements' check). Counted at the fake MTurk server, over real HTTP."""

from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from annotate.crowd.models import AccountBalance, PlatformCall
from annotate.crowd.services import publishing
from annotate.crowd.services.publishing import PublishSettings
from tests.annotate.crowd.test_replacements import _rejected_on_first_hit

pytestmark = pytest.mark.django_db
# 3 assignments × ($1.00 + MTurk's 20% fee) a HIT
PER_HIT = Decimal("3.60")


def _partial(fake_mturk, crowd_batch):
    """A publication whose second HIT MTurk refused: partly published, one HIT missing."""
    fake_mturk.fail_next("CreateHITWithHITType", "RequestError", "You do not have enough funds.")
    publication = publishing.publication_create(
        batch=crowd_batch,
        platform_name="mturk",
        chosen=PublishSettings(title="t", description="d", reward_usd=Decimal("1.00")),
        base_url="https://annotate.example.org",
    )
    return publishing.publication_publish(publication_id=publication.pk, now=timezone.now())


class AskedNothing:
    """Asserts on leaving that the fake MTurk server got no request, nor the call log a row."""

    def __init__(self, fake_mturk):
        self.fake_mturk = fake_mturk

    def __enter__(self):
        self.calls, self.rows = len(self.fake_mturk.state.calls), PlatformCall.objects.count()
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            assert self.fake_mturk.state.calls[self.calls :] == []
            assert PlatformCall.objects.count() == self.rows


def test_the_publication_page_shows_the_last_balance_and_asks_for_it_only_on_a_press(
    client, admin_user, mturk_settings, fake_mturk, crowd_batch
):
    """The page's GET asked MTurk for the balance (Resume's quote) at every load, and every
    2 s while it refreshed."""
    publication = _partial(fake_mturk, crowd_batch)
    client.force_login(admin_user)
    url = reverse("crowd:publication", args=[publication.pk])
    with AskedNothing(fake_mturk):
        page = client.get(url).text
    assert 'id="resume-button"' in page and f"${PER_HIT}" in page
    assert 'Balance: <span id="resume-balance">not checked yet</span>' in page
    assert 'id="balance-check"' in page

    fake_mturk.state.balance = Decimal("2.00")
    checked = client.post(
        reverse("crowd:publication-action", args=[publication.pk]), {"action": "balance"}
    )
    assert checked.status_code == 302
    assert fake_mturk.state.calls[-1] == "GetAccountBalance"
    stored = AccountBalance.objects.get(platform="mturk", sandbox=False)
    assert stored.balance_usd == Decimal("2.00")
    with AskedNothing(fake_mturk):
        page = client.get(url).text
    assert '<span id="resume-balance">$2.00</span>, checked' in page
    assert 'id="resume-unaffordable"' in page and 'id="resume-button"' not in page

    fake_mturk.state.balance = Decimal("50.00")  # funds added: the confirmation asks again
    refused_before = fake_mturk.state.calls.count("GetAccountBalance")
    client.post(
        reverse("crowd:publication-action", args=[publication.pk]),
        {"action": "publish", "confirm_total": str(PER_HIT)},
    )
    assert fake_mturk.state.calls.count("GetAccountBalance") == refused_before + 1
    assert AccountBalance.objects.get().balance_usd == Decimal("50.00")


def test_the_api_quotes_a_resume_from_the_last_balance_and_checks_it_on_a_post(
    client, admin_user, mturk_settings, fake_mturk, crowd_batch
):
    publication = _partial(fake_mturk, crowd_batch)
    client.force_login(admin_user)
    with AskedNothing(fake_mturk):
        quote = client.get(reverse("crowd-api:resume", args=[publication.pk])).json()
    assert quote["total_usd"] == str(PER_HIT)
    assert (quote["balance_usd"], quote["balance_checked_at"]) == (None, None)

    checked = client.post(reverse("crowd-api:balance", args=[publication.pk]))
    assert checked.status_code == 200 and checked.json()["balance_usd"] == "10000.00"
    assert fake_mturk.state.calls[-1] == "GetAccountBalance"
    with AskedNothing(fake_mturk):
        quote = client.get(reverse("crowd-api:resume", args=[publication.pk])).json()
    assert quote["balance_usd"] == "10000.00" and quote["balance_checked_at"]
    assert quote["affordable"] is True


def test_the_replacements_api_get_reads_what_is_stored_and_its_check_asks_the_platform(
    client, live, fake_mturk, admin_user
):
    """GET .../replacements/ asked MTurk about every HIT whose task needed work, and for the
    balance; the HTML page already asked only on its Check press."""
    hit, _ = _rejected_on_first_hit(client, live, fake_mturk, admin_user)
    client.force_login(admin_user)
    url = reverse("crowd-api:replacements", args=[live.pk])
    with AskedNothing(fake_mturk):
        stored = client.get(url)
    assert stored.status_code == 200
    body = stored.json()
    # The first task still needs 1 (one work rejected), the two others all 3 of theirs.
    assert (body["still_needed_hits"], body["still_needed_assignments"]) == (3, 7)
    assert body["balance_usd"] is None and "hits" not in body

    plan = client.post(reverse("crowd-api:replacements-check", args=[live.pk]))
    assert plan.status_code == 200
    assert "GetHIT" in fake_mturk.state.calls and fake_mturk.state.calls[-1] == "GetAccountBalance"
    plan = plan.json()
    assert [(h["hit_id"], h["add"]) for h in plan["hits"]] == [(hit.hit_id, 1)]
    with AskedNothing(fake_mturk):
        body = client.get(url).json()
    assert body["balance_usd"] == "10000.00" and body["balance_checked_at"]
