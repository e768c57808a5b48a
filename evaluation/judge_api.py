"""JSON API of the LLM judge: a run's progress."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.roles import is_researcher
from evaluation.errors import JudgeNotFoundError
from evaluation.selectors.judge_runs import judge_run_progress
from evaluation.services.judge_runs import judge_run_get


class JudgeRunProgressApi(APIView):
    @extend_schema_serializer(component_name="JudgeRunProgress")
    class OutputSerializer(serializers.Serializer):
        run_id = serializers.IntegerField()
        status = serializers.CharField()
        status_display = serializers.CharField()
        active = serializers.BooleanField(help_text="Pending or running: poll again.")
        error = serializers.CharField(help_text="Why the run failed or stopped; blank otherwise.")
        percent = serializers.IntegerField()
        conversations_total = serializers.IntegerField()
        conversations_done = serializers.IntegerField()
        conversations_failed = serializers.IntegerField()
        questions_total = serializers.IntegerField()
        questions_answered = serializers.IntegerField()
        questions_not_asked = serializers.IntegerField()
        questions_missing = serializers.IntegerField()
        unknown_answers = serializers.IntegerField()
        kept_going = serializers.IntegerField()
        retries = serializers.IntegerField()
        prompt_tokens = serializers.IntegerField()
        completion_tokens = serializers.IntegerField()
        cost_usd = serializers.DecimalField(max_digits=12, decimal_places=6)
        errors = serializers.ListField(child=serializers.DictField())
        started_at = serializers.CharField(allow_null=True)
        finished_at = serializers.CharField(allow_null=True)

    @extend_schema(request=None, responses=OutputSerializer)
    def get(self, request: Request, run_id: int) -> Response:
        if not is_researcher(request.user):
            raise Http404
        try:
            run = judge_run_get(run_id=run_id)
        except JudgeNotFoundError:
            raise Http404 from None
        progress = judge_run_progress(run=run).as_dict()
        return Response(self.OutputSerializer(progress).data)
