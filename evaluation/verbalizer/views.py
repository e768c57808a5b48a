"""The verbalizer report: page, downloads, figures, raw replies beside their parse, and the API.
Researchers and admins only."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import urlencode
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotate.engine.api import RefusalSerializer
from annotate.http import (
    FIGURE_TYPES,
    FileNegotiation,
    csv_download,
    exports_limited,
    figure_csp,
    figures_limited,
)
from annotate.roles import (
    ADMIN,
    RESEARCHER,
    RESEARCHERS_ONLY,
    is_admin,
    is_researcher,
    require_role,
)
from annotate.selectors.identities import identity_scope
from annotate.throttling import figure_rate_check
from annotate.verbalizer.models import EvaluationSet, Mode, ModelAnswer
from annotate.verbalizer.selectors import human_answers_waiting_for_kind
from evaluation.report_api import figure_download_schema
from evaluation.verbalizer import figures
from evaluation.verbalizer.formats import TABLES, flat_rows, report_as
from evaluation.verbalizer.parsing import parse_lenient, parse_strict
from evaluation.verbalizer.report import human_answers_raw, verbalizer_report_cached

DOCUMENTS = {
    "json": "application/json",
    "csv": "text/csv",
    "latex": "application/x-tex",
    "md": "text/markdown",
}
REPLIES_PER_PAGE = 50


def _set(request: HttpRequest, set_id: int) -> EvaluationSet:
    require_role(request.user, ADMIN, RESEARCHER, message=RESEARCHERS_ONLY)
    return get_object_or_404(EvaluationSet, pk=set_id)


@login_required
def report_page(request: HttpRequest, set_id: int) -> HttpResponse:
    evaluation_set = _set(request, set_id)
    report = verbalizer_report_cached(evaluation_set=evaluation_set)
    available = [
        (name, title) for name, title in figures.FIGURES.items()
        if figures.figure_available(report, name)
    ]  # fmt: skip
    waiting = human_answers_waiting_for_kind(evaluation_set=evaluation_set)
    context = {
        "set": evaluation_set,
        "report": report,
        "groups": flat_rows(report, "groups"),
        "flipped": flat_rows(report, "flipped"),
        "mappings": flat_rows(report, "mappings"),
        "rows": flat_rows(report),
        "figures": available,
        "formats": DOCUMENTS,
        "waiting": waiting,
        # Read only for the note about waiting answers (the page's queries stay fixed).
        "is_admin": bool(waiting.answers) and is_admin(request.user),
    }
    return render(request, "verbalizer/report.html", context)


def _report_file(evaluation_set: EvaluationSet, fmt: str, table: str) -> HttpResponse:
    """One table of the set's report as a file in `fmt` (as `manage.py verbalizer_report`
    prints it): the page's downloads and the API's."""
    if fmt not in DOCUMENTS or table not in TABLES:
        raise Http404
    text = report_as(verbalizer_report_cached(evaluation_set=evaluation_set), fmt, table)
    response = HttpResponse(text, content_type=DOCUMENTS[fmt])
    extension = "tex" if fmt == "latex" else fmt
    name = f"verbalizer-{evaluation_set.pk}" + ("" if table == "rows" else f"-{table}")
    response["Content-Disposition"] = f'attachment; filename="{name}.{extension}"'
    return response


@login_required
def report_download(
    request: HttpRequest, set_id: int, fmt: str, table: str = "rows"
) -> HttpResponse:
    return _report_file(_set(request, set_id), fmt, table)


def _human_answers_file(evaluation_set: EvaluationSet, user) -> HttpResponse:
    """Every person's answer, counted or not, with its review status and why it (not) counts,
    as CSV: the page's download and the API's. Crowd workers are named by their platform id
    only to whom `user`'s identity scope shows them (their study's makers, admins)."""
    scope = identity_scope(user=user)
    rows = human_answers_raw(evaluation_set=evaluation_set, scope=scope)
    return csv_download(rows, filename=f"verbalizer-{evaluation_set.pk}-human-answers.csv")


@login_required
@exports_limited(
    back=lambda set_id: (reverse("verbalizer-reports:detail", args=[set_id]), "The report")
)
def human_answers_download(request: HttpRequest, set_id: int) -> HttpResponse:
    return _human_answers_file(_set(request, set_id), request.user)


def _figure_file(evaluation_set: EvaluationSet, figure_name: str, image_format: str):
    """One of Figures 2-5 of the set's report as an SVG, PNG or PDF, from the figure cache: the
    page's and the API's; 404 for a figure the report has nothing to draw in."""
    if figure_name not in figures.FIGURES or image_format not in FIGURE_TYPES:
        raise Http404
    content = figures.figure_cached(
        evaluation_set=evaluation_set, name=figure_name, fmt=image_format
    )
    if content is None:
        raise Http404
    return HttpResponse(content, content_type=FIGURE_TYPES[image_format])


@login_required
@figure_csp
@figures_limited
def figure_download(request: HttpRequest, set_id: int, figure_name: str, image_format: str):
    return _figure_file(_set(request, set_id), figure_name, image_format)


@login_required
def replies_page(request: HttpRequest, set_id: int) -> HttpResponse:
    """Every raw reply next to what each rule read in it, filterable by system/mapping/mode."""
    evaluation_set = _set(request, set_id)
    answers = ModelAnswer.objects.filter(prompt__evaluation_set=evaluation_set).select_related(
        "system", "prompt__mapping", "prompt__item__dataset"
    )
    filters = {
        "dataset": "prompt__item__dataset__name",
        "mapping": "prompt__mapping__name",
        "system": "system__name",
        "mode": "prompt__mode",
    }
    options = {key: _values(answers, field) for key, field in filters.items()}
    chosen = {
        key: _as_offered(request.GET[key], options[key]) for key in filters if request.GET.get(key)
    }
    answers = answers.filter(**{filters[k]: v for k, v in chosen.items()}).order_by("pk")
    page = Paginator(answers, REPLIES_PER_PAGE).get_page(request.GET.get("page"))
    shown = []
    for answer in page:
        words = (answer.prompt.positive_word, answer.prompt.negative_word)
        codes = (parse_strict(answer.reply, *words), parse_lenient(answer.reply, *words))
        shown.append((answer, *(_read(code, words) for code in codes)))
    selects = [
        (key, key.capitalize(), _labelled(key, options[key], chosen.get(key)), chosen.get(key))
        for key in filters
    ]
    # The prompts page takes the same filters but the system's (a prompt is every system's).
    prompt_filters = {key: value for key, value in chosen.items() if key != "system"}
    prompts_url = reverse("verbalizer:set-prompts", args=[evaluation_set.pk])
    if prompt_filters:
        prompts_url += "?" + urlencode(prompt_filters)
    context = {"set": evaluation_set, "page": page, "shown": shown, "chosen": chosen}
    context |= {"prompts_url": prompts_url, "prompt_filters": prompt_filters}
    return render(request, "verbalizer/replies.html", {**context, "selects": selects})


def _values(answers, field: str) -> list[str]:
    return list(answers.order_by(field).values_list(field, flat=True).distinct())


def _as_offered(asked: str, offered: list[str]) -> str:
    """The set's own spelling of a value asked for in the URL ("Golden" is "golden"); a value
    the set does not have is kept, so the page shows it and finds nothing."""
    return next((value for value in offered if value.casefold() == asked.casefold()), asked)


def _labelled(key: str, offered: list[str], chosen: str | None) -> list[tuple[str, str]]:
    values = offered if chosen is None or chosen in offered else [*offered, chosen]
    if key == "mode":
        return [(value, dict(Mode.choices).get(value, value)) for value in values]
    return [(value, value) for value in values]


def _read(code: int, words: tuple[str, str]) -> str:
    return {1: words[0], 0: words[1]}.get(code, "invalid")


class VerbalizerReportApi(APIView):
    """GET the whole report of an evaluation set (rows, group/mapping/flipped tables, agreement,
    the slices of prompts people answered)."""

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def get(self, request, set_id: int):
        if not is_researcher(request.user):
            raise Http404  # the API answers 404 for both "missing" and "not yours"
        evaluation_set = _set(request, set_id)
        report = verbalizer_report_cached(evaluation_set=evaluation_set)
        tables = ("rows", "groups", "mappings", "flipped", "flipped_by_dataset")
        return ApiResponse({**report, **{table: flat_rows(report, table) for table in tables}})


class VerbalizerReportDownloadApi(APIView):
    content_negotiation_class = FileNegotiation

    @extend_schema(
        operation_id="verbalizer_sets_report_download",
        request=None,
        parameters=[
            OpenApiParameter("fmt", str, OpenApiParameter.PATH, enum=list(DOCUMENTS)),
            OpenApiParameter(
                "table",
                str,
                enum=list(TABLES),
                description="rows (accuracy, the default), agreement (people's Fleiss' kappa) "
                "or slices (the prompts people answered, models beside them).",
            ),
        ],
        responses={
            **{(200, content_type): OpenApiTypes.STR for content_type in DOCUMENTS.values()},
            404: OpenApiResponse(RefusalSerializer, description="No such set, or not yours."),
        },
        description="One table of an evaluation set's report as a file: json, csv, latex or "
        "md, the bytes of the report page's downloads and of `manage.py verbalizer_report`. "
        "Researchers and admins; anyone else gets 404.",
    )
    def get(self, request, set_id: int, fmt: str):
        if not is_researcher(request.user):
            raise Http404
        table = request.query_params.get("table", "rows")
        if table not in TABLES:
            detail = f"table must be one of {', '.join(TABLES)}, not {table!r}."
            return ApiResponse({"detail": detail, "field": "table"}, status=400)
        return _report_file(get_object_or_404(EvaluationSet, pk=set_id), fmt, table)


class VerbalizerHumanAnswersApi(APIView):
    content_negotiation_class = FileNegotiation

    @extend_schema(
        operation_id="verbalizer_sets_human_answers_download",
        request=None,
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            404: OpenApiResponse(RefusalSerializer, description="No such set, or not yours."),
        },
        description="Every person's answer to the set's prompts, counted or not, with its "
        "review status and why it (not) counts, as CSV: the bytes of the report page's "
        "human-answers.csv (crowd workers by platform id only to their study's makers and "
        "admins). Researchers and admins; anyone else gets 404.",
    )
    def get(self, request, set_id: int):
        if not is_researcher(request.user):
            raise Http404
        return _human_answers_file(get_object_or_404(EvaluationSet, pk=set_id), request.user)


class VerbalizerFigureApi(APIView):
    content_negotiation_class = FileNegotiation

    @figure_download_schema(
        operation_id="verbalizer_sets_figure_download",
        figure_param="figure_name",
        figures=figures.FIGURES,
        missing="No such set or figure, not yours, or nothing to draw in it yet.",
        description="One of Figures 2-5 of an evaluation set's report (groups, mappings, "
        "flipped, flipped_by_dataset) as svg, png or pdf, the bytes of the report page's "
        "figure. Researchers and admins; anyone else gets 404.",
    )
    @figure_csp  # an SVG opened on its own runs nothing, as the page's
    def get(self, request, set_id: int, figure_name: str, image_format: str):
        figure_rate_check(request)  # the report pages' figures' counter
        if not is_researcher(request.user):
            raise Http404
        evaluation_set = get_object_or_404(EvaluationSet, pk=set_id)
        return _figure_file(evaluation_set, figure_name, image_format)
