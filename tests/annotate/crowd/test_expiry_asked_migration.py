"""An Expire pressed before its run's times were stored, whose run had not ended when the
deploy came (migration 0019): dated by its HITs' marks, so its `expire_publication` task still
queued runs it instead of finding nothing asked and asking the platform nothing."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotate.crowd.models import Publication
from annotate.crowd.services.expiry import ExpiryRunState, expiry_claimable_q, expiry_run_read
from tests.factories import BatchFactory, TaskFactory

BEFORE = [("crowd", "0018_publication_notes_without_counts")]
PRESSED = datetime(2026, 11, 28, 19, 0, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_an_expire_whose_run_had_not_ended_is_dated_so_its_queued_task_runs_it():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    OldPublication, OldHit = apps.get_model("crowd", "Publication"), apps.get_model("crowd", "Hit")

    def publication(token, **fields):
        return OldPublication.objects.create(
            batch_id=BatchFactory().pk, platform="mturk", title="t", description="d",
            reward_usd=Decimal("1"), fee_rate=Decimal("0.2"), assignments_per_task=3,
            assignment_duration_seconds=60, auto_approval_delay_seconds=60, lifetime_seconds=60,
            task_base_url="https://x.org", link_token=token, status="published", **fields,
        )  # fmt: skip

    def hit(of, token, pending_since=None):
        OldHit.objects.create(
            publication=of, task_id=TaskFactory().pk, unique_request_token=token, max_assignments=3, hit_id=token,
            status="created", expiry_pending_since=pending_since,
        )  # fmt: skip

    unfinished = publication("unfinished", expired_at=PRESSED)
    hit(unfinished, "u1", PRESSED)
    hit(unfinished, "u2", PRESSED)
    hit(unfinished, "u3")  # ended already: confirmed by the platform
    never = publication("never")
    hit(never, "n1")
    ended = publication(
        "ended", expiry_outcome="All 1 HIT expired.", expiry_asked_at=PRESSED,
        expiry_started_at=PRESSED, expiry_finished_at=PRESSED,
    )  # fmt: skip
    hit(ended, "e1", PRESSED)  # the platform did not confirm it: the beat asks again

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert Publication.objects.get(pk=unfinished.pk).expiry_asked_at == PRESSED
    assert expiry_run_read(unfinished.pk).state != ExpiryRunState.NONE
    claimable = set(Publication.objects.filter(expiry_claimable_q()).values_list("pk", flat=True))
    assert claimable == {unfinished.pk}  # its task's run takes it; the others have none to run
    assert Publication.objects.get(pk=never.pk).expiry_asked_at is None
    assert expiry_run_read(ended.pk).state == ExpiryRunState.FINISHED
