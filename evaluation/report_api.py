"""JSON API of the reports: a benchmark's whole report (schema in docs/reports.md)."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.engine.api import RefusalSerializer
from annotate.errors import FieldInputError
from annotate.http import FIGURE_TYPES, FileNegotiation, figure_csp
from annotate.models import Benchmark
from annotate.roles import is_researcher
from annotate.selectors.identities import identity_scope
from annotate.throttling import figure_rate_check
from evaluation import figures
from evaluation.conventions import ACC_MODES, DEFAULT_ACC, DEFAULT_UNKNOWN, UNKNOWN_MODES
from evaluation.errors import ReportError
from evaluation.report_formats import SOURCES_NA_REASONS
from evaluation.report_views import (
    DOCUMENTS,
    report_conventions_check,
    report_document_file,
    report_figure_file,
)
from evaluation.services.reports import report_cached

Num = serializers.FloatField(allow_null=True)


class LeaderboardRow(serializers.Serializer):
    system = serializers.CharField()
    source = serializers.CharField()
    source_kind = serializers.CharField()
    subset = serializers.CharField()
    drfr, ci_low, ci_high = Num, Num, Num
    yes = serializers.IntegerField()
    questions = serializers.IntegerField()
    responses_labelled = serializers.IntegerField(
        help_text="The system's responses in the subset the source labelled at all; fewer than "
        "responses: a partial DRFR, over those alone (a judge's run stopped part-way)."
    )
    responses = serializers.IntegerField(help_text="The system's responses in the subset.")
    provisional = serializers.BooleanField(
        help_text="The source is a judge whose labels mix an unfinished run with the run it "
        "replaced: its figures are provisional (the report's provisional notes say why)."
    )


class AgreementRow(serializers.Serializer):
    protocol = serializers.CharField()
    group = serializers.CharField()
    subset = serializers.CharField()
    fleiss_kappa, ci_low, ci_high, p_bar, p_e, raw_agreement = Num, Num, Num, Num, Num, Num
    items = serializers.IntegerField()
    dropped = serializers.IntegerField()
    annotators = serializers.IntegerField()
    undefined_reason = serializers.CharField(allow_blank=True)


class SourceRow(serializers.Serializer):
    source = serializers.CharField()
    source_kind = serializers.CharField()
    subset = serializers.CharField()
    acc, pld0, pld1, pld2, wpld, cost_usd, time_min = Num, Num, Num, Num, Num, Num, Num
    possibly_billed_usd = serializers.FloatField(
        allow_null=True,
        help_text="An LLM judge's only (null for people): what the failed attempts of the calls "
        "counted in cost_usd (a timeout after sending, a broken stream, a 5xx) may have been "
        "billed, the engine's estimate; not in cost_usd.",
    )
    compared = serializers.IntegerField()
    pairs = serializers.IntegerField()
    acc_na = serializers.ChoiceField(
        choices=list(SOURCES_NA_REASONS),
        allow_null=True,
        help_text="Why acc is null (null when it is not); docs/reports.md.",
    )
    pld_na = serializers.ChoiceField(
        choices=list(SOURCES_NA_REASONS),
        allow_null=True,
        help_text="Why pld0, pld1, pld2 and wpld are null (null when they are not).",
    )
    provisional = serializers.BooleanField(
        help_text="The source is a judge whose labels mix an unfinished run with the run it "
        "replaced: its figures are provisional (the report's provisional notes say why)."
    )


class ProvisionalNote(serializers.Serializer):
    source = serializers.CharField()
    note = serializers.CharField(
        help_text="Which runs its labels come from, what to do, and what its cost counts."
    )


CONVENTION_PARAMETERS = [
    OpenApiParameter("unknown", str, enum=list(UNKNOWN_MODES)),
    OpenApiParameter("acc", str, enum=list(ACC_MODES)),
]


class ReportApi(APIView):
    @extend_schema_serializer(component_name="Report")
    class OutputSerializer(serializers.Serializer):
        benchmark = serializers.CharField()
        unknown = serializers.ChoiceField(choices=UNKNOWN_MODES)
        unknown_convention = serializers.CharField()
        acc_unknown = serializers.ChoiceField(choices=ACC_MODES)
        generated_at = serializers.CharField()
        seed = serializers.IntegerField()
        n_resamples = serializers.IntegerField()
        systems = serializers.ListField(child=serializers.CharField())
        subsets = serializers.DictField(child=serializers.IntegerField())
        dataset = serializers.ListField(child=serializers.DictField())
        constraint_types = serializers.ListField(child=serializers.DictField())
        leaderboard = LeaderboardRow(many=True)
        agreement = AgreementRow(many=True)
        sources = SourceRow(many=True)
        constraints = serializers.ListField(child=serializers.DictField())
        domains = serializers.ListField(child=serializers.DictField())
        hard_domains = serializers.ListField(child=serializers.DictField())
        disagreement = serializers.ListField(child=serializers.DictField())
        positions = serializers.ListField(child=serializers.DictField())
        votes = serializers.ListField(child=serializers.DictField())
        provisional = ProvisionalNote(many=True)

    @extend_schema(parameters=CONVENTION_PARAMETERS, responses=OutputSerializer)
    def get(self, request: Request, benchmark_id: int) -> Response:
        return Response(_report_for(request, benchmark_id))


def _report_for(request: Request, benchmark_id: int, tables: list[str] | None = None) -> dict:
    """The benchmark's report under the query's conventions (`unknown`, `acc`), named as this
    reader may see them (`tables`: only those, see report_cached); 404 to anyone but researchers
    and admins, 400 on an unknown convention."""
    if not is_researcher(request.user):
        raise Http404
    benchmark = Benchmark.objects.filter(pk=benchmark_id).first()
    if benchmark is None:
        raise Http404
    unknown = request.query_params.get("unknown", DEFAULT_UNKNOWN)
    acc_unknown = request.query_params.get("acc", DEFAULT_ACC)
    report_conventions_check(unknown=unknown, acc_unknown=acc_unknown)
    scope = identity_scope(user=request.user)  # crowd worker ids only to whom they may show
    return report_cached(
        benchmark=benchmark, scope=scope, unknown=unknown, acc_unknown=acc_unknown, tables=tables
    )


def figure_download_schema(
    *, operation_id: str, figure_param: str, figures, missing: str, description: str
):
    """`extend_schema` of a report figure's GET: the figure's name and image format in the
    path, the image's bytes in each format, 404 (`missing`: what may not be there), 429 over
    the user's figure rate."""
    return extend_schema(
        operation_id=operation_id,
        request=None,
        parameters=[
            OpenApiParameter(figure_param, str, OpenApiParameter.PATH, enum=list(figures)),
            OpenApiParameter("image_format", str, OpenApiParameter.PATH, enum=list(FIGURE_TYPES)),
        ],
        responses={
            **{(200, content_type): OpenApiTypes.BINARY for content_type in FIGURE_TYPES.values()},
            404: OpenApiResponse(RefusalSerializer, description=missing),
            429: OpenApiResponse(
                RefusalSerializer,
                description="Too many figure downloads from this account (FIGURE_RATE, per "
                "user, the report pages' figures included); Retry-After says when to try again.",
            ),
        },
        description=description,
    )


