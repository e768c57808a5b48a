"""REST API of the KIWI classifiers and rating judge: start a run on an engine endpoint."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.engine.services import endpoint_get
from annotate.revision.models import Study
from annotate.roles import is_researcher
from evaluation.errors import EvaluationError
from evaluation.revision.judges import judge_run_launch
from evaluation.revision.models import JudgeTask, ShotMode


class RevisionJudgeRunApi(APIView):
    """POST: create a classifier or rating-judge run and start it in the background (202).

    Only admins may use an endpoint that costs money (403 otherwise). `mode`, `shots` and `seed`
    are the rating judge's; k-shot needs `shots` of at least 1.
    """

    @extend_schema_serializer(component_name="RevisionJudgeRunInput")
    class InputSerializer(serializers.Serializer):
        task = serializers.ChoiceField(choices=JudgeTask.values)
        endpoint = serializers.CharField()
        mode = serializers.ChoiceField(choices=ShotMode.values, default=ShotMode.ZERO)
        shots = serializers.IntegerField(min_value=1, max_value=100, default=10)
        seed = serializers.IntegerField(min_value=0, default=0)

    @extend_schema_serializer(component_name="RevisionJudgeRunStarted")
    class OutputSerializer(serializers.Serializer):
        run_id = serializers.IntegerField()
        engine_run_id = serializers.IntegerField()
        url = serializers.CharField()
        progress_url = serializers.CharField()
        report_url = serializers.CharField()

    @extend_schema(request=InputSerializer, responses={202: OutputSerializer})
    def post(self, request: Request, study_id: int) -> Response:
        if not is_researcher(request.user):
            raise Http404
        study = get_object_or_404(Study, pk=study_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        data = data.validated_data
        endpoint = endpoint_get(name=data["endpoint"])
        rating = data["task"] == JudgeTask.RATING
        try:
            run = judge_run_launch(
                study=study,
                task=data["task"],
                endpoint=endpoint,
                user=request.user,
                mode=data["mode"] if rating else "",
                shots=data["shots"] if rating else 0,
                seed=data["seed"],
                now=timezone.now(),
            )
        except EvaluationError as error:
            return Response({"detail": str(error)}, status=error.http_status)
        payload = {
            "run_id": run.pk,
            "engine_run_id": run.engine_run_id,
            "url": reverse("engine:run-detail", args=[run.engine_run_id]),
            "progress_url": reverse("api-engine-run", args=[run.engine_run_id]),
            "report_url": reverse("api-revision-report", args=[study.pk]),
        }
        return Response(self.OutputSerializer(payload).data, status=status.HTTP_202_ACCEPTED)
