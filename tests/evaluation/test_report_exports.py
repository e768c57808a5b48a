"""Report exports to a local folder and to S3 (moto's server over real HTTP, boto3 as client)."""

import csv
import io
import json
import zipfile
from datetime import UTC, datetime

import boto3
import pytest
from django.core.files.storage import FileSystemStorage
from django.test import override_settings
from moto.server import ThreadedMotoServer

from annotate.models import AnnotatorKind, LabelValue
from evaluation import figures
from evaluation.errors import ReportExportError
from evaluation.report_formats import TABLES, report_json, table_csv
from evaluation.services import report_exports
from evaluation.services.report_exports import export_storage, report_export
from tests.evaluation.report_sample import sample_report
from tests.factories import AnnotatorFactory, BenchmarkFactory, LabelFactory

NOW = datetime(2026, 11, 23, 8, 15, 4, tzinfo=UTC)
PREFIX = "reports/infobench-v2-test/20261123T081504Z"
AGGREGATED = "instruction_id,system,source,question,label\r\ntask_1,gpt-4,expert-majority,1,YES\r\n"
EXPECTED_FILES = (
    {"report.json", "report.csv", "report.md", "tables.tex"}
    | {f"tables/{table}.{ext}" for table in TABLES for ext in ("csv", "json")}
    | {f"figures/{name}.{ext}" for name in figures.FIGURES for ext in ("png", "pdf")}
    | {"labels/raw_labels.csv", "labels/aggregated_labels.csv"}
)


@pytest.fixture
def benchmark(db):
    benchmark = BenchmarkFactory(name="InFoBench v2 (test)")
    expert = AnnotatorFactory(name="alpha", kind=AnnotatorKind.EXPERT)
    label = LabelFactory(
        annotator=expert,
        value=LabelValue.NO,
        question__instruction__benchmark=benchmark,
        question__instruction__external_id="=cmd",
        response__system__name="gpt-4",
    )
    LabelFactory(
        annotator=expert,
        question__instruction=label.question.instruction,
        question__position=label.question.position + 1,
        response=label.response,
    )
    return benchmark


@pytest.fixture
def fast_figures(monkeypatch):
    """Stand in for matplotlib where a test is about storage, not pictures (rendering is slow)."""
    monkeypatch.setattr(
        report_exports, "render_figure", lambda report, name, fmt: f"{name}.{fmt}".encode()
    )


# --- A local folder ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_export_to_a_folder_writes_every_file(benchmark, tmp_path):
    report = sample_report()
    with override_settings(EXPORT_S3_BUCKET="", EXPORT_DIR=tmp_path):
        storage = export_storage()
        assert isinstance(storage, FileSystemStorage)
        names = report_export(
            report=report, benchmark=benchmark, aggregated_labels_csv=AGGREGATED, now=NOW
        )
    assert {name.removeprefix(PREFIX + "/") for name in names} == EXPECTED_FILES
    folder = tmp_path / PREFIX
    assert (folder / "report.json").read_text() == report_json(report)
    assert (folder / "tables/leaderboard.csv").read_bytes().decode() == table_csv(
        report, "leaderboard"
    )
    assert json.loads((folder / "tables/votes.json").read_text()) == report["votes"]
    assert (folder / "tables.tex").read_text().count(r"\begin{tabular}") == 5
    assert (folder / "report.md").read_text().startswith("# Report: InFoBench")
    assert (folder / "figures/constraints.png").read_bytes().startswith(b"\x89PNG")
    assert (folder / "figures/leaderboard.pdf").read_bytes().startswith(b"%PDF-")
    assert (folder / "labels/aggregated_labels.csv").read_bytes().decode() == AGGREGATED


@pytest.mark.django_db
def test_progress_moves_while_the_figures_are_drawn_not_only_once_they_are_stored(
    benchmark, tmp_path, monkeypatch
):
    # Drawing the figures is most of an export's time: a page that followed only the storing
    # sat at 0 % until the very end.
    events = []
    monkeypatch.setattr(
        report_exports,
        "render_figure",
        lambda report, name, fmt: events.append(("drawn", name, fmt)) or b"figure",
    )
    report_export(
        report=sample_report(),
        benchmark=benchmark,
        aggregated_labels_csv=AGGREGATED,
        storage=FileSystemStorage(location=tmp_path),
        now=NOW,
        with_archive=True,
        progress=lambda done, total: events.append(("told", done, total)),
    )

    told = [(done, total) for kind, done, total in events if kind == "told"]
    kinds = [event[0] for event in events]
    assert kinds[:2] == ["drawn", "told"]  # told after the first figure, before the second
    drawn = kinds.count("drawn")
    assert drawn == len(figures.FIGURES) * 2
    total = told[0][1]
    assert total == drawn + len(EXPECTED_FILES) + 1  # every figure drawn, every file and the zip
    assert [done for done, _ in told] == list(range(1, total + 1))
    assert {t for _, t in told} == {total}


@pytest.mark.django_db
def test_raw_labels_are_the_label_export(benchmark, tmp_path, fast_figures):
    report_export(
        report=sample_report(),
        benchmark=benchmark,
        aggregated_labels_csv=AGGREGATED,
        storage=FileSystemStorage(location=tmp_path),
        now=NOW,
    )
    rows = list(csv.reader(io.StringIO((tmp_path / PREFIX / "labels/raw_labels.csv").read_text())))
    assert len(rows) == 3  # header and the two labels
    assert rows[1][:3] == ["'=cmd", "gpt-4", "alpha"]  # the label export's own formula guard
    assert {rows[1][4], rows[2][4]} == {"NO", "YES"}


