"""Make and revoke a user's own API tokens (django-rest-knox: only a hash of each is stored)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from knox.models import AuthToken

from annotate.errors import NotFoundError


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