class ReportDownloadApi(APIView):
    content_negotiation_class = FileNegotiation

    @extend_schema(
        operation_id="reports_download",
        request=None,
        parameters=[
            OpenApiParameter("fmt", str, OpenApiParameter.PATH, enum=list(DOCUMENTS)),
            *CONVENTION_PARAMETERS,
        ],
        responses={
            **{(200, content_type): OpenApiTypes.STR for _, content_type in DOCUMENTS.values()},
            400: OpenApiResponse(RefusalSerializer, description="An unknown convention."),
            404: OpenApiResponse(RefusalSerializer, description="No such benchmark or format."),
        },
        description="A benchmark's whole report as a file: json, csv, tex (LaTeX) or md, the "
        "bytes of the report page's downloads. Researchers and admins; anyone else gets 404.",
    )
    def get(self, request: Request, benchmark_id: int, fmt: str):
        if fmt not in DOCUMENTS:
            raise Http404
        return report_document_file(_report_for(request, benchmark_id), fmt)


class ReportFigureApi(APIView):
    content_negotiation_class = FileNegotiation

    @figure_download_schema(
        operation_id="reports_figure_download",
        figure_param="name",
        figures=figures.FIGURES,
        missing="No such benchmark or figure, or nothing to draw in it yet.",
        description="One figure of a benchmark's report (leaderboard, constraints, domains, "
        "disagreement, positions) as svg, png or pdf, the bytes of the report page's figure; "
        "`source` picks the label source of the leaderboard and radar figures, `unknown` and "
        "`acc` the conventions. Researchers and admins; anyone else gets 404.",
    )
    @figure_csp  # an SVG opened on its own runs nothing, as the page's
    def get(self, request: Request, benchmark_id: int, name: str, image_format: str):
        figure_rate_check(request)  # the report pages' figures' counter
        if name not in figures.FIGURES or image_format not in FIGURE_TYPES:
            raise Http404
        report = _report_for(request, benchmark_id, tables=[figures.figure_table(name)])
        source = request.query_params.get("source") or None
        try:
            return report_figure_file(report, name, image_format, source=source)
        except ReportError as error:  # an unknown label source
            raise FieldInputError(str(error), field="source") from error
