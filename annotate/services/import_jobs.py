"""Imports started from the upload page: stored, then run by a worker (or in-process)."""

from __future__ import annotations

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from annotate.errors import AnnotateError
from annotate.models import ImportJob, ImportKind, ImportStatus
from annotate.services.deferred_tasks import task_enqueue_on_commit
from annotate.services.imports import instructions_import, responses_import
from annotate.services.label_imports import labels_import, scores_import


class UploadError(AnnotateError):
    """The upload form was filled in wrongly; nothing was stored."""


def _check(
    kind: str, benchmark_name: str, system_name: str, annotator_name: str, upload: UploadedFile
) -> None:
    if kind not in ImportKind.values:
        raise UploadError(f"Unknown import kind {kind!r}.")
    if not benchmark_name.strip():
        raise UploadError("Name the benchmark.")
    if kind == ImportKind.RESPONSES and not system_name.strip():
        raise UploadError("Responses belong to a system: name it.")
    is_csv = upload.name.lower().endswith(".csv")
    if (
        kind == ImportKind.LABELS
        and not is_csv
        and not (system_name.strip() and annotator_name.strip())
    ):
        raise UploadError(
            "Evaluation JSON Lines need the system and the annotator (a CSV names them per row)."
        )
    if upload.size > settings.IMPORT_MAX_UPLOAD_BYTES:
        raise UploadError(f"The file is larger than {settings.IMPORT_MAX_UPLOAD_BYTES:,} bytes.")
    if upload.size == 0:
        raise UploadError("The file is empty.")


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

    _check(kind, benchmark_name, system_name, annotator_name, upload)
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
    task_enqueue_on_commit(task=import_job_run_task, args=(job.pk,))
    return job


def import_job_run(*, job_id: int) -> ImportJob:
    """Run a queued import. Safe to run twice: a finished job is left alone, and the import
    itself adds nothing that is already stored."""
    job = ImportJob.objects.get(pk=job_id)
    if job.status in (ImportStatus.DONE, ImportStatus.FAILED):
        return job
    ImportJob.objects.filter(pk=job.pk).update(status=ImportStatus.RUNNING)
    path = job.upload.path
    try:
        summary = _run(job, path)
    except AnnotateError as error:
        job.status, job.message = ImportStatus.FAILED, str(error).replace(path, job.original_name)
        job.message += "\nNothing was written."
    else:
        job.status, job.rows, job.created = ImportStatus.DONE, summary.rows, summary.created
        job.message = summary.message.replace(path, job.original_name)
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "message", "rows", "created", "finished_at"])
    return job


def _run(job: ImportJob, path: str):
    if job.kind == ImportKind.INSTRUCTIONS:
        return instructions_import(path=path, benchmark_name=job.benchmark_name)
    if job.kind == ImportKind.RESPONSES:
        return responses_import(
            path=path, benchmark_name=job.benchmark_name, system_name=job.system_name
        )
    if job.kind == ImportKind.LABELS:
        return labels_import(
            path=path,
            benchmark_name=job.benchmark_name,
            system_name=job.system_name,
            annotator_name=job.annotator_name,
            kind=job.annotator_kind,
        )
    return scores_import(path=path, benchmark_name=job.benchmark_name, kind=job.annotator_kind)
