"""Self-hosted links: no outside platform. A publication gets a public link that any recruiting
site can send workers to; payment and messages happen on that site, so those calls refuse."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from annotate.crowd.base import AssignmentInfo, BonusInfo, HitInfo, HitTypeSpec
from annotate.errors import CrowdPlatformError


def _not_here(what: str) -> CrowdPlatformError:
    return CrowdPlatformError(
        f"Self-hosted links have no {what}: do it on the site that recruited the workers.",
        code="NotSupported",
    )


class SelfHostedPlatform:
    name = "selfhosted"
    creates_hits = False
    pays_workers = False

    @staticmethod
    def on_sandbox() -> bool:
        return False

    @staticmethod
    def worker_id_issued(worker_id: str) -> bool:
        """Any: the id is the recruiting site's (PROLIFIC_PID, workerId) or our anonymous one,
        and its blocks are kept here only."""
        return True

    @staticmethod
    def assignment_id_issued(assignment_id: str) -> bool:
        return True

    def account_balance(self) -> Decimal | None:
        return None

    def hit_type_create(self, *, spec: HitTypeSpec) -> str:
        raise _not_here("HITs")

    def hit_create(self, **kwargs) -> HitInfo:
        raise _not_here("HITs")

    def hit_find(self, *, unique_request_token: str) -> HitInfo | None:
        return None

    def hits_find(self, *, unique_request_tokens: set[str]) -> dict[str, HitInfo]:
        return {}

    def hit_get(self, *, hit_id: str) -> HitInfo:
        raise _not_here("HITs")

    def hit_update_expiration(self, *, hit_id: str, expires_at: datetime) -> None:
        raise _not_here("HITs")

    def hit_delete(self, *, hit_id: str) -> None:
        raise _not_here("HITs")

    def assignments_list(self, *, hit_id: str) -> list[AssignmentInfo]:
        return []

    def assignment_get(self, *, assignment_id: str) -> AssignmentInfo:
        raise _not_here("platform assignments")

    def assignment_approve(self, *, assignment_id: str, feedback: str = "") -> None:
        """Approval is recorded in our database only."""

    def assignment_reject(self, *, assignment_id: str, feedback: str) -> None:
        """Rejection is recorded in our database only."""

    def bonuses_list(self, *, assignment_id: str) -> list[BonusInfo]:
        return []

    def bonus_send(self, **kwargs) -> None:
        raise _not_here("payments")

    def worker_block(self, *, worker_id: str, reason: str) -> None:
        """Blocks are kept in our database only."""

    def worker_unblock(self, *, worker_id: str, reason: str = "") -> None:
        """Blocks are kept in our database only."""

    def workers_notify(self, *, worker_ids: list[str], subject: str, message: str) -> list[str]:
        raise _not_here("messages to workers")
