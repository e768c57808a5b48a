"""Pages and downloads of the reports: tables, figures, exports. Researchers and admins only."""

from __future__ import annotations

import io
import json

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotate.models import Benchmark
from annotate.roles import is_researcher
from evaluation import figures, report_formats
from evaluation.errors import EvaluationError
from evaluation.services.report_runs import report_export_list, report_export_request
from evaluation.services.reports import UNKNOWN_MODES, labels_aggregated_csv, report_cached

DOCUMENTS = {
    "json": (report_formats.report_json, "application/json"),
    "csv": (report_formats.report_csv, "text/csv"),
    "tex": (report_formats.report_latex, "application/x-tex"),
    "md": (report_formats.report_markdown, "text/markdown"),
}
FIGURE_TYPES = {"svg": "image/svg+xml", "png": "image/png", "pdf": "application/pdf"}


def _benchmark(request: HttpRequest, benchmark_id: int) -> Benchmark:
    if not is_researcher(request.user):
        raise Http404
    return get_object_or_404(Benchmark, pk=benchmark_id)


def _unknown(request: HttpRequest) -> str:
    unknown = request.GET.get("unknown", "exclude")
    if unknown not in UNKNOWN_MODES:
        raise Http404
    return unknown


def _attachment(content, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
def report_list(request: HttpRequest) -> HttpResponse:
    if not is_researcher(request.user):
        raise Http404
    benchmarks = Benchmark.objects.order_by("name")
    return render(request, "evaluation/report_list.html", {"benchmarks": benchmarks})


@login_required
def report_page(request: HttpRequest, benchmark_id: int) -> HttpResponse:
    benchmark = _benchmark(request, benchmark_id)
    unknown = _unknown(request)
    report = report_cached(benchmark=benchmark, unknown=unknown)
    context = {
        "benchmark": benchmark,
        "report": report,
        "unknown": unknown,
        "leaderboard": _leaderboard_rows(report),
        "figures": [
            (name, title)
            for name, title in figures.FIGURES.items()
            if figures.figure_available(report, name)
        ],
        "tables": list(report_formats.TABLES),
        "exports": report_export_list(benchmark=benchmark)[:10],
    }
    return render(request, "evaluation/report.html", context)


def _leaderboard_rows(report: dict) -> list[dict]:
    """Pivot the leaderboard: one row per (source, system), a cell per subset."""
    rows: dict[tuple[str, str], dict] = {}
    for entry in report["leaderboard"]:
        key = (entry["source"], entry["system"])
        rows.setdefault(key, {"source": entry["source"], "system": entry["system"]})
        rows[key][entry["subset"]] = entry
    for row in rows.values():
        row["cells"] = [row.get(subset) for subset in ("easy", "hard", "overall")]
    return list(rows.values())


@login_required
def report_download(request: HttpRequest, benchmark_id: int, fmt: str) -> HttpResponse:
    benchmark = _benchmark(request, benchmark_id)
    if fmt not in DOCUMENTS:
        raise Http404
    render_document, content_type = DOCUMENTS[fmt]
    report = report_cached(benchmark=benchmark, unknown=_unknown(request))
    return _attachment(render_document(report), content_type, f"report.{fmt}")


@login_required
def table_download(request: HttpRequest, benchmark_id: int, table: str, fmt: str) -> HttpResponse:
    benchmark = _benchmark(request, benchmark_id)
    if table not in report_formats.TABLES or fmt not in ("csv", "json"):
        raise Http404
    report = report_cached(benchmark=benchmark, unknown=_unknown(request))
    if fmt == "csv":
        return _attachment(report_formats.table_csv(report, table), "text/csv", f"{table}.csv")
    body = json.dumps(report[table], indent=2, allow_nan=False)
    return _attachment(body, "application/json", f"{table}.json")


@login_required
def figure_download(
    request: HttpRequest, benchmark_id: int, name: str, image_format: str
) -> HttpResponse:
    benchmark = _benchmark(request, benchmark_id)
    fmt = image_format
    if name not in figures.FIGURES or fmt not in FIGURE_TYPES:
        raise Http404
    report = report_cached(benchmark=benchmark, unknown=_unknown(request))
    if not figures.figure_available(report, name):
        raise Http404
    content = figures.render_figure(report, name, fmt, source=request.GET.get("source") or None)
    response = HttpResponse(content, content_type=FIGURE_TYPES[fmt])
    # Names in a figure come from imported data: an SVG opened on its own may run nothing.
    response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    response["X-Content-Type-Options"] = "nosniff"
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


@login_required
def aggregated_labels_download(request: HttpRequest, benchmark_id: int) -> HttpResponse:
    benchmark = _benchmark(request, benchmark_id)
    output = io.StringIO()
    labels_aggregated_csv(benchmark=benchmark, output=output)
    return _attachment(output.getvalue(), "text/csv", "labels-aggregated.csv")


@login_required
@require_POST
def report_export_start(request: HttpRequest, benchmark_id: int) -> HttpResponse:
    benchmark = _benchmark(request, benchmark_id)
    unknown = request.POST.get("unknown", "exclude")
    try:
        report_export_request(benchmark=benchmark, unknown=unknown, user=request.user)
    except EvaluationError as error:
        return HttpResponse(str(error), status=error.http_status, content_type="text/plain")
    return redirect(f"{reverse('reports:detail', args=[benchmark.pk])}?unknown={unknown}#exports")
