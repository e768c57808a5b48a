"""Endpoint settings the engine cannot call with are refused by every way in: the service (and
so the command and the judge configurations), the page's form and the database."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from annotate.engine.errors import EndpointError
from annotate.engine.models import Endpoint
from annotate.engine.services import endpoint_create, endpoint_update
from tests.annotate.engine.conftest import make_endpoint

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("timeout_seconds", -1, "Field 'timeout_seconds': Must be more than 0."),
        ("timeout_seconds", 0, "Field 'timeout_seconds': Must be more than 0."),
        ("temperature", 2.5, "Field 'temperature': Ensure this value is less than or equal to 2."),
        ("temperature", -0.1, "Field 'temperature': Ensure this value is greater than or equal"),
        ("top_p", 1.5, "Field 'top_p': Ensure this value is less than or equal to 1."),
        ("top_p", -1, "Field 'top_p': Ensure this value is greater than or equal to 0."),
        ("concurrency", 0, "Field 'concurrency': Must be at least 1."),
        ("concurrency", 257, "Field 'concurrency': At most 256."),
        ("requests_per_minute", 0, "Field 'requests_per_minute': Must be at least 1."),
        ("tokens_per_minute", 0, "Field 'tokens_per_minute': Must be at least 1."),
        ("base_url", "https://api.openai.com/v1/chat/completions", "should end before"),
        ("base_url", "http://127.0.0.1:8000/v1/embeddings/", "should end before /embeddings"),
    ],
)
def test_the_service_refuses_values_out_of_range_naming_the_field(field, value, message):
    fields = {"base_url": "http://127.0.0.1:9/v1", field: value}
    with pytest.raises(EndpointError, match=message):
        endpoint_create(name="new", model="m", **fields)
    assert not Endpoint.objects.exists()
    endpoint = make_endpoint("http://127.0.0.1:9/v1", name="kept")
    with pytest.raises(EndpointError, match=f"Field '{field}'"):
        endpoint_update(endpoint=endpoint, **{field: value})
    endpoint.refresh_from_db()
    assert getattr(endpoint, field) == getattr(Endpoint.objects.get(name="kept"), field)
    assert endpoint.timeout_seconds == 120 and endpoint.base_url == "http://127.0.0.1:9/v1"


def test_the_bounds_themselves_are_accepted():
    endpoint = make_endpoint(
        "", name="edges", temperature=2, top_p=0, timeout_seconds=0.5, concurrency=1
    )
    endpoint_update(endpoint=endpoint, concurrency=256)
    endpoint_update(endpoint=endpoint, temperature=0, top_p=1)
    endpoint.refresh_from_db()
    assert (endpoint.temperature, endpoint.top_p, endpoint.timeout_seconds) == (0, 1, 0.5)


def test_the_command_refuses_a_negative_timeout():
    with pytest.raises(CommandError, match="^--timeout: Must be more than 0"):
        call_command("endpoint_create", "x", "--base-url", "", "--model", "m", "--timeout", "-1")
    assert not Endpoint.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("timeout_seconds", -1),
        ("temperature", 3),
        ("top_p", 1.5),
        ("concurrency", 0),
        ("concurrency", 257),
    ],
)
def test_the_database_refuses_what_the_validators_refuse(field, value):
    endpoint = make_endpoint("", name="fake")
    setattr(endpoint, field, value)
    with pytest.raises(IntegrityError), transaction.atomic():
        endpoint.save()


def test_a_name_differing_only_in_capitals_is_refused():
    make_endpoint("", name="stub-paid")
    with pytest.raises(EndpointError, match="'stub-paid' exists already; names that differ only"):
        endpoint_create(name="STUB-PAID", model="m")
    other = make_endpoint("", name="other")
    with pytest.raises(EndpointError, match="Field 'name': .*'stub-paid' exists already"):
        endpoint_update(endpoint=other, name="Stub-Paid")
    endpoint_update(endpoint=other, name="OTHER")  # its own name in other capitals is fine
    assert sorted(Endpoint.objects.values_list("name", flat=True)) == ["OTHER", "stub-paid"]


@pytest.mark.django_db(transaction=True)
def test_the_migration_brings_existing_values_into_range():
    executor = MigrationExecutor(connection)
    executor.migrate([("engine", "0003_endpoint_stream")])
    old = executor.loader.project_state([("engine", "0003_endpoint_stream")]).apps
    OldEndpoint = old.get_model("engine", "Endpoint")
    OldEndpoint.objects.create(
        name="bad", model="m", timeout_seconds=-1, temperature=3, top_p=-0.5, stop=[]
    )
    OldEndpoint.objects.create(name="fine", model="m", timeout_seconds=30, temperature=0.7, stop=[])
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    bad, fine = Endpoint.objects.get(name="bad"), Endpoint.objects.get(name="fine")
    assert (bad.timeout_seconds, bad.temperature, bad.top_p) == (120, 2, 0)
    assert (fine.timeout_seconds, fine.temperature, fine.top_p) == (30, 0.7, None)


def test_the_offline_fake_is_not_paced_unless_its_creator_asks():
    """The README's `endpoint_create local-fake --base-url ""` got a paid API's 500 requests a
    minute, so a 4,800-prompt verbalizer run on the fake waited about ten minutes."""
    from annotate.engine.limiter import RateLimiter

    call_command("endpoint_create", "local-fake", "--base-url", "", "--model", "fake-1")
    fake = Endpoint.objects.get(name="local-fake")
    assert (fake.requests_per_minute, fake.tokens_per_minute) == (1_000_000, 1_000_000_000)
    waits = []
    limiter = RateLimiter(
        requests_per_minute=fake.requests_per_minute,
        tokens_per_minute=fake.tokens_per_minute,
        clock=lambda: 0.0,  # time stands still: any pacing would have to sleep
        sleep=waits.append,
    )
    for _ in range(4_800):
        limiter.acquire(100)
    assert waits == []
    # Limits given are kept, on the fake as on an address; an address keeps the paid defaults.
    call_command("endpoint_create", "slow-fake", "--base-url", "", "--model", "f", "--rpm", "30")
    slow = Endpoint.objects.get(name="slow-fake")
    assert (slow.requests_per_minute, slow.tokens_per_minute) == (30, 1_000_000_000)
    call_command("endpoint_create", "paid", "--base-url", "https://x.test/v1", "--model", "m")
    paid = Endpoint.objects.get(name="paid")
    assert (paid.requests_per_minute, paid.tokens_per_minute) == (500, 200_000)
    assert (
        endpoint_create(name="svc", model="m", tokens_per_minute=7).requests_per_minute == 1_000_000
    )


def test_a_fake_endpoint_given_an_address_does_not_keep_the_fakes_unpaced_limits():
    """The fake's 1,000,000 requests a minute stayed on an endpoint edited to call a paid API:
    nothing paced its calls. The change is refused, naming the limit; with limits it is kept."""
    fake = endpoint_create(name="was-fake", model="m")
    with pytest.raises(EndpointError) as refused:
        endpoint_update(endpoint=fake, base_url="https://x.test/v1")
    assert refused.value.field == "requests_per_minute"
    assert Endpoint.objects.get(name="was-fake").base_url == ""
    endpoint_update(
        endpoint=Endpoint.objects.get(name="was-fake"), base_url="https://x.test/v1",
        requests_per_minute=500, tokens_per_minute=200_000,
    )  # fmt: skip
    paid = Endpoint.objects.get(name="was-fake")
    assert (paid.base_url, paid.requests_per_minute) == ("https://x.test/v1", 500)