@pytest.mark.django_db
def test_two_exports_in_the_same_second_get_their_own_folders(benchmark, tmp_path, fast_figures):
    storage = FileSystemStorage(location=tmp_path)
    first = report_export(
        report=sample_report(),
        benchmark=benchmark,
        aggregated_labels_csv="",
        storage=storage,
        now=NOW,
    )
    second = report_export(
        report=sample_report(),
        benchmark=benchmark,
        aggregated_labels_csv="",
        storage=storage,
        now=NOW,
    )
    assert f"{PREFIX}/report.json" in first
    assert f"{PREFIX}-2/report.json" in second


@pytest.mark.django_db
def test_only_available_figures_are_exported(benchmark, tmp_path, fast_figures):
    report = sample_report()
    report["positions"] = []
    names = report_export(
        report=report,
        benchmark=benchmark,
        aggregated_labels_csv="",
        storage=FileSystemStorage(location=tmp_path),
        now=NOW,
    )
    assert f"{PREFIX}/figures/constraints.png" in names
    assert not [name for name in names if "positions.p" in name]
    assert f"{PREFIX}/tables/positions.csv" in names  # the empty table is still there


@pytest.mark.django_db
def test_a_failing_figure_writes_nothing(benchmark, tmp_path, monkeypatch):
    def broken(report, name, fmt):
        if name == "domains":
            raise RuntimeError("renderer crashed")
        return b"fine"

    monkeypatch.setattr(report_exports, "render_figure", broken)
    with pytest.raises(RuntimeError, match="renderer crashed"):
        report_export(
            report=sample_report(),
            benchmark=benchmark,
            aggregated_labels_csv="",
            storage=FileSystemStorage(location=tmp_path),
            now=NOW,
        )
    assert list(tmp_path.rglob("*")) == []


class FailingStorage(FileSystemStorage):
    """A folder that stops taking files after a few, as a full disk or a dropped link would."""

    def __init__(self, *args, fail_after: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.fail_after = fail_after

    def _save(self, name, content):
        if self.fail_after == 0:
            raise OSError("No space left on device")
        self.fail_after -= 1
        return super()._save(name, content)


@pytest.mark.django_db
def test_a_storage_failing_half_way_leaves_no_file(benchmark, tmp_path, fast_figures):
    storage = FailingStorage(location=tmp_path, fail_after=5)
    with pytest.raises(ReportExportError, match="No space left on device"):
        report_export(
            report=sample_report(),
            benchmark=benchmark,
            aggregated_labels_csv="",
            storage=storage,
            now=NOW,
        )
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


# --- S3, against moto's server over HTTP ---------------------------------------------------------


@pytest.fixture
def s3_endpoint(monkeypatch):
    for variable in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.mark.django_db
def test_export_to_s3_stores_every_file_in_the_bucket(benchmark, s3_endpoint, fast_figures):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="report-exports")
    report = sample_report()
    with override_settings(EXPORT_S3_BUCKET="report-exports", AWS_S3_ENDPOINT_URL=s3_endpoint):
        storage = export_storage()
        assert type(storage).__name__ == "S3Storage"
        names = report_export(
            report=report, benchmark=benchmark, aggregated_labels_csv=AGGREGATED, now=NOW
        )
    listed = client.list_objects_v2(Bucket="report-exports", Prefix="reports/")
    keys = {item["Key"] for item in listed["Contents"]}
    assert keys == set(names)
    assert {key.removeprefix(PREFIX + "/") for key in keys} == EXPECTED_FILES
    stored = client.get_object(Bucket="report-exports", Key=f"{PREFIX}/report.json")
    assert stored["Body"].read().decode() == report_json(report)
    assert stored["ContentType"] == "application/json"
    aggregated = client.get_object(
        Bucket="report-exports", Key=f"{PREFIX}/labels/aggregated_labels.csv"
    )
    assert aggregated["Body"].read().decode() == AGGREGATED


@pytest.mark.django_db
def test_s3_export_into_a_missing_bucket_is_an_export_error(benchmark, s3_endpoint, fast_figures):
    settings = {"EXPORT_S3_BUCKET": "no-such-bucket", "AWS_S3_ENDPOINT_URL": s3_endpoint}
    with (
        override_settings(**settings),
        pytest.raises(ReportExportError, match="could not store the report export"),
    ):
        report_export(
            report=sample_report(), benchmark=benchmark, aggregated_labels_csv="", now=NOW
        )


@pytest.mark.django_db
def test_an_s3_export_downloads_as_one_zip_from_the_browser(
    benchmark, s3_endpoint, fast_figures, client, researcher, django_capture_on_commit_callbacks
):
    from django.urls import reverse

    from evaluation.models import ExportStatus, ReportExport

    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(
        Bucket="report-exports"
    )
    client.force_login(researcher)
    with override_settings(EXPORT_S3_BUCKET="report-exports", AWS_S3_ENDPOINT_URL=s3_endpoint):
        with django_capture_on_commit_callbacks(execute=True):
            client.post(reverse("reports:export", args=[benchmark.pk]), {"unknown": "exclude"})
        export = ReportExport.objects.get()
        assert export.status == ExportStatus.DONE, export.message
        assert export.archive.endswith("/export.zip")
        page = client.get(reverse("reports:detail", args=[benchmark.pk])).text
        download = client.get(reverse("reports:export-download", args=[benchmark.pk, export.pk]))
    assert "s3://" not in page and "report-exports" not in page
    with zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content))) as archive:
        names = set(archive.namelist())
        raw = archive.read("labels/raw_labels.csv").decode()
    stored = {name.split("/", 3)[-1] for name in export.files} - {"export.zip"}
    assert names == stored and {"report.json", "tables.tex", "report.md"} <= names
    assert (
        export.message == f"Wrote {len(names)} files, and a zip of them all."
    )  # as many as the zip holds
    assert "alpha" in raw and "'=cmd" in raw
