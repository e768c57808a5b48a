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
from annotate.http import FIGURE_TYPES
from annotate.models import Benchmark
from annotate.roles import is_researcher
from annotate.selectors.identities import identity_scope
from evaluation.conventions import ACC_MODES, DEFAULT_ACC, DEFAULT_UNKNOWN, UNKNOWN_MODES
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
    compared = serializers.IntegerField()
    pairs = serializers.IntegerField()


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

    @extend_schema(
        parameters=[
            OpenApiParameter("unknown", str, enum=list(UNKNOWN_MODES)),
            OpenApiParameter("acc", str, enum=list(ACC_MODES)),
        ],
        responses=OutputSerializer,
    )
    def get(self, request: Request, benchmark_id: int) -> Response:
        if not is_researcher(request.user):
            raise Http404
        benchmark = Benchmark.objects.filter(pk=benchmark_id).first()
        if benchmark is None:
            raise Http404
        unknown = request.query_params.get("unknown", DEFAULT_UNKNOWN)
        acc_unknown = request.query_params.get("acc", DEFAULT_ACC)
        for field, value, modes in (
            ("unknown", unknown, UNKNOWN_MODES),
            ("acc", acc_unknown, ACC_MODES),
        ):
            if value not in modes:
                detail = f"{field} must be one of {', '.join(modes)}, not {value!r}."
                return Response({"detail": detail, "field": field}, status=400)
        scope = identity_scope(user=request.user)  # crowd worker ids only to whom they may show
        return Response(
            report_cached(
                benchmark=benchmark, scope=scope, unknown=unknown, acc_unknown=acc_unknown
            )
        )


def figure_download_schema(
    *, operation_id: str, figure_param: str, figures, missing: str, description: str
):
    """`extend_schema` of a report figure's GET: the figure's name and image format in the
    path, the image's bytes in each format, 404 (`missing`: what may not be there)."""
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
        },
        description=description,
    )
