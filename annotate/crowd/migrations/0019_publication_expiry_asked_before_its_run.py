"""An Expire pressed before its run's times were stored (migration 0017) whose run had not
ended: its HITs marked to be ended (expiry_pending_since), no outcome, and no time it was asked.
Its `expire_publication` task, still queued, took no run that was never asked and asked the
platform nothing. Dated by its HITs' marks, the run is waiting: the task runs it."""

from django.db import migrations
from django.db.models import Max, OuterRef, Subquery


def unfinished_expiries_dated(apps, schema_editor):
    Publication = apps.get_model("crowd", "Publication")
    Hit = apps.get_model("crowd", "Hit")
    asked = (
        Hit.objects.filter(publication=OuterRef("pk"), expiry_pending_since__isnull=False)
        .values("publication")
        .annotate(at=Max("expiry_pending_since"))
        .values("at")
    )
    Publication.objects.filter(
        expiry_asked_at__isnull=True,
        expiry_outcome="",
        hits__expiry_pending_since__isnull=False,
    ).distinct().update(expiry_asked_at=Subquery(asked))


class Migration(migrations.Migration):

    dependencies = [
        ("crowd", "0018_publication_notes_without_counts"),
    ]

    operations = [
        migrations.RunPython(unfinished_expiries_dated, migrations.RunPython.noop),
    ]
