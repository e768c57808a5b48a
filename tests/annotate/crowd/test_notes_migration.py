"""Notes stored before the page and the API counted the HITs missing when shown lose their
stale count (migration 0018), so a publication never shows two counts that disagree."""

from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotate.crowd.models import Publication
from tests.factories import BatchFactory

BEFORE = [("crowd", "0017_publication_expiry_run_account_balance")]
STALLED = (
    "The publish stopped after 1 of 3 HITs: its worker gave no sign of life since 2026-11-28 "
    "19:53 UTC (more than 600 s). The HITs made are live; Resume makes the 2 missing, none twice."
)
UNEXPECTED = (
    "The publish stopped on an unexpected error (RuntimeError: database went away). The HITs "
    "made are kept; Resume makes the missing ones, none twice."
)
# (status, the note as written before, what it says now)
NOTES = [
    (
        "stalled",
        STALLED,
        "The publish stopped: its worker gave no sign of life since 2026-11-28 19:53 UTC (more "
        "than 600 s). The HITs made are live.",
    ),
    ("stalled", UNEXPECTED, UNEXPECTED.replace("; Resume makes the missing ones, none twice", "")),
    (
        "partial",
        "Expired by an admin with 1 HIT not made; Resume makes it.",
        "Expired by an admin.",
    ),
    (
        "partial",
        "Expired by an admin with 3 HITs not made; Resume makes them.",
        "Expired by an admin.",
    ),
    (
        "partial",
        "1 of 3 HITs were not created; see each HIT.",
        "The platform did not create every HIT; see each HIT.",
    ),
    (
        "partial",
        "MTurk create_hit_with_hit_type: Rate exceeded (1 HITs were refused: Resume makes the 2 missing).",
        "MTurk create_hit_with_hit_type: Rate exceeded (the platform refused HITs).",
    ),
    (
        "partial",
        "MTurk create_hit_with_hit_type: Rate exceeded (no retry follows: Resume makes the 3 missing).",
        "MTurk create_hit_with_hit_type: Rate exceeded (no retry follows).",
    ),
    # Not a note with a count: kept as written.
    (
        "pending",
        "MTurk create_hit_with_hit_type: Rate exceeded (the publish retries by itself).",
        None,
    ),
    ("failed", "MTurk create_hit_type: the reward is too low", None),
]


@pytest.mark.django_db(transaction=True)
def test_the_migration_drops_the_stale_counts_of_stored_notes_and_keeps_their_cause():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    OldPublication = executor.loader.project_state(BEFORE).apps.get_model("crowd", "Publication")
    stored = {}
    for token, (status, note, _) in enumerate(NOTES):
        stored[note] = OldPublication.objects.create(
            batch_id=BatchFactory().pk, platform="mturk", title="t", description="d",
            reward_usd=Decimal("1"), fee_rate=Decimal("0.2"), assignments_per_task=3,
            assignment_duration_seconds=60, auto_approval_delay_seconds=60, lifetime_seconds=60,
            task_base_url="https://x.org", link_token=f"tok{token}", status=status, error=note,
        ).pk  # fmt: skip
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    for _, note, now in NOTES:
        assert Publication.objects.get(pk=stored[note]).error == (now or note)
