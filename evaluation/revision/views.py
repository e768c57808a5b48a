"""Reports of revision studies: page, downloads, figures and the JSON API. Researchers only."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.revision.models import Study
from annotate.roles import ADMIN, RESEARCHER, RESEARCHERS_ONLY, is_researcher, require_role
from evaluation.report_formats import _without_nan
from evaluation.revision import figures
from evaluation.revision.formats import FORMATS, TABLES, table_rows
from evaluation.revision.reports import revision_report_build

CONTENT_TYPES = {
    "json": "application/json",
    "csv": "text/csv",
    "latex": "application/x-tex",
    "md": "text/markdown",
}
FIGURE_TYPES = {"svg": "image/svg+xml", "png": "image/png", "pdf": "application/pdf"}


def _require_researcher(user) -> None:
    """A role error is the 403 page in the site's layout (config.error_views)."""
    require_role(user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)


def _study(user, study_id: int) -> Study:
    _require_researcher(user)
    return get_object_or_404(Study, pk=study_id)


def _cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


@login_required
def study_list(request: HttpRequest) -> HttpResponse:
    _require_researcher(request.user)
    return render(request, "revision/report_list.html", {"studies": Study.objects.order_by("name")})


@login_required
def report_page(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _study(request.user, study_id)
    report = revision_report_build(study=study)
    tables = []
    for name, title in TABLES.items():
        rows = table_rows(report, name)
        columns = [c for c in dict.fromkeys(k for row in rows for k in row) if "_ci_" not in c]
        tables.append(
            {
                "name": name,
                "title": title,
                "columns": columns,
                "rows": [[_cell(row.get(c)) for c in columns] for row in rows],
            }
        )
    figures_shown = [name for name in figures.FIGURES if figures.figure_available(report, name)]
    context = {"study": study, "report": report, "tables": tables, "figures": figures_shown}
    return render(request, "revision/report.html", context)


@login_required
def report_download(request: HttpRequest, study_id: int, fmt: str) -> HttpResponse:
    study = _study(request.user, study_id)
    if fmt not in FORMATS:
        raise Http404
    response = HttpResponse(
        FORMATS[fmt](revision_report_build(study=study)), content_type=CONTENT_TYPES[fmt]
    )
    extension = {"latex": "tex"}.get(fmt, fmt)
    response["Content-Disposition"] = f'attachment; filename="revision-{study.pk}.{extension}"'
    return response


@login_required
def figure(request: HttpRequest, study_id: int, figure: str, image_format: str) -> HttpResponse:
    study = _study(request.user, study_id)
    if figure not in figures.FIGURES or image_format not in FIGURE_TYPES:
        raise Http404
    report = revision_report_build(study=study)
    try:
        content = figures.render_revision_figure(report, figure, image_format)
    except ValueError:
        raise Http404 from None
    return HttpResponse(content, content_type=FIGURE_TYPES[image_format])


class RevisionReportApi(APIView):
    """GET a revision study's whole report (Tables 2-5, Figure 2) as JSON; researchers only."""

    def get(self, request: Request, study_id: int) -> Response:
        # The API answers a non-researcher as every other report API does: nothing here (404).
        if not is_researcher(request.user):
            raise Http404
        study = _study(request.user, study_id)
        return Response(_without_nan(revision_report_build(study=study)))
