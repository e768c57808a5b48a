"""JSON API of the LLM judge: start a run (or estimate it), and follow its progress."""

from __future__ import annotations

from django.db import transaction
from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.engine.api import (
    RUN_START_LIMITED,
    RefusalSerializer,
    RunSelectionInput,
    run_start_answer,
)
from annotate.roles import is_researcher
from annotate.selectors.labels import systems_by_name
from annotate.throttling import PollThrottle
from evaluation.errors import JudgeNotFoundError
from evaluation.models import JudgeRun
from evaluation.selectors.judge_configs import judge_config_and_benchmark_by_name
from evaluation.selectors.judge_runs import judge_run_progress
from evaluation.services.judge_runs import (
    judge_run_check_start,
    judge_run_create,
    judge_run_estimate_new,
    judge_run_get,
    judge_run_start,
)


class JudgeRunApi(APIView):
    """POST: create an InFoBench judge run and start it in the background (202).

    As the page's form (/judge/runs/new/): a judge by name, a benchmark by name, its systems by
    name, and which instructions (all, a subset, ids, a seeded sample). Only admins may use a
    judge whose endpoint costs money (403). `spending_cap_usd` stops the run before a call would
    pass it; `dry_run` answers 200 with the estimate and keeps nothing. When the judge has
    labels on some of the responses already, a run asks them again and replaces them: refused
    (400, `"field": "replace"`, nothing made) unless `replace` is true; the dry run's
    `estimate.labels_before` says so beforehand. `replace` alone replaces whatever is there when
    the run starts; `replace_seen` (the dry run's `labels_before.seen`) holds it to what the dry
    run said (else 409). While another run of the judge is queued or running over some of the
    same responses, refused with 409, nothing made.
    """

    @extend_schema_serializer(component_name="JudgeRunInput")
    class InputSerializer(RunSelectionInput):
        judge = serializers.CharField(help_text="A judge configuration's name (/judge/judges/).")
        benchmark = serializers.CharField()
        systems = serializers.ListField(child=serializers.CharField(), min_length=1)
        prompt_version = serializers.CharField(required=False)
        replace = serializers.BooleanField(
            default=False,
            help_text="Needed (true) when the judge has labelled some of these responses "
            "already: the run asks every question again, paid on a paid endpoint, and "
            "overwrites those labels. Without it such a run is refused with 400. Alone, it "
            "replaces whatever labels are there when the run starts (another run may have "
            "written more since the dry run): send replace_seen to hold it to what you saw.",
        )
        replace_seen = serializers.CharField(
            required=False,
            help_text="The dry run's estimate.labels_before.seen: with replace, the run starts "
            "only if the labels it replaces are still those the dry run counted (else 409, "
            '`"field": "replace"`, the detail giving the new count and seen, nothing made).',
        )

    @extend_schema_serializer(component_name="JudgeRunStarted")
    class OutputSerializer(serializers.Serializer):
        run_id = serializers.IntegerField(allow_null=True)
        engine_run_id = serializers.IntegerField(allow_null=True)
        url = serializers.CharField(allow_null=True)
        progress_url = serializers.CharField(allow_null=True)
        estimate = serializers.DictField(
            allow_null=True,
            help_text="Only for a dry run: units, units_done_before, calls, prompt_tokens, "
            "completion_tokens, cost_usd, and labels_before: null, or the responses the judge "
            "labelled already (responses_labelled of responses_total, by its runs run_ids, "
            "responses_imported of them with an imported label no run wrote; seen, to send "
            "back as replace_seen), which starting needs `replace` to overwrite.",
        )

    @extend_schema(
        request=InputSerializer,
        responses={
            202: OutputSerializer,
            200: OutputSerializer,
            400: OpenApiResponse(
                RefusalSerializer,
                description="Refused, nothing made (a malformed body: DRF's per-field lists "
                "instead): a choice that cannot be judged (`field` names it), or a run over "
                'responses the judge labelled already without `"replace": true` (`"field": '
                '"replace"`, the detail saying how many, by which runs, and what starting '
                "would cost).",
            ),
            409: OpenApiResponse(
                RefusalSerializer,
                description="Refused, nothing made: another run of the judge is queued or "
                "running over some of these responses (the detail names it), or `replace_seen` "
                'is not what the run would replace now (`"field": "replace"`).',
            ),
            429: RUN_START_LIMITED,
        },
    )
    def post(self, request: Request) -> Response:
        if not is_researcher(request.user):
            raise Http404
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        data = data.validated_data
        # A refusal (EvaluationError, AnnotateError) is answered by api_exception_handler.
        if data["dry_run"]:
            estimate = judge_run_estimate_new(create=lambda: self._create(request, data))
            return run_start_answer(self.OutputSerializer, estimate=estimate)
        with transaction.atomic():  # one commit; the run starts once it is committed
            run = self._create(request, data)
            judge_run_check_start(run=run, replace=data["replace"], seen=data.get("replace_seen"))
            judge_run_start(run=run, user=request.user)
        started = {
            "run_id": run.pk,
            "engine_run_id": run.engine_run_id,
            "url": reverse("judge:run-detail", args=[run.pk]),
            "progress_url": reverse("api-judge-run-progress", args=[run.pk]),
        }
        return run_start_answer(self.OutputSerializer, started=started)

    def _create(self, request: Request, data: dict) -> JudgeRun:
        config, benchmark = judge_config_and_benchmark_by_name(
            judge=data["judge"], benchmark=data["benchmark"]
        )
        return judge_run_create(
            config=config,
            benchmark=benchmark,
            systems=systems_by_name(names=data["systems"], benchmark=benchmark),
            user=request.user,
            subset=data.get("subset"),
            instruction_ids=data.get("instruction_ids") or None,
            sample=data.get("sample"),
            seed=data["seed"],
            prompt_version=data.get("prompt_version"),
            spending_cap_usd=data.get("spending_cap_usd"),
        )


class JudgeRunProgressApi(APIView):
    throttle_classes = [PollThrottle]  # polled while the work runs: the polls' rate, not the user's

    @extend_schema_serializer(component_name="JudgeRunProgress")
    class OutputSerializer(serializers.Serializer):
        run_id = serializers.IntegerField()
        status = serializers.CharField()
        status_display = serializers.CharField()
        active = serializers.BooleanField(help_text="Pending or running: poll again.")
        error = serializers.CharField(help_text="Why the run failed or stopped; blank otherwise.")
        percent = serializers.IntegerField(
            help_text="Questions answered or left unasked on purpose, in whole percent of "
            "questions_total (rounded down; 100 when there are none). It counts questions: the "
            "run's engine run (/api/engine/runs/<engine_run_id>/) counts conversations, so a "
            "stopped run may show 25 here and 12 there."
        )
        conversations_total = serializers.IntegerField(
            help_text="One conversation per response judged (the engine run's units)."
        )
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
        possibly_billed_usd = serializers.DecimalField(
            max_digits=12,
            decimal_places=6,
            help_text="Estimated cost of failed attempts the provider may have billed (a "
            "timeout after sending, a broken stream, a 5xx but 503): not in cost_usd; the "
            "spending cap counts both.",
        )
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
