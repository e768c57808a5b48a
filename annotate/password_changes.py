"""A password change revokes the user's API tokens, whichever way the password was changed.

Every way in (the admin's password forms, `manage.py changepassword`, a password reset, any code
calling `set_password()` or `set_unusable_password()` and saving) ends in a save of the user
row with a new hash, so one receiver of the user model's pre_save sees them all (connected in
AnnotateConfig.ready; a signal from Django's auth, whose writes call no service of ours).

Two saves write a new hash without a new password and keep the tokens: a login saving
`last_login` (the hash is not written at all) and Django's upgrade of the hash on a successful
login when the preferred hasher or its work factor changed (`AbstractBaseUser.check_password`
rehashes the same password; `is_password_change` tells it apart).
"""

from __future__ import annotations

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.hashers import get_hasher, identify_hasher, is_password_usable
from django.utils import timezone

from annotate.services.api_tokens import api_token_revoke_for_password_change


def is_password_change(*, old_hash: str, new_hash: str, raw_password_set: bool) -> bool:
    """Whether replacing `old_hash` by `new_hash` changes the password (not a rehash on login).

    `raw_password_set`: set_password() was called on the instance saved. Django's rehash calls
    it too and then clears the raw password, so it looks like a hash assigned directly; it is a
    rehash only when the new hash is the preferred hasher's and the old one needed upgrading
    (the condition of `django.contrib.auth.hashers.verify_password`). Anything else, an unusable
    password included, counts as a change."""
    if old_hash == new_hash:
        return False
    if raw_password_set or not is_password_usable(old_hash) or not is_password_usable(new_hash):
        return True
    preferred = get_hasher()
    try:
        old_hasher, new_hasher = identify_hasher(old_hash), identify_hasher(new_hash)
    except ValueError:  # a hasher no longer installed cannot have been upgraded from
        return True
    old_needed_upgrade = old_hasher.algorithm != preferred.algorithm or preferred.must_update(
        old_hash
    )
    return not (new_hasher.algorithm == preferred.algorithm and old_needed_upgrade)


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
    if old_hash is None:
        return
    # Django keeps the raw password of set_password() in _password until the save, to tell
    # password validators it changed; its rehash on login clears it before saving.
    raw_password_set = getattr(instance, "_password", None) is not None
    if is_password_change(
        old_hash=old_hash, new_hash=instance.password, raw_password_set=raw_password_set
    ):
        api_token_revoke_for_password_change(user=instance, now=timezone.now())
