"""Pages and downloads of the reports: tables, figures, exports. Researchers and admins only."""

from __future__ import annotations

import io
import json
from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.text import slugify
from django.views.decorators.http import require_POST

from annotate.errors import FieldInputError, RateLimitedError
from annotate.http import FIGURE_TYPES, error_page, figure_csp, figures_limited, page_errors
from annotate.models import Benchmark
from annotate.roles import ADMIN, RESEARCHER, RESEARCHERS_ONLY, require_role
from annotate.selectors.identities import identity_scope
from annotate.throttling import EXPORTS_SCOPE, EXPORTS_WHAT, polled, user_rate_limited
from annotate.verbalizer.models import EvaluationSet
from evaluation import figures, report_formats
from evaluation.conventions import (
    ACC_CONVENTIONS,
    ACC_MODES,
    DEFAULT_ACC,
    DEFAULT_UNKNOWN,
    UNKNOWN_CONVENTIONS,
    UNKNOWN_MODES,
)
from evaluation.errors import EvaluationError
from evaluation.models import ReportExport
from evaluation.services.report_runs import (
    report_export_list,
    report_export_open,
    report_export_progress,
    report_export_request,
)
from evaluation.services.reports import labels_aggregated_csv, report_cached

DOCUMENTS = {
    "json": (report_formats.report_json, "application/json"),
    "csv": (report_formats.report_csv, "text/csv"),
    "tex": (report_formats.report_latex, "application/x-tex"),
    "md": (report_formats.report_markdown, "text/markdown"),
}


def _benchmark(request: HttpRequest, benchmark_id: int) -> Benchmark:
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    return get_object_or_404(Benchmark, pk=benchmark_id)


def report_conventions_check(*, unknown: str, acc_unknown: str) -> None:
    """Refuse a convention the report does not know, naming the query field (pages and API)."""
    for field, value, modes in (
        ("unknown", unknown, UNKNOWN_MODES),
        ("acc", acc_unknown, ACC_MODES),
    ):
        if value not in modes:
            detail = f"{field} must be one of {', '.join(modes)}, not {value!r}."
            raise FieldInputError(detail, field=field)


def _conventions(request: HttpRequest) -> dict[str, str]:
    """Return the report's conventions from the query (`unknown`, `acc`); FieldInputError (400)
    on an unknown one."""
    unknown = request.GET.get("unknown", DEFAULT_UNKNOWN)
    acc_unknown = request.GET.get("acc", DEFAULT_ACC)
    report_conventions_check(unknown=unknown, acc_unknown=acc_unknown)
    return {"unknown": unknown, "acc_unknown": acc_unknown}


def _report(
    request: HttpRequest,
    benchmark: Benchmark,
    conventions: dict[str, str],
    tables: list[str] | None = None,
) -> dict:
    """Return the report with its annotators named as this reader may see them (`tables`: only
    those, see report_cached)."""
    scope = identity_scope(user=request.user)
    return report_cached(benchmark=benchmark, scope=scope, **conventions, tables=tables)


