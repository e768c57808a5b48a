"""The three roles, as Django groups created by a data migration."""

from functools import cache

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection

from annotate.compiled import prepared_cursor

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
    return any(name in roles for name in group_names(user))


def group_names(user: AbstractBaseUser) -> list[str]:
    """Return the names of the user's groups (its roles and any other group), in one query.

    Plain SQL: the ORM's many-to-many read of the same rows cost five times the CPU, and every
    page runs it once for the navigation.
    """
    if user.pk is None:
        return []
    with prepared_cursor(connection) as cursor:
        cursor.execute(_group_names_sql(user._meta.model), [user.pk])
        return [name for (name,) in cursor.fetchall()]


@cache
def _group_names_sql(user_model: type) -> str:
    through = user_model.groups.through._meta
    group = user_model.groups.field.related_model._meta
    return (
        f"SELECT g.name FROM {group.db_table} g JOIN {through.db_table} ug "  # noqa: S608
        f"ON ug.{through.get_field('group').column} = g.id "
        f"WHERE ug.{through.get_field('user').column} = %s"
    )


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
