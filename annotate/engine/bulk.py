"""Insert many rows of plain values with one statement, skipping Django's per-field work.

bulk_create builds a model instance and prepares every field of every row in Python; in a run
that stores a batch every quarter second from the thread whose GIL the API workers need, that
costs as much CPU as the calls themselves. These rows are database-ready values already.
`INSERT ... RETURNING` and `ON CONFLICT` mean the same on PostgreSQL and SQLite (3.35+), the
databases we run on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.db import connection
from django.db.models import Model


def rows_insert(
    model: type[Model],
    field_names: Sequence[str],
    rows: Sequence[Sequence],
    *,
    on_conflict: str = "",
    returning: bool = False,
    batch_size: int = 500,
    placeholders: Mapping[str, str] | None = None,
) -> list[int]:
    """Insert `rows` (values in `field_names` order); return the new ids when `returning`.

    Ids come back in row order (one multi-row INSERT per batch, as Django's bulk_create relies on).
    `placeholders` gives the SQL of a field's value where plain `%s` will not do (a CAST).
    """
    fields = [model._meta.get_field(name) for name in field_names]
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = ", ".join(quote(field.column) for field in fields)
    marks = [(placeholders or {}).get(name, "%s") for name in field_names]
    one = "(" + ", ".join(marks) + ")"
    conflict = f" ON CONFLICT {on_conflict}" if on_conflict else ""
    suffix = f" RETURNING {quote(model._meta.pk.column)}" if returning else ""
    ids: list[int] = []
    with connection.cursor() as cursor:
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            # Names from model metadata and clauses from our code; the values go as parameters.
            sql = f"INSERT INTO {table} ({columns}) VALUES {', '.join([one] * len(chunk))}"  # noqa: S608
            cursor.execute(sql + conflict + suffix, [value for row in chunk for value in row])
            if returning:
                ids.extend(row[0] for row in cursor.fetchall())
    return ids
