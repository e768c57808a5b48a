"""Every CSV the app writes goes through one formula-neutralising writer
(annotate.services.files.csv_writer): a system or annotator named `=HYPERLINK(...)` is text in a
spreadsheet, in the aggregated labels download and in the export's aggregated labels alike."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from annotate.models import System
from annotate.services.files import FORMULA_PREFIXES, csv_unescape
from evaluation.services.reports import labels_aggregated_csv

pytestmark = pytest.mark.django_db

FORMULA = '=HYPERLINK("http://evil.example/steal","click me")'


def cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def test_the_aggregated_labels_download_neutralises_formulas(client, researcher, bench):
    System.objects.filter(name="alpha").update(name=FORMULA)
    client.force_login(researcher)
    answer = client.get(reverse("reports:aggregated-labels", args=[bench.pk]))
    written = cells(answer.content.decode())
    assert "'" + FORMULA in written
    assert not [cell for cell in written if cell.startswith(FORMULA_PREFIXES)]
    # and the file imports back with the name as it was
    assert FORMULA in {csv_unescape(cell) for cell in written}


def test_the_exports_aggregated_labels_neutralise_formulas(bench):
    System.objects.filter(name="beta").update(name="@SUM(1+1)*cmd|' /C calc'!A0")
    output = io.StringIO()
    labels_aggregated_csv(benchmark=bench, output=output)
    written = cells(output.getvalue())
    assert "'@SUM(1+1)*cmd|' /C calc'!A0" in written
    assert not [cell for cell in written if cell.startswith(FORMULA_PREFIXES)]


def test_no_module_writes_csv_but_through_the_one_writer():
    pattern = re.compile(r"csv\.(writer|DictWriter)\(")
    allowed = Path(settings.BASE_DIR) / "annotate" / "services" / "files.py"
    offenders = [
        str(path.relative_to(settings.BASE_DIR))
        for package in ("annotate", "evaluation", "config")
        for path in (Path(settings.BASE_DIR) / package).rglob("*.py")
        if path != allowed and pattern.search(path.read_text())
    ]
    assert offenders == []
