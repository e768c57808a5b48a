"""Amazon Mechanical Turk through boto3's `mturk` client.

Credentials come from the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or any source
boto3's default chain reads); the endpoint is the sandbox or production one from settings, or
MTURK_ENDPOINT_URL when set (the tests point it at a local fake server).
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from decimal import Decimal

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError
from django.conf import settings

from annotate.crowd.base import (
    AssignmentInfo,
    BonusInfo,
    HitInfo,
    HitTypeSpec,
    external_question_xml,
    reward_string,
)
from annotate.errors import (
    AlreadyProcessedError,
    CrowdPlatformError,
    HitAlreadyExistsError,
    TransientPlatformError,
)

SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"
THROTTLING_CODES = {
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ServiceUnavailable",
    "ServiceFault",
    "InternalFailure",
}
PAGE_SIZE = 100
# MTurk's ids, as its service model gives them (CustomerId, EntityId), which botocore does not
# check: a worker's is "A" then capitals or digits, an assignment's (and a HIT's) capitals or
# digits, at most 64 characters. The service refuses a call naming any other (ValidationException).
WORKER_ID = re.compile(r"A[A-Z0-9]{1,63}")
ENTITY_ID = re.compile(r"[A-Z0-9]{1,64}")


def endpoint_url() -> str:
    if settings.MTURK_ENDPOINT_URL:
        return settings.MTURK_ENDPOINT_URL
    return SANDBOX_ENDPOINT if settings.MTURK_SANDBOX else PRODUCTION_ENDPOINT


def _timestamp(value) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromtimestamp(float(value), tz=UTC)


def _translate(error: ClientError, operation: str) -> CrowdPlatformError:
    """Turn a ClientError into one of our errors; transient ones are worth a later retry."""
    code = error.response.get("Error", {}).get("Code", "")
    message = error.response.get("Error", {}).get("Message", "") or str(error)
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    turk_code = error.response.get("TurkErrorCode", "")
    text = f"MTurk {operation}: {message}"
    if code in THROTTLING_CODES or status >= 500:
        return TransientPlatformError(text, code=code or str(status), operation=operation)
    if turk_code.endswith("HitAlreadyExists") or "UniqueRequestToken" in message:
        return HitAlreadyExistsError(text, code="HitAlreadyExists", operation=operation)
    if re.search(r"idempotency token .* already been processed", message):
        return AlreadyProcessedError(text, code="AlreadyProcessed", operation=operation)
    return CrowdPlatformError(text, code=turk_code or code, operation=operation)


@functools.lru_cache(maxsize=4)
def _client(endpoint: str, max_attempts: int):
    """One boto3 client per endpoint: building one loads the service model (slow), and clients
    are safe to share between threads."""
    return boto3.client(
        "mturk",
        region_name="us-east-1",
        endpoint_url=endpoint,
        config=Config(
            retries={"mode": "standard", "total_max_attempts": max_attempts},
            connect_timeout=10,
            read_timeout=30,
        ),
    )


class MTurkPlatform:
    name = "mturk"
    creates_hits = True
    pays_workers = True

    @staticmethod
    def on_sandbox() -> bool:
        """MTURK_SANDBOX, also when MTURK_ENDPOINT_URL overrides the address (the tests' fake
        server stands for whichever endpoint the setting names)."""
        return settings.MTURK_SANDBOX

    @staticmethod
    def worker_id_issued(worker_id: str) -> bool:
        return WORKER_ID.fullmatch(worker_id) is not None

    @staticmethod
    def assignment_id_issued(assignment_id: str) -> bool:
        return ENTITY_ID.fullmatch(assignment_id) is not None

    def __init__(self, client=None) -> None:
        self.client = client or _client(endpoint_url(), settings.MTURK_MAX_ATTEMPTS)

    def _call(self, operation: str, **params):
        try:
            return getattr(self.client, operation)(**params)
        except ClientError as error:
            raise _translate(error, operation) from error
        except (ConnectionError, HTTPClientError) as error:
            raise TransientPlatformError(
                f"MTurk {operation}: {error}", code="ConnectionError", operation=operation
            ) from error
        except BotoCoreError as error:  # no credentials, bad parameters
            raise CrowdPlatformError(
                f"MTurk {operation}: {error}", code=type(error).__name__, operation=operation
            ) from error

    @staticmethod
    def _hit_info(hit: dict) -> HitInfo:
        return HitInfo(
            hit_id=hit["HITId"],
            status=hit.get("HITStatus", ""),
            max_assignments=hit.get("MaxAssignments", 0),
            expires_at=_timestamp(hit.get("Expiration")),
            annotation=hit.get("RequesterAnnotation", ""),
            assignments_available=hit.get("NumberOfAssignmentsAvailable"),
            assignments_pending=hit.get("NumberOfAssignmentsPending"),
        )

    @staticmethod
    def _assignment_info(row: dict) -> AssignmentInfo:
        return AssignmentInfo(
            assignment_id=row["AssignmentId"],
            worker_id=row["WorkerId"],
            hit_id=row["HITId"],
            status=row["AssignmentStatus"],
            submitted_at=_timestamp(row.get("SubmitTime")),
            answer=row.get("Answer", ""),
        )

    def account_balance(self) -> Decimal | None:
        return Decimal(self._call("get_account_balance")["AvailableBalance"])

    def hit_type_create(self, *, spec: HitTypeSpec) -> str:
        return self._call(
            "create_hit_type",
            Title=spec.title,
            Description=spec.description,
            Keywords=spec.keywords,
            Reward=reward_string(spec.reward),
            AssignmentDurationInSeconds=spec.assignment_duration_seconds,
            AutoApprovalDelayInSeconds=spec.auto_approval_delay_seconds,
            QualificationRequirements=spec.qualification_requirements,
        )["HITTypeId"]

    def hit_create(
        self,
        *,
        hit_type_id: str,
        question_url: str,
        max_assignments: int,
        lifetime_seconds: int,
        unique_request_token: str,
    ) -> HitInfo:
        hit = self._call(
            "create_hit_with_hit_type",
            HITTypeId=hit_type_id,
            MaxAssignments=max_assignments,
            LifetimeInSeconds=lifetime_seconds,
            Question=external_question_xml(question_url),
            UniqueRequestToken=unique_request_token,
            RequesterAnnotation=unique_request_token,
        )["HIT"]
        return self._hit_info(hit)

    def hit_find(self, *, unique_request_token: str) -> HitInfo | None:
        """Find the HIT made with this token (it is also the HIT's RequesterAnnotation)."""
        found = self.hits_find(unique_request_tokens={unique_request_token})
        return found.get(unique_request_token)

    def hits_find(self, *, unique_request_tokens: set[str]) -> dict[str, HitInfo]:
        """The HITs made with these tokens (each also the HIT's RequesterAnnotation), by token:
        ListHITs page by page, stopping once every token is found."""
        found: dict[str, HitInfo] = {}
        params: dict = {"MaxResults": PAGE_SIZE}
        while len(found) < len(unique_request_tokens):
            page = self._call("list_hits", **params)
            for hit in page.get("HITs", []):
                if hit.get("RequesterAnnotation") in unique_request_tokens:
                    found[hit["RequesterAnnotation"]] = self._hit_info(hit)
            if not page.get("NextToken"):
                break
            params["NextToken"] = page["NextToken"]
        return found

    def hit_get(self, *, hit_id: str) -> HitInfo:
        return self._hit_info(self._call("get_hit", HITId=hit_id)["HIT"])

    def hit_update_expiration(self, *, hit_id: str, expires_at: datetime) -> None:
        self._call("update_expiration_for_hit", HITId=hit_id, ExpireAt=expires_at)

    def hit_delete(self, *, hit_id: str) -> None:
        self._call("delete_hit", HITId=hit_id)

    def hit_add_assignments(self, *, hit_id: str, count: int, unique_request_token: str) -> None:
        self._call(
            "create_additional_assignments_for_hit",
            HITId=hit_id,
            NumberOfAdditionalAssignments=count,
            UniqueRequestToken=unique_request_token,
        )

    def assignments_list(self, *, hit_id: str) -> list[AssignmentInfo]:
        rows: list[AssignmentInfo] = []
        params: dict = {
            "HITId": hit_id,
            "MaxResults": PAGE_SIZE,
            "AssignmentStatuses": ["Submitted", "Approved", "Rejected"],
        }
        while True:
            page = self._call("list_assignments_for_hit", **params)
            rows += [self._assignment_info(row) for row in page.get("Assignments", [])]
            if not page.get("NextToken"):
                return rows
            params["NextToken"] = page["NextToken"]

    def assignment_get(self, *, assignment_id: str) -> AssignmentInfo:
        reply = self._call("get_assignment", AssignmentId=assignment_id)
        return self._assignment_info(reply["Assignment"])

    def assignment_approve(self, *, assignment_id: str, feedback: str = "") -> None:
        params = {"AssignmentId": assignment_id}
        if feedback:
            params["RequesterFeedback"] = feedback
        self._call("approve_assignment", **params)

    def assignment_reject(self, *, assignment_id: str, feedback: str) -> None:
        self._call("reject_assignment", AssignmentId=assignment_id, RequesterFeedback=feedback)

    def bonus_send(
        self,
        *,
        worker_id: str,
        assignment_id: str,
        amount: Decimal,
        reason: str,
        unique_request_token: str,
    ) -> None:
        self._call(
            "send_bonus",
            WorkerId=worker_id,
            AssignmentId=assignment_id,
            BonusAmount=reward_string(amount),
            Reason=reason,
            UniqueRequestToken=unique_request_token,
        )

    def bonuses_list(self, *, assignment_id: str) -> list[BonusInfo]:
        rows: list[BonusInfo] = []
        params: dict = {"AssignmentId": assignment_id, "MaxResults": PAGE_SIZE}
        while True:
            page = self._call("list_bonus_payments", **params)
            rows += [
                BonusInfo(
                    worker_id=row.get("WorkerId", ""),
                    assignment_id=row.get("AssignmentId", ""),
                    amount=Decimal(row.get("BonusAmount", "0")),
                    reason=row.get("Reason", ""),
                )
                for row in page.get("BonusPayments", [])
            ]
            if not page.get("NextToken"):
                return rows
            params["NextToken"] = page["NextToken"]

    def worker_block(self, *, worker_id: str, reason: str) -> None:
        self._call("create_worker_block", WorkerId=worker_id, Reason=reason)

    def worker_unblock(self, *, worker_id: str, reason: str = "") -> None:
        params = {"WorkerId": worker_id}
        if reason:
            params["Reason"] = reason
        self._call("delete_worker_block", **params)

    def workers_notify(self, *, worker_ids: list[str], subject: str, message: str) -> list[str]:
        failed: list[str] = []
        for start in range(0, len(worker_ids), 100):  # MTurk takes at most 100 ids per call
            reply = self._call(
                "notify_workers",
                Subject=subject,
                MessageText=message,
                WorkerIds=worker_ids[start : start + 100],
            )
            failed += [row["WorkerId"] for row in reply.get("NotifyWorkersFailureStatuses", [])]
        return failed
