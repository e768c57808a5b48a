"""Read what a report is computed from as of one moment, however many queries and connections
it takes.

A report reads its labels, then its costs, kinds and runs, in separate queries: a verdict,
a sync or a kind decided between two of them would count a worker's labels and not their pay
(or the reverse) in the same published table. `read_snapshot` runs the reads in one
transaction that sees one snapshot of the database:

- PostgreSQL: REPEATABLE READ READ ONLY for that transaction alone (the `isolation_level`
  database option would change it for every request). A read on a second connection
  (report_data.read_meanwhile) imports the same snapshot (pg_export_snapshot, SET TRANSACTION
  SNAPSHOT), as pg_dump's parallel jobs do, so it reads the same moment while the server works
  on it beside this thread.
- SQLite: a read transaction in WAL mode (config/settings/base.py) sees the database as of its
  first read until it ends. It begins DEFERRED, not IMMEDIATE as the app's writes do: a read
  taking the write lock would hold every annotator's submit for the report's whole read.

Inside a caller's transaction the reads take part in it (a savepoint): its isolation is the
caller's, which no statement can change once it has read anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from django.db import connection, transaction

T = TypeVar("T")
_SNAPSHOT_SQL = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"


@dataclass
class _Snapshot:
    """The snapshot of a read_snapshot block on PostgreSQL; exported once, when a read on a
    second connection first needs it."""

    exported: str | None = None


_current: ContextVar[_Snapshot | None] = ContextVar("report_read_snapshot", default=None)


@contextmanager
def read_snapshot() -> Iterator[None]:
    """Run the block's reads (reads only) as of one moment (see the module docstring)."""
    if _current.get() is not None:
        # Inside a read_snapshot block already: the same snapshot, and no savepoint, from which
        # PostgreSQL refuses to export it ("cannot export a snapshot from a subtransaction").
        yield
        return
    if connection.in_atomic_block:
        with transaction.atomic():
            yield
        return
    if connection.vendor == "postgresql":
        with transaction.atomic(), _snapshot_shared():
            with connection.cursor() as cursor:
                cursor.execute(_SNAPSHOT_SQL)
            yield
        return
    with _deferred_atomic():
        yield


@contextmanager
def _snapshot_shared() -> Iterator[None]:
    token = _current.set(_Snapshot())
    try:
        yield
    finally:
        _current.reset(token)


@contextmanager
def _deferred_atomic() -> Iterator[None]:
    """transaction.atomic() beginning its transaction DEFERRED on SQLite: it takes no lock
    until it reads, and then only a read lock."""
    connection.ensure_connection()
    mode = connection.transaction_mode
    with ExitStack() as stack:
        connection.transaction_mode = "DEFERRED"
        try:
            stack.enter_context(transaction.atomic())
        finally:
            connection.transaction_mode = mode
        yield


def exported_snapshot() -> str | None:
    """The id of the read_snapshot block's snapshot for a second connection to import (exported
    on the first call), or None outside such a block (or on SQLite, or in a caller's
    transaction)."""
    snapshot = _current.get()
    if snapshot is None:
        return None
    if snapshot.exported is None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_export_snapshot()")
            snapshot.exported = cursor.fetchone()[0]
    return snapshot.exported


def read_in_snapshot(snapshot_id: str, read: Callable[[], T]) -> T:
    """Run `read` on this thread's connection in a transaction that sees the snapshot
    `snapshot_id` (exported_snapshot) of another connection's open transaction."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_SNAPSHOT_SQL)
            cursor.execute("SET TRANSACTION SNAPSHOT %s", [snapshot_id])
        return read()
