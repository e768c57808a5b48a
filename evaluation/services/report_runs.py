"""Exports of reports to storage, run in the background and recorded as ReportExport rows."""

from __future__ import annotations

import io

from django.conf import settings
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from annotate.models import Benchmark
from annotate.roles import is_admin
from annotate.selectors.identities import identity_scope
from annotate.services.background import background_start
from annotate.services.leases import (
    LeaseHeldError,
    lease_beating,
    lease_held_retry_in,
    lease_silent,
    lease_take,
)
from evaluation.conventions import ACC_MODES, DEFAULT_ACC, UNKNOWN_MODES
from evaluation.errors import ReportError, ReportExportError
from evaluation.models import ExportStatus, ReportExport
from evaluation.services.report_exports import export_storage, report_export
from evaluation.services.reports import labels_aggregated_csv, report_build, report_inputs


def report_export_request(
    *, benchmark: Benchmark, unknown: str, acc_unknown: str = DEFAULT_ACC, user=None
) -> ReportExport:
    """Record an export and queue it once the transaction commits."""
    from evaluation.tasks import report_export_task

    if unknown not in UNKNOWN_MODES:
        raise ReportError(f"unknown must be one of {', '.join(UNKNOWN_MODES)}, not {unknown!r}.")
    if acc_unknown not in ACC_MODES:
        raise ReportError(f"acc must be one of {', '.join(ACC_MODES)}, not {acc_unknown!r}.")
    export = ReportExport.objects.create(
        benchmark=benchmark, unknown=unknown, acc_unknown=acc_unknown, created_by=user
    )
    background_start(task=report_export_task, args=(export.pk,))
    return export


def report_export_execute(*, export_id: int) -> ReportExport:
    """Build the report and write every file. Safe to run twice, even at once: a finished
    export is kept, and only the delivery holding the export's lease writes; another while it
    beats raises LeaseHeldError (nothing written) to look again once that lease could be
    stale. A delivery whose worker died is taken over after REPORT_EXPORT_STALE_SECONDS, silent
    by the database's clock, which its heartbeat is written by (not this worker's)."""
    stale_seconds = settings.REPORT_EXPORT_STALE_SECONDS
    job = ReportExport.objects.filter(pk=export_id)
    token = lease_take(
        job=job,
        claimable=Q(status__in=[ExportStatus.QUEUED, ExportStatus.FAILED])
        | (
            Q(status=ExportStatus.RUNNING)
            & (Q(heartbeat_at__isnull=True) | lease_silent(stale_seconds=stale_seconds))
        ),
        now=Now(),
        status=ExportStatus.RUNNING,
    )
    export = ReportExport.objects.select_related("benchmark", "created_by").get(pk=export_id)
    if token is None and export.status == ExportStatus.DONE:
        return export
    if token is None:
        retry_in = lease_held_retry_in(job=job, stale_seconds=stale_seconds)
        raise LeaseHeldError(f"Export {export.pk}", retry_in=retry_in)
    running = ReportExport.objects.filter(pk=export.pk, status=ExportStatus.RUNNING)
    every = settings.REPORT_EXPORT_STALE_SECONDS / 20
    try:
        with lease_beating(job=running, token=token, every=every):
            _export_write(export)
    except Exception as error:  # recorded for the researcher, then raised for the worker's log
        export.status = ExportStatus.FAILED
        export.message = f"{type(error).__name__}: {error}"
        _export_end(export, token)
        raise
    _export_end(export, token)
    return export


def _export_write(export: ReportExport) -> None:
    # One read of the labels (and costs, of the same moment) serves the report and the
    # majority labels.
    inputs = report_inputs(benchmark=export.benchmark)
    # Every file names crowd workers as the researcher who asked may see them.
    scope = identity_scope(user=export.created_by)
    report = report_build(
        benchmark=export.benchmark,
        unknown=export.unknown,
        acc_unknown=export.acc_unknown,
        inputs=inputs,
        scope=scope,
    )
    aggregated = io.StringIO()
    labels_aggregated_csv(benchmark=export.benchmark, output=aggregated, data=inputs.data)
    storage = export_storage()

    def progress(done: int, total: int) -> None:
        # One step more than the export's: the report built before them.
        export.steps_done, export.steps_total = done + 1, total + 1
        _progress(export.pk, export.steps_done, export.steps_total)

    export.files = report_export(
        report=report,
        benchmark=export.benchmark,
        aggregated_labels_csv=aggregated.getvalue(),
        storage=storage,
        with_archive=True,
        progress=progress,
        scope=scope,
    )
    export.archive = export.files[-1]
    export.location = _location(storage)
    export.status = ExportStatus.DONE
    export.message = f"Wrote {len(export.files) - 1} files, and a zip of them all."


def _export_end(export: ReportExport, token: str) -> None:
    """Store the export's end while the lease is this delivery's: one that took a silent
    export over writes its own."""
    export.finished_at = timezone.now()
    ReportExport.objects.filter(pk=export.pk, lease=token).update(
        status=export.status,
        message=export.message,
        files=export.files,
        archive=export.archive,
        location=export.location,
        finished_at=export.finished_at,
    )


def _progress(export_id: int, done: int, total: int) -> None:
    ReportExport.objects.filter(pk=export_id).update(steps_done=done, steps_total=total)


def report_export_progress(*, export: ReportExport) -> dict:
    """Return what the page shows of an export while it runs and once it is done."""
    return {
        "id": export.pk,
        "status": export.status,
        "status_display": export.get_status_display(),
        "steps_done": export.steps_done,
        "steps_total": export.steps_total,
        "steps_display": export.progress_display(),
        "message": export.message,
        "downloadable": export.status == ExportStatus.DONE and bool(export.archive),
    }


def report_export_open(*, export: ReportExport):
    """Open the export's zip in the storage it was written to (S3 or the export folder)."""
    if export.status != ExportStatus.DONE or not export.archive:
        raise ReportExportError("This export has no zip yet: it is still running, or it failed.")
    return export_storage().open(export.archive, "rb")


def _location(storage) -> str:
    bucket = getattr(storage, "bucket_name", None)
    return f"s3://{bucket}" if bucket else str(getattr(storage, "location", ""))


def report_export_list(*, benchmark: Benchmark, user):
    """Return the benchmark's exports `user` may open, newest first: their own, or every one
    for an admin. An export's raw labels name crowd workers as its requester may see them
    (identity_scope), so another researcher's could show worker ids hidden from this one; one
    whose requester was deleted may have been an admin's, and stays the admins'."""
    exports = ReportExport.objects.filter(benchmark=benchmark)
    if not is_admin(user):
        exports = exports.filter(created_by=user)
    return exports.order_by("-created_at")
