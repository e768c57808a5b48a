"""The report's one-moment read (evaluation.selectors.snapshot), as a report's reader threads
use it on PostgreSQL."""

import pytest
from django.db import connection

from evaluation.selectors.snapshot import exported_snapshot, read_in_snapshot, read_snapshot
from tests.threads import in_thread

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="snapshots are exported on PostgreSQL only"
    ),
]


def _isolation() -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SHOW transaction_isolation")
        level = cursor.fetchone()[0]
        cursor.execute("SHOW transaction_read_only")
        return level, cursor.fetchone()[0]


def test_a_nested_block_shares_the_outer_snapshot_with_a_second_connection():
    """A read_snapshot inside another (a report read within a larger read) gave a reader thread
    nothing: the inner block's savepoint made PostgreSQL refuse to export the snapshot."""
    with read_snapshot(), read_snapshot():
        snapshot_id = exported_snapshot()
        outcomes: list = []
        in_thread(lambda: read_in_snapshot(snapshot_id, _isolation), outcomes).join()
        assert _isolation() == ("repeatable read", "on")
    assert outcomes == [("repeatable read", "on")]
    assert _isolation() == ("read committed", "off")  # the next transaction is the app's own
