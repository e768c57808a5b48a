"""Repair judge and classifier runs left "Running" after their engine run ended.

Before the engine's reaper told a run's protocol that the run had ended (on_finish), a KIWI
run whose worker died kept the status "Running" for ever, though its engine run was marked
failed. Each such run now takes its engine run's end, as judge_run_on_finish writes it: done,
or failed with the engine run's reason.
"""

from django.db import migrations
from django.db.models import Q
from django.utils import timezone

ENDED = ("done", "failed", "cancelled")


def repair(apps, schema_editor):
    RevisionJudgeRun = apps.get_model("revision_eval", "RevisionJudgeRun")
    stuck = RevisionJudgeRun.objects.filter(
        Q(status="running") | Q(status="pending"), engine_run__status__in=ENDED
    ).select_related("engine_run")
    for run in stuck:
        engine_run = run.engine_run
        done = engine_run.status == "done"
        run.status = "done" if done else "failed"
        run.error = "" if done else (engine_run.error or engine_run.status)
        run.finished_at = engine_run.finished_at or timezone.now()
        run.save(update_fields=["status", "error", "finished_at"])


class Migration(migrations.Migration):
    dependencies = [
        ("revision_eval", "0002_revisionjudgerun_examples"),
        ("engine", "0004_endpoint_ranges"),
    ]

    operations = [migrations.RunPython(repair, migrations.RunPython.noop)]
