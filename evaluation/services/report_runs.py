"""Exports of reports to storage, run in the background and recorded as ReportExport rows."""

from __future__ import annotations

import io

from django.db import transaction
from django.utils import timezone

from annotate.models import Benchmark
from annotate.services.deferred_tasks import task_enqueue_on_commit
from evaluation.errors import ReportError
from evaluation.models import ExportStatus, ReportExport
from evaluation.selectors.report_data import benchmark_arrays
from evaluation.services.report_exports import export_storage, report_export
from evaluation.services.reports import UNKNOWN_MODES, labels_aggregated_csv, report_build


def report_export_request(*, benchmark: Benchmark, unknown: str, user=None) -> ReportExport:
    """Record an export and queue it once the transaction commits."""
    from evaluation.tasks import report_export_task

    if unknown not in UNKNOWN_MODES:
        raise ReportError(f"unknown must be one of {', '.join(UNKNOWN_MODES)}, not {unknown!r}.")
    export = ReportExport.objects.create(benchmark=benchmark, unknown=unknown, created_by=user)
    task_enqueue_on_commit(task=report_export_task, args=(export.pk,))
    return export


def report_export_execute(*, export_id: int) -> ReportExport:
    """Build the report and write every file; safe to run twice (a finished export is kept)."""
    with transaction.atomic():
        export = (
            ReportExport.objects.select_for_update().select_related("benchmark").get(pk=export_id)
        )
        if export.status == ExportStatus.DONE:
            return export
        export.status = ExportStatus.RUNNING
        export.save(update_fields=["status"])
    try:
        # One read of the labels serves the report and the majority labels.
        data = benchmark_arrays(benchmark=export.benchmark)
        report = report_build(benchmark=export.benchmark, unknown=export.unknown, data=data)
        aggregated = io.StringIO()
        labels_aggregated_csv(benchmark=export.benchmark, output=aggregated, data=data)
        storage = export_storage()
        export.files = report_export(
            report=report,
            benchmark=export.benchmark,
            aggregated_labels_csv=aggregated.getvalue(),
            storage=storage,
        )
        export.location = _location(storage)
        export.status = ExportStatus.DONE
        export.message = f"Wrote {len(export.files)} files."
    except Exception as error:  # recorded for the researcher, then raised for the worker's log
        export.status = ExportStatus.FAILED
        export.message = f"{type(error).__name__}: {error}"
        export.finished_at = timezone.now()
        export.save()
        raise
    export.finished_at = timezone.now()
    export.save()
    return export


def _location(storage) -> str:
    bucket = getattr(storage, "bucket_name", None)
    return f"s3://{bucket}" if bucket else str(getattr(storage, "location", ""))


def report_export_list(*, benchmark: Benchmark):
    """Return the benchmark's exports, newest first."""
    return ReportExport.objects.filter(benchmark=benchmark).order_by("-created_at")
