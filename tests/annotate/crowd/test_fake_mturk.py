"""The fake server answers the real boto3 client the way MTurk does."""

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

REQUIREMENTS = [
    {
        "QualificationTypeId": "000000000000000000L0",
        "Comparator": "GreaterThan",
        "IntegerValues": [90],
    }
]


def _client(server, attempts=1):
    config = Config(retries={"mode": "standard", "total_max_attempts": attempts})
    return boto3.client("mturk", endpoint_url=server.url, region_name="us-east-1", config=config)


def _hit(client, token="t1"):
    type_id = client.create_hit_type(
        Title="Judge",
        Description="d",
        Reward="1.00",
        AssignmentDurationInSeconds=600,
        QualificationRequirements=REQUIREMENTS,
    )["HITTypeId"]
    return client.create_hit_with_hit_type(
        HITTypeId=type_id,
        MaxAssignments=3,
        LifetimeInSeconds=3600,
        Question="<x/>",
        UniqueRequestToken=token,
        RequesterAnnotation=token,
    )["HIT"]


def test_create_and_get_hit(fake_mturk):
    client = _client(fake_mturk)
    assert client.get_account_balance()["AvailableBalance"] == "10000.00"
    hit = _hit(client)
    got = client.get_hit(HITId=hit["HITId"])["HIT"]
    assert got["MaxAssignments"] == 3 and got["HITStatus"] == "Assignable"
    assert got["QualificationRequirements"] == REQUIREMENTS


def test_repeated_token_is_refused_with_hit_already_exists(fake_mturk):
    client = _client(fake_mturk)
    _hit(client, token="same")
    with pytest.raises(ClientError) as raised:
        _hit(client, token="same")
    assert raised.value.response["Error"]["Code"] == "RequestError"
    assert raised.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.HitAlreadyExists"
    assert len(fake_mturk.state.hits) == 1


def test_throttling_is_a_named_error_the_client_can_retry(fake_mturk):
    fake_mturk.fail_next("GetAccountBalance", "ThrottlingException")
    with pytest.raises(ClientError) as raised:
        _client(fake_mturk).get_account_balance()
    assert raised.value.response["Error"]["Code"] == "ThrottlingException"
    fake_mturk.fail_next("GetAccountBalance", "ThrottlingException")
    assert _client(fake_mturk, attempts=3).get_account_balance()["AvailableBalance"]


def test_assignments_are_listed_page_by_page(fake_mturk):
    client = _client(fake_mturk)
    hit = _hit(client)
    fake_mturk.state.hits[hit["HITId"]]["MaxAssignments"] = 25
    for n in range(23):
        fake_mturk.api.worker_submit(
            fake_mturk.api.worker_accept(hit["HITId"], f"AWORKER{n:05d}"), {"summary": "x"}
        )
    seen = []
    paginator = client.get_paginator("list_assignments_for_hit")
    for page in paginator.paginate(HITId=hit["HITId"], PaginationConfig={"PageSize": 10}):
        seen += [a["WorkerId"] for a in page["Assignments"]]
    assert len(seen) == 23 and len(set(seen)) == 23


def test_unsigned_requests_are_refused(fake_mturk):
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        fake_mturk.url,
        data=b"{}",
        method="POST",
        headers={"X-Amz-Target": "MTurkRequesterServiceV20170117.GetAccountBalance"},
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request)
    assert raised.value.code == 400


def test_malformed_worker_ids_are_refused_as_mturk_refuses_them(fake_mturk):
    """MTurk's WorkerIds are "A" then capitals or digits (CustomerId): a call naming any other
    id fails whole with a ValidationException, a message to a list of workers too, though
    botocore sends it (it checks no pattern)."""
    client = _client(fake_mturk)
    with pytest.raises(ClientError) as blocked:
        client.create_worker_block(WorkerId="W-1", Reason="spam")
    with pytest.raises(ClientError) as messaged:
        client.notify_workers(Subject="s", MessageText="m", WorkerIds=["AW1", "w1"])

    assert blocked.value.response["Error"]["Code"] == "ValidationException"
    assert messaged.value.response["Error"]["Code"] == "ValidationException"
    assert messaged.value.response["Error"]["Message"] == (
        "1 validation error detected: Value '[AW1, w1]' at 'workerIds' failed to satisfy "
        "constraint: Member must satisfy constraint: [Member must satisfy regular expression "
        "pattern: ^A[A-Z0-9]+$]"
    )
    assert fake_mturk.state.blocks == {} and fake_mturk.state.notifications == []
    client.notify_workers(Subject="s", MessageText="m", WorkerIds=["AW1", "A" + "9" * 63])
    assert len(fake_mturk.state.notifications) == 1
