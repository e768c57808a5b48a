"""A corpus of malformed files (fixtures/hostile/): each is refused with its line and field named,
and nothing at all is written."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.base import ContentFile

from annotate import models
from annotate.errors import ImportFileError
from annotate.services import files
from annotate.services.import_jobs import import_job_run
from annotate.services.imports import instructions_import, responses_import
from annotate.services.label_imports import labels_import, scores_import

pytestmark = pytest.mark.django_db

CORPUS = Path(settings.BASE_DIR) / "fixtures" / "hostile"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
COUNTED = [
    models.Benchmark,
    models.Instruction,
    models.Question,
    models.System,
    models.Response,
    models.Annotator,
    models.Label,
    models.DirectScore,
]


@pytest.fixture
def base(tmp_path):
    """One instruction with two questions and a response from system `sys`."""
    source = tmp_path / "base.json"
    source.write_text(json.dumps(MANIFEST["base_instruction"]) + "\n")
    instructions_import(path=str(source), benchmark_name="hostile")
    answer = tmp_path / "r.jsonl"
    answer.write_text('{"id": "h1", "output": "Rain on the roof"}\n')
    responses_import(path=str(answer), benchmark_name="hostile", system_name="sys")


def run_import(case: dict, path: str) -> None:
    args = case.get("args", {})
    if case["kind"] == "instructions":
        instructions_import(path=path, benchmark_name="hostile-new")
    elif case["kind"] == "responses":
        responses_import(path=path, benchmark_name="hostile", system_name="sys-new")
    elif case["kind"] == "labels":
        labels_import(
            path=path,
            benchmark_name="hostile",
            system_name=args.get("system", ""),
            annotator_name=args.get("annotator", ""),
            kind=args.get("annotator_kind", "expert"),
        )
    else:
        scores_import(path=path, benchmark_name="hostile", kind="expert")


def counts() -> list[int]:
    return [model.objects.count() for model in COUNTED]


def test_the_corpus_has_at_least_thirty_files():
    assert len(MANIFEST["cases"]) >= 30
    assert all((CORPUS / case["file"]).is_file() for case in MANIFEST["cases"])


@pytest.mark.parametrize("case", MANIFEST["cases"], ids=[c["file"] for c in MANIFEST["cases"]])
def test_malformed_file_is_refused_and_writes_nothing(base, case):
    path = str(CORPUS / case["file"])
    before = counts()
    with pytest.raises(ImportFileError) as error:
        run_import(case, path)
    assert error.value.path == path
    assert (error.value.line, error.value.field) == (case["line"], case["field"]), str(error.value)
    assert case["contains"] in str(error.value)
    assert counts() == before


def test_a_runaway_line_is_refused_without_parsing_it(base, tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_LINE_CHARS", 1000)
    path = tmp_path / "huge.json"
    path.write_text(
        json.dumps(MANIFEST["base_instruction"]) + "\n" + '{"id": "' + "x" * 5000 + '"}\n'
    )
    with pytest.raises(ImportFileError, match="longer than 1,000 characters") as error:
        instructions_import(path=str(path), benchmark_name="hostile-new")
    assert error.value.line == 2


@pytest.mark.parametrize("case", MANIFEST["cases"], ids=[c["file"] for c in MANIFEST["cases"]])
def test_malformed_upload_ends_as_a_failed_job_naming_line_and_field(
    base, case, settings, tmp_path
):
    """The same files through the upload page's job: failed (never left running), named."""
    settings.MEDIA_ROOT = tmp_path
    args = case.get("args", {})
    job = models.ImportJob(
        kind=case["kind"],
        benchmark_name="hostile-new" if case["kind"] == "instructions" else "hostile",
        system_name=args.get("system", "sys-new" if case["kind"] == "responses" else ""),
        annotator_name=args.get("annotator", ""),
        annotator_kind=args.get("annotator_kind", "expert"),
        original_name=case["file"],
    )
    job.upload.save(case["file"], ContentFile((CORPUS / case["file"]).read_bytes()), save=True)
    before = counts()
    job = import_job_run(job_id=job.pk)
    assert job.status == models.ImportStatus.FAILED
    where = case["file"] if case["line"] is None else f"{case['file']}, line {case['line']}"
    if case["field"]:
        where += f", field '{case['field']}'"
    assert job.message.startswith(f"{where}: "), job.message
    assert case["contains"] in job.message and "Nothing was written." in job.message
    assert counts() == before
