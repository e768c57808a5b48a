"""Imports started from the upload page: stored, then run by a worker (or in-process)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from annotate.errors import AnnotateError, FieldInputError
from annotate.models import ImportJob, ImportKind, ImportStatus
from annotate.services.background import background_start
from annotate.services.files import upload_size_problem
from annotate.services.imports import ImportSummary, instructions_import, responses_import
from annotate.services.label_imports import labels_import, scores_import
from annotate.services.leases import lease_beating, lease_silent, lease_take

logger = logging.getLogger(__name__)


class UploadError(FieldInputError):
    """The upload form was filled in wrongly; nothing was stored. `field` names the form's
    field at fault (the API answers it)."""


def import_upload_check(
    *, kind: str, benchmark_name: str, system_name: str, annotator_name: str, upload: UploadedFile
) -> None:
    """Refuse an upload the import could not take (UploadError), before anything is stored:
    the upload page's and the API's check, whether the file is imported now or queued."""
    if kind not in ImportKind.values:
        raise UploadError(f"Unknown import kind {kind!r}.", field="kind")
    if not benchmark_name.strip():
        raise UploadError("Name the benchmark.", field="benchmark_name")
    if kind == ImportKind.RESPONSES and not system_name.strip():
        raise UploadError("Responses belong to a system: name it.", field="system_name")
    if kind == ImportKind.LABELS and not is_csv_upload(upload) and not system_name.strip():
        raise UploadError(JSONL_LABELS_NEED, field="system_name")
    if kind == ImportKind.LABELS and not is_csv_upload(upload) and not annotator_name.strip():
        raise UploadError(JSONL_LABELS_NEED, field="annotator_name")
    if too_large := upload_size_problem(upload.size):
        raise UploadError(too_large, field="upload")
    if upload.size == 0:
        raise UploadError(f"{upload.name}: the file is empty. Nothing was written.", field="upload")


JSONL_LABELS_NEED = (
    "Evaluation JSON Lines need the system and the annotator (a CSV names them per row)."
)


def is_csv_upload(upload: UploadedFile) -> bool:
    """Whether the labels import reads the upload as CSV (it goes by the name's suffix)."""
    return upload.name.lower().endswith(".csv")


@transaction.atomic
def import_job_create(
    *,
    kind: str,
    benchmark_name: str,
    upload: UploadedFile,
    user,
    system_name: str = "",
    annotator_name: str = "",
    annotator_kind: str = "",
) -> ImportJob:
    """Store the upload and queue its import; the worker starts once this transaction commits."""
    from annotate.tasks import import_job_run_task

    import_upload_check(
        kind=kind,
        benchmark_name=benchmark_name,
        system_name=system_name,
        annotator_name=annotator_name,
        upload=upload,
    )
    job = ImportJob.objects.create(
        kind=kind,
        benchmark_name=benchmark_name.strip(),
        system_name=system_name.strip(),
        annotator_name=annotator_name.strip(),
        annotator_kind=annotator_kind,
        upload=upload,
        original_name=upload.name[:255],
        created_by=user,
    )
    background_start(task=import_job_run_task, args=(job.pk,))
    return job


def import_job_run(*, job_id: int) -> ImportJob:
    """Run a queued import. Safe to run twice, even at once: only the delivery that claims the
    job imports (`_import_job_claim`); a finished job, or one another delivery runs and beats
    for, is left alone. Whatever happens, the job ends done or failed with a message; a worker
    that dies meanwhile stops the heartbeat, and the job is failed (import_jobs_fail_stale) or
    taken over by its redelivery."""
    token = _import_job_claim(job_id=job_id)
    job = ImportJob.objects.get(pk=job_id)
    if token is None:
        return job
    path = job.upload.path
    running = ImportJob.objects.filter(pk=job.pk, status=ImportStatus.RUNNING)
    try:
        with lease_beating(job=running, token=token, every=settings.IMPORT_HEARTBEAT_SECONDS):
            summary = import_file(
                kind=job.kind,
                path=path,
                benchmark_name=job.benchmark_name,
                system_name=job.system_name,
                annotator_name=job.annotator_name,
                annotator_kind=job.annotator_kind,
            )
    except AnnotateError as error:
        job.status, job.message = ImportStatus.FAILED, str(error).replace(path, job.original_name)
        job.message += "\nNothing was written."
    except Exception as error:  # a bug or an outage: the job must not stay "running"
        logger.exception("Import job %s stopped on an unexpected error", job.pk)
        job.status = ImportStatus.FAILED
        job.message = (
            f"{job.original_name}: the import stopped on an unexpected error "
            f"({type(error).__name__}: {str(error).replace(path, job.original_name)[:500]})."
            "\nNothing was written."
        )
    else:
        job.status, job.rows, job.created = ImportStatus.DONE, summary.rows, summary.created
        job.message = summary.message.replace(path, job.original_name)
    job.finished_at = timezone.now()
    # Only while the claim is ours: a delivery that took a silent job over writes its own end.
    ImportJob.objects.filter(pk=job.pk, lease=token).update(
        status=job.status,
        message=job.message,
        rows=job.rows,
        created=job.created,
        finished_at=job.finished_at,
    )
    job.refresh_from_db()
    return job


def _import_job_claim(*, job_id: int) -> str | None:
    """Claim the job for this delivery: its token, or None when it is finished or another
    delivery runs it and beats. One conditional UPDATE, so of two deliveries at once only one
    imports; a running job silent for IMPORT_STALE_SECONDS (its worker died) is taken over,
    silent by the database's clock, which its heartbeat is written by (not this worker's)."""
    claimable = Q(status=ImportStatus.QUEUED) | (Q(status=ImportStatus.RUNNING) & _silent())
    job = ImportJob.objects.filter(pk=job_id)
    return lease_take(job=job, claimable=claimable, now=Now(), status=ImportStatus.RUNNING)


def import_jobs_fail_stale(*, now: datetime) -> int:
    """Mark running imports whose worker stopped beating as failed; return how many.

    A worker killed mid-import (SIGKILL, out of memory, a lost machine) rolls its transaction
    back and leaves the job "running"; after IMPORT_STALE_SECONDS without a heartbeat it is
    failed. Safe to run twice and concurrently: only running, silent jobs are touched. Silent
    by the database's clock, which the heartbeat is written by (not this process's, which may
    run ahead of the worker's); `now` is the failure's time.
    """
    return ImportJob.objects.filter(_silent(), status=ImportStatus.RUNNING).update(
        status=ImportStatus.FAILED,
        finished_at=now,
        message=(
            "The worker running this import stopped (no heartbeat for "
            f"{settings.IMPORT_STALE_SECONDS} s). Nothing was written: upload the file again."
        ),
    )


def _silent() -> Q:
    """Jobs without a heartbeat for IMPORT_STALE_SECONDS (by the database's clock): their
    worker is gone."""
    return lease_silent(stale_seconds=settings.IMPORT_STALE_SECONDS, since_field="created_at")


def import_file(
    *,
    kind: str,
    path: str,
    benchmark_name: str,
    system_name: str = "",
    annotator_name: str = "",
    annotator_kind: str = "",
) -> ImportSummary:
    """Import the file at `path` as `kind` says: the import a queued job runs, and the one the
    API runs at once for a small file. Raises the importer's error; nothing is then written."""
    if kind == ImportKind.INSTRUCTIONS:
        return instructions_import(path=path, benchmark_name=benchmark_name)
    if kind == ImportKind.RESPONSES:
        return responses_import(path=path, benchmark_name=benchmark_name, system_name=system_name)
    if kind == ImportKind.LABELS:
        return labels_import(
            path=path,
            benchmark_name=benchmark_name,
            system_name=system_name,
            annotator_name=annotator_name,
            kind=annotator_kind,
        )
    return scores_import(path=path, benchmark_name=benchmark_name, kind=annotator_kind)
