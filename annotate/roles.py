"""The three roles, as Django groups created by a data migration."""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

ADMIN = "admin"
RESEARCHER = "researcher"
ANNOTATOR = "annotator"
ROLES = (ADMIN, RESEARCHER, ANNOTATOR)


def has_role(user: AbstractBaseUser | AnonymousUser, *roles: str) -> bool:
    """Return True if the user is active and in one of the groups (superusers count as admin)."""
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser and ADMIN in roles:
        return True
    return any(name in roles for name in user.groups.values_list("name", flat=True))


def is_admin(user) -> bool:
    return has_role(user, ADMIN)


def is_researcher(user) -> bool:
    """Researchers and admins may read every project's data."""
    return has_role(user, ADMIN, RESEARCHER)


RESEARCHERS_ONLY = "This page is for researchers and admins."
ADMINS_ONLY = "This page is for admins."
ANNOTATORS_ONLY = "This page is for annotators: it lists their own tasks."


def require_role(user, *roles: str, message: str) -> None:
    """Raise PermissionDenied (the 403 page, config.error_views) unless the user has a role."""
    from django.core.exceptions import PermissionDenied

    if not has_role(user, *roles):
        raise PermissionDenied(message)
