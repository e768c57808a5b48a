"""Reports of revision studies: page, downloads, figures and the JSON API. Researchers only."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.engine.api import RefusalSerializer
from annotate.engine.pages import run_form_submit
from annotate.engine.services import engine_run_estimate_new
from annotate.errors import AnnotateError
from annotate.http import (
    FIGURE_TYPES,
    FileNegotiation,
    exports_limited,
    figure_csp,
    figures_limited,
)
from annotate.revision.models import Study
from annotate.revision.selectors import (
    given_up_sessions,
    study_collection_progress,
    study_sessions,
)
from annotate.revision.services.exports import sessions_export_csv, sessions_export_jsonl
from annotate.roles import (
    ADMIN,
    RESEARCHER,
    RESEARCHERS_ONLY,
    is_admin,
    is_researcher,
    require_role,
)
from annotate.throttling import figure_rate_check
from evaluation.errors import EvaluationError
from evaluation.report_api import figure_download_schema
from evaluation.report_formats import _without_nan
from evaluation.revision import figures
from evaluation.revision.formats import (
    FORMATS,
    TABLES,
    blocked_note,
    column_title,
    display,
    interval,
    others_merged,
    table_notes,
    table_rows,
    waiting_note,
)
from evaluation.revision.forms import RevisionJudgeRunForm
from evaluation.revision.judges import judge_run_launch, judge_run_prepare
from evaluation.revision.models import JudgeTask
from evaluation.revision.reports import revision_report_build
from evaluation.revision.selectors import (
    judge_prerequisites_missing,
    rated_turns_count,
    study_judge_runs,
)

CONTENT_TYPES = {
    "json": "application/json",
    "csv": "text/csv",
    "latex": "application/x-tex",
    "md": "text/markdown",
}
# Sessions listed per page of the report: a study of thousands rendered them all (the whole
# list is the sessions download).
SESSIONS_PAGE_SIZE = 50
TASK_TITLES = {
    JudgeTask.INSTRUCTION_CATEGORY: "Classify instruction types (Table 3)",
    JudgeTask.ERROR_CATEGORY: "Classify error categories (Table 4)",
    JudgeTask.RATING: "Run the rating judge (Table 5)",
}


def _require_researcher(user) -> None:
    """A role error is the 403 page in the site's layout (config.error_views)."""
    require_role(user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)


def _study(user, study_id: int) -> Study:
    _require_researcher(user)
    return get_object_or_404(Study, pk=study_id)


def _cell(row: dict, column: str) -> dict[str, str]:
    """A cell's text and its bootstrap interval ("" if none), as the Markdown and LaTeX show them."""
    return {
        "text": display(column, row.get(column)),
        "interval": interval(row, column),
    }


def _cells(rows: list[dict]) -> dict:
    columns = [c for c in dict.fromkeys(k for row in rows for k in row) if "_ci_" not in c]
    return {
        "columns": [column_title(c) for c in columns],
        "rows": [[_cell(row, c) for c in columns] for row in rows],
    }


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
        merged = others_merged(report, name)
        tables.append(
            {
                "name": name,
                "title": title,
                **_cells(table_rows(report, name)),
                "merged": merged,
                "notes": table_notes(report, name),
                # Every category on its own, when the paper's view merged some into "others".
                "detail": _cells(report[name]["categories"]) if merged else None,
            }
        )
    figures_shown = [
        (name, title)
        for name, title in figures.FIGURES.items()
        if figures.figure_available(report, name)
    ]
    context = {
        "study": study,
        "report": report,
        "tables": tables,
        "figures": figures_shown,
        "tasks": TASK_TITLES,
        "runs": study_judge_runs(study=study)[:20],
        "collection": study_collection_progress(study=study),
        "given_up": given_up_sessions(study=study),
        "sessions": Paginator(study_sessions(study=study), SESSIONS_PAGE_SIZE).get_page(
            request.GET.get("sessions_page")
        ),
        "waiting_note": waiting_note(report),
        "blocked_note": blocked_note(report),
        # Read only for the note about waiting work (the page's queries stay fixed otherwise).
        "is_admin": bool(waiting_note(report)) and is_admin(request.user),
    }
    return render(request, "revision/report.html", context)


def _report_file(study: Study, fmt: str) -> HttpResponse:
    """The study's report as a file in `fmt` (as `manage.py revision_report --format` prints
    it): the page's download and the API's."""
    if fmt not in FORMATS:
        raise Http404
    response = HttpResponse(
        FORMATS[fmt](revision_report_build(study=study)), content_type=CONTENT_TYPES[fmt]
    )
    extension = {"latex": "tex"}.get(fmt, fmt)
    response["Content-Disposition"] = f'attachment; filename="revision-{study.pk}.{extension}"'
    return response


@login_required
def report_download(request: HttpRequest, study_id: int, fmt: str) -> HttpResponse:
    return _report_file(_study(request.user, study_id), fmt)


SESSION_WRITERS = {
    "jsonl": (sessions_export_jsonl, "application/x-ndjson"),
    "csv": (sessions_export_csv, "text/csv"),
}


