"""A password change revokes the user's API tokens, whichever way the password was changed.

Every way in (the admin's password forms, `manage.py changepassword`, a password reset, any code
calling `set_password()` or `set_unusable_password()`, or assigning a hash, and saving) ends in a
save of the user row with a new hash, so one receiver of the user model's pre_save sees them all
(connected in AnnotateConfig.ready; a signal from Django's auth, whose writes call no service of
ours).

Two saves write without a new password and keep the tokens: a login saving `last_login` (the
hash is not written at all) and Django's upgrade of the hash when a password check succeeds
under a hasher or work factor no longer preferred. That upgrade is the setter callback that
`AbstractBaseUser.check_password` hands to `django.contrib.auth.hashers.check_password`, called
only once the raw password matched the stored hash; `mark_rehashes` wraps that callback so its
save runs marked with the hash it replaces. Telling it from the hashes alone cannot work: a new
password's hash assigned by code while the old hash was outdated looks the same.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from functools import wraps

from django.contrib.auth import base_user
from django.contrib.auth.base_user import AbstractBaseUser
from django.utils import timezone

from annotate.services.api_tokens import api_token_revoke_for_password_change

# The stored hash whose password Django is rehashing, while its setter runs (else None).
_rehashing: ContextVar[str | None] = ContextVar("annotate_rehashing", default=None)


def _marking_setter(check_password: Callable) -> Callable:
    @wraps(check_password)
    def checked(password, encoded, setter=None, preferred="default"):
        if setter is None:
            return check_password(password, encoded, preferred=preferred)

        def rehash(raw_password) -> None:
            marked = _rehashing.set(encoded)
            try:
                setter(raw_password)
            finally:
                _rehashing.reset(marked)

        return check_password(password, encoded, rehash, preferred=preferred)

    checked.marks_rehashes = True
    return checked


def _marking_async_setter(acheck_password: Callable) -> Callable:
    @wraps(acheck_password)
    async def checked(password, encoded, setter=None, preferred="default"):
        if setter is None:
            return await acheck_password(password, encoded, preferred=preferred)

        async def rehash(raw_password) -> None:
            # asave() runs in a thread with a copy of this context, so the mark goes along.
            marked = _rehashing.set(encoded)
            try:
                await setter(raw_password)
            finally:
                _rehashing.reset(marked)

        return await acheck_password(password, encoded, rehash, preferred=preferred)

    checked.marks_rehashes = True
    return checked


def mark_rehashes() -> None:
    """Make Django's rehash of a checked password run marked (see the module docstring).

    AbstractBaseUser.check_password and acheck_password call the hashers' functions by the
    names `django.contrib.auth.base_user` imports; those names are wrapped. Should a Django
    version stop calling them so, rehashes are no longer marked and revoke the tokens: the safe
    side, and tests/annotate/test_password_changes.py fails on it.
    """
    wrapped: dict[str, Callable[[Callable], Callable]] = {
        "check_password": _marking_setter,
        "acheck_password": _marking_async_setter,
    }
    for name, wrap in wrapped.items():
        current = getattr(base_user, name, None)
        if current is not None and not getattr(current, "marks_rehashes", False):
            setattr(base_user, name, wrap(current))


def is_rehash(*, old_hash: str) -> bool:
    """Whether the save under way is Django's rehash of `old_hash`'s password (same password)."""
    return _rehashing.get() == old_hash


def revoke_api_tokens_on_password_change(
    sender, instance: AbstractBaseUser, raw: bool, update_fields=None, **kwargs
) -> None:
    """pre_save of the user model: revoke the user's API tokens when the password changes.

    Before the save, so the old hash can still be read; inside the admin's transaction both
    commit together, and a save failing outside one leaves the tokens revoked (the safe side)."""
    if raw or instance._state.adding or instance.pk is None:
        return
    if update_fields is not None and "password" not in update_fields:
        return
    old_hash = (
        type(instance)
        ._default_manager.filter(pk=instance.pk)
        .values_list("password", flat=True)
        .first()
    )
    if old_hash is None or old_hash == instance.password or is_rehash(old_hash=old_hash):
        return
    api_token_revoke_for_password_change(user=instance, now=timezone.now())
