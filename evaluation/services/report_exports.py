"""Write a report's files (tables, LaTeX, Markdown, figures, labels) to S3 or a local folder.

Every file is built in memory first and only then stored, so an error in a table or a figure
leaves nothing behind; a storage that fails half-way has what it took removed again.
"""

from __future__ import annotations

import io
import logging
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage
from django.utils import timezone
from django.utils.text import slugify

from annotate.models import Benchmark
from annotate.selectors.identities import OPERATOR, IdentityScope
from annotate.services.exports import labels_export
from evaluation.errors import ReportExportError
from evaluation.figures import FIGURES, figure_available, render_figure
from evaluation.report_formats import (
    TABLES,
    report_csv,
    report_json,
    report_latex,
    report_markdown,
    table_csv,
    table_json,
)

logger = logging.getLogger(__name__)


def export_storage() -> Storage:
    """Return where exports go: the S3 bucket EXPORT_S3_BUCKET if set, else EXPORT_DIR."""
    if settings.EXPORT_S3_BUCKET:
        from storages.backends.s3 import S3Storage  # boto3 is loaded only when S3 is used

        return S3Storage(
            bucket_name=settings.EXPORT_S3_BUCKET,
            endpoint_url=settings.AWS_S3_ENDPOINT_URL,
            file_overwrite=False,
        )
    return FileSystemStorage(location=settings.EXPORT_DIR)


def report_export(
    *,
    report: dict,
    benchmark: Benchmark,
    aggregated_labels_csv: str,
    storage: Storage | None = None,
    now: datetime | None = None,
    scope: IdentityScope = OPERATOR,
    with_archive: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Store every file of the report under reports/<benchmark>/<timestamp>/; return their names.

    The raw labels name crowd workers as `scope` allows (annotate.selectors.identities).
    With `with_archive` the same files are also stored as one zip, `export.zip`, named last.
    `progress(done, total)` is told after each figure rendered and each file stored: rendering
    the figures takes most of the time, so a page following the export sees it move then too.
    """
    if storage is None:
        storage = export_storage()
    figures = _figure_files(report)
    texts = _text_files(
        report=report, benchmark=benchmark, aggregated_labels_csv=aggregated_labels_csv, scope=scope
    )
    to_store = len(texts) + len(figures) + (1 if with_archive else 0)
    total = len(figures) + to_store

    def told(done: int) -> None:
        if progress is not None:
            progress(done, total)

    files = {**texts, **_render(report, figures, told)}
    if with_archive:
        files[ARCHIVE_NAME] = report_archive(files=files)
    saved: list[str] = []
    try:
        prefix = _free_prefix(storage, benchmark=benchmark, now=now or timezone.now())
        for name, content in files.items():
            saved.append(storage.save(f"{prefix}/{name}", ContentFile(content)))
            told(len(figures) + len(saved))
    except Exception as error:
        _remove(storage, saved)
        raise ReportExportError(f"could not store the report export: {error}") from error
    return saved


ARCHIVE_NAME = "export.zip"


def report_archive(*, files: dict[str, bytes]) -> bytes:
    """Return one zip holding every file under its relative name (deflated, fixed timestamps)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0)), content)
    return buffer.getvalue()


def _text_files(
    *, report: dict, benchmark: Benchmark, aggregated_labels_csv: str, scope: IdentityScope
) -> dict[str, bytes]:
    """Return every export file but the figures as {relative name: bytes}."""
    files = {
        "report.json": report_json(report),
        "report.csv": report_csv(report),
        "report.md": report_markdown(report),
        "tables.tex": report_latex(report),
    }
    for table in TABLES:
        files[f"tables/{table}.csv"] = table_csv(report, table)
        files[f"tables/{table}.json"] = table_json(report, table)
    raw_labels = io.StringIO()
    labels_export(benchmark_name=benchmark.name, output=raw_labels, file_format="csv", scope=scope)
    files["labels/raw_labels.csv"] = raw_labels.getvalue()
    files["labels/aggregated_labels.csv"] = aggregated_labels_csv
    return {name: text.encode("utf-8") for name, text in files.items()}


def _figure_files(report: dict) -> list[tuple[str, str]]:
    """Return the (figure, format) pairs the export draws: PNG and PDF of each available one."""
    return [
        (name, fmt) for name in FIGURES if figure_available(report, name) for fmt in ("png", "pdf")
    ]


def _render(
    report: dict, figures: list[tuple[str, str]], told: Callable[[int], None]
) -> dict[str, bytes]:
    """Return the figure files, built in memory before anything is stored, telling each one."""
    rendered = {}
    for name, fmt in figures:
        rendered[f"figures/{name}.{fmt}"] = render_figure(report, name, fmt)
        told(len(rendered))
    return rendered


def _free_prefix(storage: Storage, *, benchmark: Benchmark, now: datetime) -> str:
    """Return a folder name no earlier export uses: two exports in one second get -2, -3..."""
    slug = slugify(benchmark.name) or f"benchmark-{benchmark.pk}"
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    prefix = f"reports/{slug}/{stamp}"
    attempt = 1
    while storage.exists(f"{prefix}/report.json"):
        attempt += 1
        prefix = f"reports/{slug}/{stamp}-{attempt}"
    return prefix


def _remove(storage: Storage, names: list[str]) -> None:
    for name in names:
        try:
            storage.delete(name)
        except Exception:
            # The store already failed once; what cannot be removed is named in the log.
            logger.exception("could not remove %s after a failed report export", name)
