"""The mturk back-end through real boto3 and HTTP; the registry; the call log."""

from decimal import Decimal

import pytest

from annotate.crowd.base import PREVIEW_ASSIGNMENT_ID, HitTypeSpec, external_question_xml
from annotate.crowd.models import PlatformCall
from annotate.crowd.platforms import get_platform, platform_names
from annotate.errors import (
    AlreadyProcessedError,
    CrowdPlatformError,
    HitAlreadyExistsError,
    TransientPlatformError,
)

pytestmark = pytest.mark.django_db

SPEC = HitTypeSpec(
    title="Judge responses",
    description="Answer yes/no questions",
    keywords="judge",
    reward=Decimal("1"),
    assignment_duration_seconds=600,
    auto_approval_delay_seconds=3600,
)


def _hit(platform, token="tok-1"):
    type_id = platform.hit_type_create(spec=SPEC)
    return platform.hit_create(
        hit_type_id=type_id,
        question_url="https://example.org/crowd/mturk/x/?a=1&b=2",
        max_assignments=3,
        lifetime_seconds=3600,
        unique_request_token=token,
    )


def test_mturk_backend_sends_reward_as_two_decimals_and_external_question(
    mturk_settings, fake_mturk
):
    platform = get_platform()
    hit = _hit(platform)
    stored = fake_mturk.state.hits[hit.hit_id]
    hit_type = fake_mturk.state.hit_types[stored["HITTypeId"]]
    assert hit_type["Reward"] == "1.00"
    assert "<FrameHeight>0</FrameHeight>" in stored["Question"]
    assert "?a=1&amp;b=2" in stored["Question"]
    assert stored["MaxAssignments"] == 3 and stored["RequesterAnnotation"] == "tok-1"


def test_mturk_repeated_token_raises_hit_already_exists_and_is_found(mturk_settings):
    platform = get_platform()
    first = _hit(platform, token="again")
    with pytest.raises(HitAlreadyExistsError):
        _hit(platform, token="again")
    assert platform.hit_find(unique_request_token="again").hit_id == first.hit_id
    assert platform.hit_find(unique_request_token="never") is None


def test_mturk_throttling_after_boto_retries_is_transient(mturk_settings, fake_mturk):
    for _ in range(3):
        fake_mturk.fail_next("GetAccountBalance", "ThrottlingException")
    with pytest.raises(TransientPlatformError):
        get_platform().account_balance()
    fake_mturk.fail_next("GetAccountBalance", "ThrottlingException")
    assert get_platform().account_balance() == Decimal("10000.00")


def test_mturk_request_error_is_not_transient(mturk_settings):
    with pytest.raises(CrowdPlatformError) as raised:
        get_platform().hit_get(hit_id="NOPE")
    assert not raised.value.transient


def test_mturk_bonus_token_reused_is_already_processed(mturk_settings, fake_mturk):
    platform = get_platform()
    hit = _hit(platform)
    assignment_id = fake_mturk.api.worker_accept(hit.hit_id, "AW1")
    fake_mturk.api.worker_submit(assignment_id, {"x": "1"})
    kwargs = dict(
        worker_id="AW1",
        assignment_id=assignment_id,
        amount=Decimal("0.5"),
        reason="good",
        unique_request_token="bonus-1",
    )
    platform.bonus_send(**kwargs)
    with pytest.raises(AlreadyProcessedError):
        platform.bonus_send(**kwargs)
    assert fake_mturk.state.bonuses[0]["BonusAmount"] == "0.50"
    assert len(fake_mturk.state.bonuses) == 1


def test_every_call_is_recorded_with_user_and_result(mturk_settings, admin_user):
    platform = get_platform(user=admin_user)
    platform.account_balance()
    with pytest.raises(CrowdPlatformError):
        platform.hit_get(hit_id="NOPE")
    ok, failed = PlatformCall.objects.order_by("id")
    assert (ok.operation, ok.ok, ok.user, ok.platform) == (
        "account_balance",
        True,
        admin_user,
        "mturk",
    )
    assert failed.operation == "hit_get" and not failed.ok
    assert failed.request == {"hit_id": "NOPE"} and "does not exist" in failed.result


def test_unknown_backend_is_a_clear_error(settings):
    settings.CROWD_BACKEND = "nowhere"
    with pytest.raises(CrowdPlatformError, match="Unknown crowd platform 'nowhere'"):
        get_platform()


def test_selfhosted_is_always_offered(settings):
    assert platform_names() == ["fake", "selfhosted"]
    settings.CROWD_BACKEND = "selfhosted"
    assert platform_names() == ["selfhosted"]


def test_external_question_escapes_the_url():
    xml = external_question_xml("https://x.org/a?b=1&c=<2>")
    assert "https://x.org/a?b=1&amp;c=&lt;2&gt;" in xml and PREVIEW_ASSIGNMENT_ID


def test_mturk_endpoint_is_sandbox_or_production_from_settings_unless_overridden(settings):
    from annotate.crowd.mturk import PRODUCTION_ENDPOINT, SANDBOX_ENDPOINT, endpoint_url

    settings.MTURK_ENDPOINT_URL = ""
    settings.MTURK_SANDBOX = True
    assert (
        endpoint_url()
        == SANDBOX_ENDPOINT
        == "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
    )
    settings.MTURK_SANDBOX = False
    assert (
        endpoint_url() == PRODUCTION_ENDPOINT == "https://mturk-requester.us-east-1.amazonaws.com"
    )
    settings.MTURK_ENDPOINT_URL = "http://127.0.0.1:9/"
    assert endpoint_url() == "http://127.0.0.1:9/"
