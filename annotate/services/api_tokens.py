"""Make and revoke a user's own API tokens (django-rest-knox: only a hash of each is stored).

A password change revokes every token of the user (annotate.password_changes calls
`api_token_revoke_for_password_change`), as it ends their other sessions.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet
from knox.models import AuthToken

from annotate.errors import NotFoundError
from annotate.models import PasswordTokenRevocation


def api_token_list(*, user: AbstractBaseUser) -> QuerySet[AuthToken]:
    """Return the user's own tokens, newest first."""
    return AuthToken.objects.filter(user=user).order_by("-created")


def api_token_create(*, user: AbstractBaseUser) -> tuple[AuthToken, str]:
    """Make a token for the user; return it and its key, which is never stored or shown again.

    It expires after REST_KNOX["TOKEN_TTL"] (setting API_TOKEN_TTL_DAYS)."""
    return AuthToken.objects.create(user=user)


def api_token_revoke(*, user: AbstractBaseUser, token_id: str) -> None:
    """Delete one of the user's tokens; NotFoundError if it is missing or someone else's."""
    deleted, _ = AuthToken.objects.filter(user=user, digest=token_id).delete()
    if not deleted:
        raise NotFoundError("No such API token of yours: it may have been revoked already.")


def api_token_revoke_all(*, user: AbstractBaseUser) -> int:
    """Delete every token of the user; return how many there were."""
    deleted, _ = AuthToken.objects.filter(user=user).delete()
    return deleted


@transaction.atomic
def api_token_revoke_for_password_change(*, user: AbstractBaseUser, now: datetime) -> int:
    """Delete every token of the user whose password changed; record it when there were any.

    Return how many there were."""
    deleted, _ = AuthToken.objects.filter(user=user).delete()
    if deleted:
        PasswordTokenRevocation.objects.create(user=user, revoked_at=now, token_count=deleted)
    return deleted


def api_token_password_revocation_notice(
    *, user: AbstractBaseUser
) -> PasswordTokenRevocation | None:
    """Return the latest revocation of the user's tokens by a password change, unless they
    have made a token since (then they know)."""
    revocation = PasswordTokenRevocation.objects.filter(user=user).order_by("-revoked_at").first()
    if revocation is None:
        return None
    if AuthToken.objects.filter(user=user, created__gte=revocation.revoked_at).exists():
        return None
    return revocation