@login_required
@exports_limited(
    back=lambda study_id, **_: (reverse("revision-reports:report", args=[study_id]), "The report")
)
def sessions_download(request: HttpRequest, study_id: int, fmt: str) -> HttpResponse:
    """The study's finished sessions as `export_sessions` writes them: KIWI JSON Lines (one
    session per line, fields the app does not know kept) or CSV (one row per turn)."""
    study = _study(request.user, study_id)
    if fmt not in SESSION_WRITERS:
        raise Http404
    write, content_type = SESSION_WRITERS[fmt]
    response = HttpResponse(content_type=f"{content_type}; charset=utf-8")
    write(study=study, output=response)  # an HttpResponse is a file to write text to
    response["Content-Disposition"] = f'attachment; filename="sessions-{study.pk}.{fmt}"'
    return response


def _figure_file(study: Study, figure: str, image_format: str) -> HttpResponse:
    """Figure 2's `figure` of the study's report as an SVG, PNG or PDF: the page's and the
    API's; 404 for a figure the report has nothing to draw in."""
    if figure not in figures.FIGURES or image_format not in FIGURE_TYPES:
        raise Http404
    content = figures.revision_figure_cached(study=study, name=figure, fmt=image_format)
    if content is None:
        raise Http404
    return HttpResponse(content, content_type=FIGURE_TYPES[image_format])


@login_required
@figure_csp
@figures_limited
def figure(request: HttpRequest, study_id: int, figure: str, image_format: str) -> HttpResponse:
    return _figure_file(_study(request.user, study_id), figure, image_format)


class RevisionReportApi(APIView):
    """GET a revision study's whole report (Tables 2-5, Figure 2) as JSON; researchers only."""

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, study_id: int) -> Response:
        # The API answers a non-researcher as every other report API does: nothing here (404).
        if not is_researcher(request.user):
            raise Http404
        study = _study(request.user, study_id)
        return Response(_without_nan(revision_report_build(study=study)))


class RevisionReportDownloadApi(APIView):
    content_negotiation_class = FileNegotiation

    @extend_schema(
        operation_id="revision_studies_report_download",
        request=None,
        parameters=[OpenApiParameter("fmt", str, OpenApiParameter.PATH, enum=list(FORMATS))],
        responses={
            **{(200, content_type): OpenApiTypes.STR for content_type in CONTENT_TYPES.values()},
            404: OpenApiResponse(RefusalSerializer, description="No such study, or not yours."),
        },
        description="A revision study's report (Tables 2-5, Figure 2) as a file: json, csv, "
        "latex or md, the bytes of the report page's downloads and of `manage.py "
        "revision_report --format`. Researchers and admins; anyone else gets 404.",
    )
    def get(self, request: Request, study_id: int, fmt: str) -> HttpResponse:
        if not is_researcher(request.user):
            raise Http404
        return _report_file(get_object_or_404(Study, pk=study_id), fmt)


class RevisionFigureApi(APIView):
    content_negotiation_class = FileNegotiation

    @figure_download_schema(
        operation_id="revision_studies_figure_download",
        figure_param="figure",
        figures=figures.FIGURES,
        missing="No such study or figure, not yours, or nothing to draw in it yet.",
        description="Figure 2 of a revision study's report (ratings: the rating distribution "
        "per system; positions: instruction type by turn position) as svg, png or pdf, the "
        "bytes of the report page's figure. Researchers and admins; anyone else gets 404.",
    )
    @figure_csp  # an SVG opened on its own runs nothing, as the page's
    def get(self, request: Request, study_id: int, figure: str, image_format: str):
        figure_rate_check(request)  # the report pages' figures' counter
        if not is_researcher(request.user):
            raise Http404
        study = get_object_or_404(Study, pk=study_id)
        return _figure_file(study, figure, image_format)


@login_required
@require_http_methods(["GET", "POST"])
def judge_new(request: HttpRequest, study_id: int, task: str) -> HttpResponse:
    """Estimate (nothing sent, nothing kept) or start a classifier or rating-judge run on an
    engine endpoint; it runs in the background and the researcher lands on the engine run's
    page, whose progress updates by itself."""
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    study = get_object_or_404(Study, pk=study_id)
    if task not in TASK_TITLES:
        raise Http404
    rated_turns = rated_turns_count(study=study, task=task)
    form = RevisionJudgeRunForm(request.POST or None, task=task, rated_turns=rated_turns)

    def arguments() -> dict:
        return dict(
            study=study, task=task, user=request.user, now=timezone.now(),
            **form.launch_arguments(),
        )  # fmt: skip

    sent = run_form_submit(
        request,
        form,
        estimate=lambda: engine_run_estimate_new(
            create=lambda: judge_run_prepare(**arguments()).engine_run
        ),
        start=lambda: judge_run_launch(**arguments()),
        endpoint=lambda: form.cleaned_data["endpoint"],
        refusals=(AnnotateError, EvaluationError),
    )
    if sent.started is not None:
        return redirect("engine:run-detail", engine_run_id=sent.started.engine_run_id)
    context = {
        "estimate": sent.estimate,
        "confirm": sent.confirm,
        "study": study,
        "task": task,
        "title": TASK_TITLES[task],
        "form": form,
        "is_admin": is_admin(request.user),
        "prerequisites": judge_prerequisites_missing(study=study, task=task, user=request.user),
        "runs": study_judge_runs(study=study, task=task)[:20],
    }
    return sent.page(render(request, "revision/judge_new.html", context, status=sent.status))
