"""Sessions in the database, as Django's own back-end keeps them, read in plain SQL.

Every page reads the visitor's session before anything else. Django's database back-end reads
it through the ORM (a queryset built, compiled and turned into a Session instance on each
request), which cost more of the page's CPU than PostgreSQL spent answering. This back-end
reads the same row with the same rule (the key, and an expiry still in the future) in one
precompiled statement; storing, creating, deleting and clearing stay Django's.

    SESSION_ENGINE = "config.sessions"
"""

from __future__ import annotations

from functools import cache

from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.sessions.backends import db
from django.db import connections, router
from django.db.models import Model
from django.utils import timezone

from annotate.compiled import prepared_cursor
from config.authentication import DJANGO_MODEL_BACKEND, MODEL_BACKEND


class SessionStore(db.SessionStore):
    def load(self) -> dict:
        alias = router.db_for_read(self.model)
        connection = connections[alias]
        with prepared_cursor(connection) as cursor:
            cursor.execute(
                _read_sql(self.model, alias),
                [self.session_key, connection.ops.adapt_datetimefield_value(timezone.now())],
            )
            row = cursor.fetchone()
        if row is None:
            # As Django's: an unknown or expired key is forgotten, and a new one made on save.
            self._session_key = None
            return {}
        data = self.decode(row[0])
        if data.get(BACKEND_SESSION_KEY) == DJANGO_MODEL_BACKEND:
            # Logged in before config.authentication's back-end took Django's place: the same
            # users and passwords, so the session stays valid (rewritten when next saved).
            data[BACKEND_SESSION_KEY] = MODEL_BACKEND
        return data


@cache
def _read_sql(model: type[Model], alias: str) -> str:
    quote = connections[alias].ops.quote_name
    data, key, expiry = (
        quote(model._meta.get_field(name).column)
        for name in ("session_data", "session_key", "expire_date")
    )
    table = quote(model._meta.db_table)
    return f"SELECT {data} FROM {table} WHERE {key} = %s AND {expiry} > %s"  # noqa: S608