def _attachment(content, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
def report_list(request: HttpRequest) -> HttpResponse:
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    context = {
        "benchmarks": Benchmark.objects.order_by("name"),
        "verbalizer_sets": EvaluationSet.objects.order_by("name").only("pk", "name"),
    }
    return render(request, "evaluation/report_list.html", context)


@login_required
@page_errors
def report_page(request: HttpRequest, benchmark_id: int) -> HttpResponse:
    benchmark = _benchmark(request, benchmark_id)
    conventions = _conventions(request)
    report = _report(request, benchmark, conventions)
    context = {
        "benchmark": benchmark,
        "report": report,
        "unknown": conventions["unknown"],
        "acc_unknown": conventions["acc_unknown"],
        "query": f"unknown={conventions['unknown']}&acc={conventions['acc_unknown']}",
        "unknown_conventions": UNKNOWN_CONVENTIONS.items(),
        "acc_conventions": ACC_CONVENTIONS.items(),
        "leaderboard": _leaderboard_rows(report),
        "provisional": report_formats.provisional_notes(report),
        **_source_rows(report),
        "figures": _figure_choices(report, request),
        "tables": list(report_formats.TABLES),
        "sources_title": report_formats.TABLE_TITLES["sources"],
        "exports": report_export_list(benchmark=benchmark, user=request.user)[:10],
    }
    return render(request, "evaluation/report.html", context)


# Figures drawn from one label source, and the report table their sources come from.
SOURCE_TABLES = {"leaderboard": "leaderboard", "constraints": "constraints", "domains": "domains"}


def _figure_choices(report: dict, request: HttpRequest) -> list[dict]:
    """Each available figure with the label sources it can show and the one asked for."""
    shown = []
    for name, title in figures.FIGURES.items():
        if not figures.figure_available(report, name):
            continue
        table = SOURCE_TABLES.get(name)
        rows = report.get(table) or [] if table else []
        sources = list(dict.fromkeys(r["source"] for r in rows if r.get("drfr") is not None))
        chosen = request.GET.get(f"source_{name}", "")
        shown.append(
            {
                "name": name,
                "title": title,
                "sources": sources,
                "chosen": chosen if chosen in sources else "",
            }
        )
    return shown


def _leaderboard_rows(report: dict) -> list[dict]:
    """Pivot the leaderboard: one row per (source, system), a cell per subset."""
    rows: dict[tuple[str, str], dict] = {}
    for entry in report["leaderboard"]:
        key = (entry["source"], entry["system"])
        rows.setdefault(key, {"source": entry["source"], "system": entry["system"]})
        rows[key][entry["subset"]] = {**entry, "partial": report_formats.is_partial(entry)}
    for row in rows.values():
        row["cells"] = [row.get(subset) for subset in ("easy", "hard", "overall")]
    return list(rows.values())


def _source_rows(report: dict) -> dict:
    """Table 4's rows (`sources`) with ACC as a percentage, to show with one decimal as the
    LaTeX and Markdown tables do (scaled as a decimal, so halves round the same way there and
    here), time and a judge's possibly billed amount as the exports write them, and the number
    of the reason (`sources_na_reasons`, in order) of each "–" in ACC and in PLD."""
    reasons: list[str] = []

    def mark(code: str | None) -> int | None:
        if code is None:
            return None
        if code not in reasons:
            reasons.append(code)
        return reasons.index(code) + 1

    rows = [
        {
            **row,
            "acc_percent": None if row["acc"] is None else Decimal(repr(float(row["acc"]))) * 100,
            "possibly_billed": report_formats.possibly_billed_text(row.get("possibly_billed_usd")),
            "time_text": report_formats.hundredths_text(row["time_min"]),
            "acc_na_mark": mark(row["acc_na"]),
            "pld_na_mark": mark(row["pld_na"]),
        }
        for row in report["sources"]
    ]
    return {
        "sources": rows,
        "sources_na_reasons": [report_formats.SOURCES_NA_REASONS[code] for code in reasons],
    }


def report_document_file(report: dict, fmt: str) -> HttpResponse:
    """The whole report as a file in `fmt` (a key of DOCUMENTS): the page's download and the
    API's."""
    render_document, content_type = DOCUMENTS[fmt]
    return _attachment(render_document(report), content_type, f"report.{fmt}")


@login_required
@page_errors
def report_download(request: HttpRequest, benchmark_id: int, fmt: str) -> HttpResponse:
    benchmark = _benchmark(request, benchmark_id)
    if fmt not in DOCUMENTS:
        raise Http404
    return report_document_file(_report(request, benchmark, _conventions(request)), fmt)


@login_required
@page_errors
def table_download(request: HttpRequest, benchmark_id: int, table: str, fmt: str) -> HttpResponse:
    benchmark = _benchmark(request, benchmark_id)
    if table not in report_formats.TABLES or fmt not in ("csv", "json"):
        raise Http404
    report = _report(request, benchmark, _conventions(request))
    if fmt == "csv":
        return _attachment(report_formats.table_csv(report, table), "text/csv", f"{table}.csv")
    body = json.dumps(report[table], indent=2, allow_nan=False)
    return _attachment(body, "application/json", f"{table}.json")


@login_required
@page_errors
@figure_csp
@figures_limited
def figure_download(
    request: HttpRequest, benchmark_id: int, name: str, image_format: str
) -> HttpResponse:
    benchmark = _benchmark(request, benchmark_id)
    if name not in figures.FIGURES or image_format not in FIGURE_TYPES:
        raise Http404
    # A figure needs one table: on a cache miss, not the whole report (tables, CIs, kappas).
    tables = [figures.figure_table(name)]
    report = _report(request, benchmark, _conventions(request), tables=tables)
    try:
        response = report_figure_file(
            report, name, image_format, source=request.GET.get("source") or None
        )
    except EvaluationError as error:  # an unknown label source
        return HttpResponse(str(error), status=error.http_status, content_type="text/plain")
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="{name}.{image_format}"'
    return response


def report_figure_file(report: dict, name: str, fmt: str, *, source: str | None) -> HttpResponse:
    """One figure of the report (`name` in figures.FIGURES, `fmt` in FIGURE_TYPES) drawn from
    `source`'s labels (None: the default): the page's and the API's; 404 for a figure the
    report has nothing to draw in, EvaluationError for an unknown source."""
    if not figures.figure_available(report, name):
        raise Http404
    content = figures.render_figure(report, name, fmt, source=source)
    response = HttpResponse(content, content_type=FIGURE_TYPES[fmt])
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
def aggregated_labels_download(request: HttpRequest, benchmark_id: int) -> HttpResponse:
    benchmark = _benchmark(request, benchmark_id)
    output = io.StringIO()
    try:
        # Each builds the benchmark's every label into one file: counted with the exports.
        with user_rate_limited(
            user=request.user, scope=EXPORTS_SCOPE, what=EXPORTS_WHAT,
            outcome="Nothing was built.",
        ):  # fmt: skip
            labels_aggregated_csv(benchmark=benchmark, output=output)
    except RateLimitedError as error:
        back = (reverse("reports:detail", args=[benchmark.pk]), "Back to the report")
        return error_page(request, error, back=back)
    return _attachment(output.getvalue(), "text/csv", "labels-aggregated.csv")


@login_required
@require_POST
def report_export_start(request: HttpRequest, benchmark_id: int) -> HttpResponse:
    benchmark = _benchmark(request, benchmark_id)
    unknown = request.POST.get("unknown", DEFAULT_UNKNOWN)
    acc_unknown = request.POST.get("acc", DEFAULT_ACC)
    try:
        # Each export builds the whole report, draws every figure and writes a zip to storage.
        with user_rate_limited(
            user=request.user, scope=EXPORTS_SCOPE, what=EXPORTS_WHAT,
            outcome="Nothing was queued.",
        ):  # fmt: skip
            report_export_request(
                benchmark=benchmark, unknown=unknown, acc_unknown=acc_unknown, user=request.user
            )
    except RateLimitedError as error:
        back = (reverse("reports:detail", args=[benchmark.pk]), "Back to the report")
        return error_page(request, error, back=back)
    except EvaluationError as error:
        return HttpResponse(str(error), status=error.http_status, content_type="text/plain")
    page = reverse("reports:detail", args=[benchmark.pk])
    return redirect(f"{page}?unknown={unknown}&acc={acc_unknown}#exports")


def _export(request: HttpRequest, benchmark_id: int, export_id: int) -> ReportExport:
    benchmark = _benchmark(request, benchmark_id)
    exports = report_export_list(benchmark=benchmark, user=request.user)
    return get_object_or_404(exports, pk=export_id)


@polled  # reloaded every few seconds while the work runs
@login_required
def report_export_status(request: HttpRequest, benchmark_id: int, export_id: int) -> JsonResponse:
    """The export's progress as JSON, for the report page to follow it without reloading."""
    return JsonResponse(report_export_progress(export=_export(request, benchmark_id, export_id)))


@login_required
def report_export_download(request: HttpRequest, benchmark_id: int, export_id: int) -> FileResponse:
    """The export as one zip, read from the storage it went to (S3 or the export folder)."""
    export = _export(request, benchmark_id, export_id)
    try:
        archive = report_export_open(export=export)
    except EvaluationError as error:
        raise Http404(str(error)) from None
    stamp = export.created_at.strftime("%Y%m%d-%H%M%S")
    filename = f"report-{slugify(export.benchmark.name) or export.benchmark.pk}-{stamp}.zip"
    return FileResponse(archive, as_attachment=True, filename=filename)
