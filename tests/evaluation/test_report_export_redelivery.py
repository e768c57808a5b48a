"""A report export's task delivered twice (Redis hands a task still running after the visibility
timeout to a second worker): only the delivery holding the export's lease writes files; the
other writes nothing and looks again later, taking over only from a worker that died."""

import threading
from datetime import timedelta

import pytest
from celery.exceptions import Retry
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from annotate.services.leases import LeaseHeldError
from evaluation.models import ExportStatus, ReportExport
from evaluation.services import report_exports, report_runs
from evaluation.services.report_runs import report_export_execute
from evaluation.tasks import report_export_task
from tests.clocks import clock_off_by
from tests.factories import LabelFactory
from tests.threads import in_thread


@pytest.fixture
def export(settings, tmp_path, monkeypatch):
    settings.EXPORT_S3_BUCKET, settings.EXPORT_DIR = "", tmp_path
    settings.REPORT_EXPORT_STALE_SECONDS = 600
    monkeypatch.setattr(  # storage is the point here, not pictures (rendering is slow)
        report_exports, "render_figure", lambda report, name, fmt: f"{name}.{fmt}".encode()
    )
    label = LabelFactory()
    return ReportExport.objects.create(benchmark=label.question.instruction.benchmark)


def folders(tmp_path) -> list:
    return sorted(path for path in tmp_path.glob("reports/*/*") if path.is_dir())


@pytest.mark.django_db(transaction=True)
def test_two_deliveries_of_one_export_at_once_write_its_files_once(export, tmp_path, monkeypatch):
    real_write, calls = report_runs.report_export, []
    writing, finish = threading.Event(), threading.Event()

    def held_open(**arguments):
        calls.append(1)
        if len(calls) == 1:  # the first delivery is writing when the second arrives
            writing.set()
            finish.wait(30)
        return real_write(**arguments)

    monkeypatch.setattr(report_runs, "report_export", held_open)
    outcomes = []
    thread = in_thread(lambda: report_export_execute(export_id=export.pk), outcomes)
    assert writing.wait(30)
    with pytest.raises(LeaseHeldError) as second:
        report_export_execute(export_id=export.pk)
    finish.set()
    thread.join(30)

    assert 590 <= second.value.retry_in <= 601  # once the first's lease could be stale
    assert len(calls) == 1 and len(folders(tmp_path)) == 1
    export.refresh_from_db()
    assert export.status == ExportStatus.DONE, export.message
    assert outcomes[0].files == export.files
    # Its next look finds the export done and writes nothing more.
    assert report_export_execute(export_id=export.pk).status == ExportStatus.DONE
    assert len(calls) == 1


@pytest.mark.django_db
def test_the_task_of_a_busy_export_retries_without_writing(export, tmp_path):
    beating = timezone.now() - timedelta(seconds=30)
    ReportExport.objects.filter(pk=export.pk).update(
        status=ExportStatus.RUNNING, heartbeat_at=beating, lease="theirs"
    )
    with pytest.raises(Retry) as retry:  # Celery sends it again in 571 s
        report_export_task.apply(args=(export.pk,))
    assert 560 <= retry.value.when <= 572
    export.refresh_from_db()
    assert (export.status, export.lease, export.files) == (ExportStatus.RUNNING, "theirs", [])
    assert folders(tmp_path) == []


@pytest.mark.django_db
def test_an_export_whose_worker_died_is_written_by_the_next_delivery(export, tmp_path):
    silent = timezone.now() - timedelta(seconds=601)
    ReportExport.objects.filter(pk=export.pk).update(
        status=ExportStatus.RUNNING, heartbeat_at=silent, lease="dead"
    )
    done = report_export_execute(export_id=export.pk)
    assert done.status == ExportStatus.DONE, done.message
    assert done.lease != "dead" and len(folders(tmp_path)) == 1


@pytest.mark.django_db
def test_the_admin_shows_the_lease_and_heartbeat_without_letting_them_be_edited(
    export, client, admin_user
):
    ReportExport.objects.filter(pk=export.pk).update(lease="a-delivery")
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    page = client.get(reverse("admin:evaluation_reportexport_change", args=[export.pk])).text
    assert "a-delivery" in page
    assert 'name="lease"' not in page and 'name="heartbeat_at' not in page


@pytest.mark.django_db
@pytest.mark.parametrize("skewed", ["holder", "taker"])
def test_an_export_being_written_is_not_taken_over_whatever_the_workers_clocks_say(
    export, settings, monkeypatch, skewed
):
    # Two workers whose clocks differ by two minutes, more than the stale threshold: the
    # lease's age is the database's clock, so the second delivery, arriving while the first
    # writes, neither sees the holder's slow clock nor reads by its own fast one a stale lease.
    settings.REPORT_EXPORT_STALE_SECONDS = 60
    real_now, second = timezone.now, []

    def second_arrives(running):
        with monkeypatch.context() as clock:
            clock.setattr(timezone, "now", real_now)
            if skewed == "taker":
                clock_off_by(clock, +120)
            with pytest.raises(LeaseHeldError) as held:
                report_export_execute(export_id=export.pk)
        second.append(held.value)

    monkeypatch.setattr(report_runs, "_export_write", second_arrives)
    with monkeypatch.context() as clock:
        if skewed == "holder":
            clock_off_by(clock, -120)
        first = report_export_execute(export_id=export.pk)
    assert 59 < second[0].retry_in <= 61  # the lease is fresh: stale in a minute
    assert first.lease and ReportExport.objects.get(pk=export.pk).lease == first.lease


@pytest.mark.django_db
def test_a_silent_export_is_taken_over_whatever_the_takers_clock_says(
    export, settings, monkeypatch, tmp_path
):
    settings.REPORT_EXPORT_STALE_SECONDS = 60
    ReportExport.objects.filter(pk=export.pk).update(
        status=ExportStatus.RUNNING, heartbeat_at=Now() - timedelta(seconds=61), lease="dead"
    )
    clock_off_by(monkeypatch, -120)  # by its own clock the last beat is a minute ahead
    done = report_export_execute(export_id=export.pk)
    assert done.status == ExportStatus.DONE, done.message
    assert done.lease != "dead" and len(folders(tmp_path)) == 1
