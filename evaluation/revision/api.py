"""REST API of the KIWI classifiers and rating judge: start a run on an engine endpoint."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.engine.api import RUN_START_LIMITED, SpendingCapField, run_start_answer
from annotate.engine.services import endpoint_get, engine_run_estimate_new
from annotate.revision.models import Study
from annotate.roles import is_researcher
from evaluation.revision.judges import judge_run_launch, judge_run_prepare
from evaluation.revision.models import SEED_MAX, JudgeTask, ShotMode


class RevisionJudgeRunApi(APIView):
    """POST: create a classifier or rating-judge run and start it in the background (202).

    Only admins may use an endpoint that costs money (403 otherwise). `mode`, `shots` and `seed`
    are the rating judge's; k-shot needs `shots` of at least 1. `spending_cap_usd` stops the run
    before a call would pass it; `dry_run` answers 200 with the estimate and keeps nothing.
    """

    @extend_schema_serializer(component_name="RevisionJudgeRunInput")
    class InputSerializer(serializers.Serializer):
        task = serializers.ChoiceField(choices=JudgeTask.values)
        endpoint = serializers.CharField()
        mode = serializers.ChoiceField(choices=ShotMode.values, default=ShotMode.ZERO)
        shots = serializers.IntegerField(min_value=1, max_value=100, default=10)
        seed = serializers.IntegerField(min_value=0, max_value=SEED_MAX, default=0)
        spending_cap_usd = SpendingCapField()
        dry_run = serializers.BooleanField(default=False)

    @extend_schema_serializer(component_name="RevisionJudgeRunStarted")
    class OutputSerializer(serializers.Serializer):
        run_id = serializers.IntegerField(allow_null=True)
        engine_run_id = serializers.IntegerField(allow_null=True)
        url = serializers.CharField(allow_null=True)
        progress_url = serializers.CharField(allow_null=True)
        report_url = serializers.CharField()
        estimate = serializers.DictField(allow_null=True, help_text="Only for a dry run.")

    @extend_schema(
        request=InputSerializer,
        responses={202: OutputSerializer, 200: OutputSerializer, 429: RUN_START_LIMITED},
    )
    def post(self, request: Request, study_id: int) -> Response:
        if not is_researcher(request.user):
            raise Http404
        study = get_object_or_404(Study, pk=study_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        data = data.validated_data
        endpoint = endpoint_get(name=data["endpoint"])
        rating = data["task"] == JudgeTask.RATING
        arguments = {
            "study": study,
            "task": data["task"],
            "endpoint": endpoint,
            "user": request.user,
            "mode": data["mode"] if rating else "",
            "shots": data["shots"] if rating else 0,
            "seed": data["seed"],
            "spending_cap_usd": data.get("spending_cap_usd"),
            "now": timezone.now(),
        }
        # A refusal (EvaluationError, AnnotateError) is answered by api_exception_handler.
        report_url = reverse("api-revision-report", args=[study.pk])
        if data["dry_run"]:
            estimate = engine_run_estimate_new(
                create=lambda: judge_run_prepare(**arguments).engine_run
            )
            return run_start_answer(self.OutputSerializer, estimate=estimate, report_url=report_url)
        run = judge_run_launch(**arguments)
        started = {
            "run_id": run.pk,
            "engine_run_id": run.engine_run_id,
            "url": reverse("engine:run-detail", args=[run.engine_run_id]),
            "progress_url": reverse("api-engine-run", args=[run.engine_run_id]),
        }
        return run_start_answer(self.OutputSerializer, started=started, report_url=report_url)
