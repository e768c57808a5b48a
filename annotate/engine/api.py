"""REST API of the engine: create an endpoint, start a generation run (or estimate it), read a
run, stop it."""

from __future__ import annotations

import dataclasses

from django.db import transaction
from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.engine.errors import EndpointNameTakenError, EngineNotFoundError
from annotate.engine.forms import SpendingCapField as SpendingCapFormField
from annotate.engine.models import EngineRun
from annotate.engine.selectors import engine_run_progress
from annotate.engine.services import (
    AgainWarning,
    RunEstimate,
    endpoint_create,
    endpoint_get,
    engine_run_again_warning,
    engine_run_cap_set,
    engine_run_check_again,
    engine_run_estimate_new,
    engine_run_get,
    engine_run_has_work_left,
    engine_run_start,
    engine_run_stop,
)
from annotate.engine.services.generation import (
    generating_system_get_or_create,
    generation_run_create,
)
from annotate.engine.services.runs import (
    engine_run_check_may_start,
    engine_run_check_may_stop,
    engine_run_may_control,
)
from annotate.errors import NotFoundError
from annotate.http import error_payload
from annotate.models import Benchmark, Subset
from annotate.roles import ADMIN, ADMINS_ONLY, is_researcher, require_role
from annotate.throttling import PollThrottle


def estimate_data(estimate: RunEstimate) -> dict:
    """A run's estimate as the API answers it (dollars as a string, as every amount)."""
    return {**dataclasses.asdict(estimate), "cost_usd": str(estimate.cost_usd)}


def run_start_answer(
    output: type[serializers.Serializer],
    *,
    estimate: RunEstimate | None = None,
    started: dict | None = None,
    **shared,
) -> Response:
    """What the APIs that start a run answer: 202 with `started` (the run's ids, its page's
    `url` and its `progress_url`), or, for a dry run, 200 with `estimate` and every other field
    of `output` null (nothing was kept). `shared`: fields both answers carry."""
    if started is None:
        nothing = dict.fromkeys(name for name in output().fields if name not in shared)
        payload = {**nothing, **shared, "estimate": estimate_data(estimate)}
        return Response(output(payload).data)
    payload = {**started, **shared, "estimate": None}
    return Response(output(payload).data, status=status.HTTP_202_ACCEPTED)


@extend_schema_serializer(component_name="Refusal")
class RefusalSerializer(serializers.Serializer):
    """What every refusal answers (annotate.http.api_exception_handler)."""

    detail = serializers.CharField(help_text="What is wrong, for a person to act on.")
    field = serializers.CharField(
        required=False, help_text="The input at fault, when there is one."
    )


# What every API that starts or resumes a run answers over the user's run start limit.
RUN_START_LIMITED = OpenApiResponse(
    RefusalSerializer,
    description="Too many run starts from this account (RUN_START_RATE, per user, admins "
    "included): nothing was made or started. The Retry-After header says in how many seconds "
    "to try again.",
)


class RunProgressSerializer(serializers.Serializer):
    run_id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()
    active = serializers.BooleanField()
    preparing = serializers.BooleanField(
        help_text="The run is started but its units are not made yet (units_total is 0 until "
        "they are)."
    )
    unit_name = serializers.CharField(
        help_text="What one unit of this run is, plural: 'responses' (generation: one system's "
        "response to one instruction), 'conversations' (an InFoBench judge run: one per "
        "response judged, however many questions it asks), 'prompts' (verbalizer), 'turns' "
        "(KIWI judge). Every units_* count and percent counts these."
    )
    units_total = serializers.IntegerField()
    units_done = serializers.IntegerField()
    units_failed = serializers.IntegerField()
    units_skipped = serializers.IntegerField(
        help_text="Units found done before this run's first call for them, by other runs (or "
        "the work's rows already there): this run made no call for them."
    )
    units_done_earlier = serializers.IntegerField(
        help_text="Units this run did itself in its earlier starts, before its current (or "
        "last) start: after Run again, the units done before that start are units_skipped + "
        "units_done_earlier. Their calls and cost are in this run's totals."
    )
    percent_processed = serializers.IntegerField(
        help_text="Units ended, done or failed, in whole percent of units_total (rounded down)."
    )
    percent_done = serializers.IntegerField(
        help_text="Units done (done before this run included), in whole percent of units_total."
    )
    percent = serializers.IntegerField(
        help_text="The same as percent_processed: a percent of units (see unit_name), not of "
        "calls, nor of a judge run's questions (its own progress, "
        "/api/judge/runs/<id>/progress/, counts those)."
    )
    calls = serializers.IntegerField()
    calls_failed = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost_usd = serializers.CharField(
        help_text="What the run's stored calls cost (each as the server billed it, when known)."
    )
    possibly_billed_usd = serializers.CharField(
        help_text="Estimated cost of failed attempts the provider may have billed (a timeout "
        "after the request was sent, a broken stream, a 5xx other than 503): not in cost_usd; "
        "the spending cap counts both."
    )
    spending_cap_usd = serializers.CharField(allow_null=True)
    elapsed_seconds = serializers.FloatField(
        help_text="Seconds the run has been running, over all its starts (the time between a "
        "stop and the next start is not counted)."
    )
    error = serializers.CharField(allow_blank=True)


class RunDetailSerializer(RunProgressSerializer):
    """A run's progress with what running it again would overwrite (GET /api/engine/runs/<id>/),
    as its page shows before Run again."""

    replace_warning = serializers.CharField(
        allow_null=True,
        help_text="What running the run again (POST .../resume/) would overwrite that another "
        "run wrote, and what it costs (a judge run after a later run of its judge labelled "
        "the responses it has left): resume refuses it unless `replace` is true. Null when "
        "nothing, and while the run is active, has nothing left, or is on an endpoint this "
        "account may not start runs on (read only then).",
    )
    replace_seen = serializers.CharField(
        allow_blank=True,
        help_text="What to send back to resume as `replace_seen` (with `replace`), so it "
        "starts only if what it overwrites is still what replace_warning said (else 409); "
        '"" when replace_warning is null.',
    )


class SpendingCapField(serializers.DecimalField):
    """A run's spending cap in dollars, as the pages take it (annotate.engine.forms): 0 or more,
    the digits EngineRun.spending_cap_usd holds; null is no cap."""

    def __init__(self, **kwargs) -> None:
        stored = EngineRun._meta.get_field("spending_cap_usd")
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault("error_messages", {"min_value": SpendingCapFormField.NEGATIVE})
        super().__init__(
            max_digits=stored.max_digits, decimal_places=stored.decimal_places, min_value=0,
            **kwargs,
        )  # fmt: skip


class RunSelectionInput(serializers.Serializer):
    """What the APIs that start a run on a benchmark share with its page's form: which
    instructions (all, a subset, ids, a seeded sample), the spending cap, and whether only to
    estimate (`dry_run`: nothing kept)."""

    subset = serializers.ChoiceField(choices=Subset.values, required=False)
    instruction_ids = serializers.ListField(child=serializers.CharField(), required=False)
    sample = serializers.IntegerField(min_value=1, required=False)
    seed = serializers.IntegerField(min_value=0, default=0)  # as the pages' forms
    spending_cap_usd = SpendingCapField()
    dry_run = serializers.BooleanField(default=False)


def _run(user, run_id: int):
    if not is_researcher(user):
        raise Http404
    try:
        return engine_run_get(run_id=run_id)
    except EngineNotFoundError:
        raise Http404 from None


class RunApi(APIView):
    throttle_classes = [PollThrottle]  # polled while the work runs: the polls' rate, not the user's

    @extend_schema(request=None, responses=RunDetailSerializer)
    def get(self, request: Request, engine_run_id: int) -> Response:
        run = _run(request.user, engine_run_id)
        progress = engine_run_progress(run=run)
        replace = _again_warning(run, request.user, active=progress["active"])
        detail = {**progress, "replace_warning": replace.text or None, "replace_seen": replace.seen}
        return Response(RunDetailSerializer(detail).data)


def _again_warning(run: EngineRun, user, *, active: bool) -> AgainWarning:
    """What resuming `run` would overwrite that another run wrote (`engine_run_again_warning`),
    read as the run's page reads it: only once it has ended with work left, for who may start
    it (the polls of an active run read nothing more)."""
    if active or not engine_run_may_control(user=user, endpoint=run.endpoint):
        return AgainWarning()
    if not engine_run_has_work_left(run=run):
        return AgainWarning()
    return engine_run_again_warning(run=run)


class RunStopApi(APIView):
    @extend_schema(
        request=None,
        responses={
            200: RunProgressSerializer,
            409: OpenApiResponse(
                RefusalSerializer, description="The run has ended: nothing was changed."
            ),
        },
        description="Ask a pending or running run to stop (a pending one stops at once, a "
        "running one after its calls in flight). A run that has ended (done, failed, stopped) "
        "is refused with 409, changing nothing.",
    )
    def post(self, request: Request, engine_run_id: int) -> Response:
        run = _run(request.user, engine_run_id)
        engine_run_check_may_stop(user=request.user, endpoint=run.endpoint)
        engine_run_stop(run=run)
        run.refresh_from_db()
        return Response(RunProgressSerializer(engine_run_progress(run=run)).data)


class RunResumeApi(APIView):
    @extend_schema_serializer(component_name="RunResumeInput")
    class InputSerializer(serializers.Serializer):
        spending_cap_usd = SpendingCapField(
            help_text="The cap the run goes on with (null: none); left out: unchanged. A run "
            "stopped by its cap stops again at once unless it is raised."
        )
        replace = serializers.BooleanField(
            default=False,
            help_text="Needed (true) when what the run has left would overwrite labels another "
            "run wrote (a judge run after a later run of its judge labelled its responses; "
            "GET /api/engine/runs/<id>/ says so in replace_warning). Without it such a run is "
            "refused with 400. Alone, it replaces whatever is there when the run starts: send "
            "replace_seen to hold it to what you read.",
        )
        replace_seen = serializers.CharField(
            required=False,
            allow_blank=True,
            help_text="The run's replace_seen (GET /api/engine/runs/<id>/): with replace, the "
            "run starts only if what it overwrites is still what replace_warning said (else "
            '409, `"field": "replace"`, the detail giving the new sentence and replace_seen, '
            'nothing changed); "" holds it to overwriting nothing. Left out: not checked.',
        )

    @extend_schema(
        request=InputSerializer,
        responses={
            202: RunProgressSerializer,
            400: OpenApiResponse(
                RefusalSerializer,
                description="Refused, nothing changed (a malformed body: DRF's per-field lists "
                "instead): what the run has left would overwrite labels another run wrote and "
                '`"replace": true` was not sent (`"field": "replace"`, the detail saying how '
                "many, by which runs, and what running it again would cost).",
            ),
            409: OpenApiResponse(
                RefusalSerializer,
                description="Done, nothing left to run, or another run still writes what it "
                "would (a judge run while another run of its judge is queued or running over "
                "the same responses), or `replace_seen` is not what it would overwrite now "
                '(`"field": "replace"`): nothing was changed.',
            ),
            429: RUN_START_LIMITED,
        },
        description="Run a stopped or failed run again: only its missing units are done (as "
        "'Run again' on the run's page); a paid endpoint's run by an admin only. A done run "
        "with nothing left is refused (409), changing nothing. A judge run whose missing "
        "questions a later run of its judge labelled is refused (400, field replace) unless "
        '`"replace": true`; with `replace_seen` (the run\'s, from GET /api/engine/runs/<id>/) '
        "only if that is still what it overwrites (else 409, field replace).",
    )
    def post(self, request: Request, engine_run_id: int) -> Response:
        run = _run(request.user, engine_run_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        with transaction.atomic():  # the run starts once this commits; a refusal changes nothing
            # The check (a judge run's: its judge's row) before the cap (the run's row), in the
            # order the start takes them: a resume with a cap and one without at the same
            # instant otherwise each held the lock the other waited for (a deadlock).
            engine_run_check_again(
                run=run,
                replace=data.validated_data["replace"],
                seen=data.validated_data.get("replace_seen"),
            )
            if "spending_cap_usd" in data.validated_data:
                cap = data.validated_data["spending_cap_usd"]
                engine_run_cap_set(run=run, cap=cap, user=request.user)
            engine_run_start(run=run, user=request.user)
        data = RunProgressSerializer(engine_run_progress(run=run)).data
        return Response(data, status=status.HTTP_202_ACCEPTED)


class EndpointCreateApi(APIView):
    """POST: create an endpoint (admins only), as the New endpoint page does (201).

    Each field is the page's and is checked by the same service (`endpoint_create`); a refusal
    is a 400 naming its `field`. A name an endpoint has already (in any capitals) is refused
    with `field` "name", the endpoint that has it (`endpoint_id`, its page's `url`) and nothing
    made.
    """

    @extend_schema_serializer(component_name="EndpointInput")
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        model = serializers.CharField(max_length=200)
        base_url = serializers.CharField(
            required=False, allow_blank=True, help_text="Blank: the offline fake model."
        )
        api_key_env = serializers.CharField(required=False, allow_blank=True)
        temperature = serializers.FloatField(required=False)
        max_tokens = serializers.IntegerField(required=False, allow_null=True)
        top_p = serializers.FloatField(required=False, allow_null=True)
        seed = serializers.IntegerField(required=False, allow_null=True)
        stop = serializers.ListField(child=serializers.CharField(), required=False)
        stream = serializers.BooleanField(required=False)
        timeout_seconds = serializers.FloatField(required=False)
        concurrency = serializers.IntegerField(required=False)
        requests_per_minute = serializers.IntegerField(required=False)
        tokens_per_minute = serializers.IntegerField(required=False)
        max_retries = serializers.IntegerField(required=False)
        price_prompt_per_1k = serializers.DecimalField(
            max_digits=12, decimal_places=6, required=False
        )
        price_completion_per_1k = serializers.DecimalField(
            max_digits=12, decimal_places=6, required=False
        )

    @extend_schema_serializer(component_name="EndpointCreated")
    class OutputSerializer(serializers.Serializer):
        endpoint_id = serializers.IntegerField()
        name = serializers.CharField()
        url = serializers.CharField(help_text="The endpoint's page.")

    @extend_schema_serializer(component_name="EndpointRefusal")
    class RefusalOutput(RefusalSerializer):
        endpoint_id = serializers.IntegerField(
            required=False, help_text="With field 'name': the endpoint that has the name."
        )
        url = serializers.CharField(required=False, help_text="That endpoint's page.")

    @extend_schema(
        request=InputSerializer,
        responses={
            201: OutputSerializer,
            400: OpenApiResponse(
                RefusalOutput, description="A field refused, named by `field`: nothing made."
            ),
        },
    )
    def post(self, request: Request) -> Response:
        require_role(request.user, ADMIN, message=ADMINS_ONLY)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            endpoint = endpoint_create(**data.validated_data)
        except EndpointNameTakenError as error:
            taken = error.endpoint
            payload = {
                **error_payload(error),
                "endpoint_id": taken.pk,
                "url": reverse("engine:endpoint-edit", args=[taken.pk]),
            }
            return Response(payload, status=error.http_status)
        url = reverse("engine:endpoint-edit", args=[endpoint.pk])
        output = {"endpoint_id": endpoint.pk, "name": endpoint.name, "url": url}
        return Response(self.OutputSerializer(output).data, status=status.HTTP_201_CREATED)


class GenerationRunApi(APIView):
    """POST: create a generation run and start it (202), or with dry_run only estimate it.

    Refusals name the input at fault in `field` (benchmark, system, endpoint, a selection
    field), as the judge's API does. A run with nothing to call (every response asked for is
    there already) is refused with 409 and no run is made.
    """

    @extend_schema_serializer(component_name="GenerationRunInput")
    class InputSerializer(RunSelectionInput):
        benchmark = serializers.CharField()
        system = serializers.CharField(max_length=200)
        endpoint = serializers.CharField()
        replace = serializers.BooleanField(default=False)

    @extend_schema_serializer(component_name="GenerationRunStarted")
    class OutputSerializer(serializers.Serializer):
        run_id = serializers.IntegerField(allow_null=True)
        url = serializers.CharField(allow_null=True)
        progress_url = serializers.CharField(allow_null=True)
        estimate = serializers.DictField(allow_null=True)

    @extend_schema(
        request=InputSerializer,
        responses={
            202: OutputSerializer,
            200: OutputSerializer,
            409: OpenApiResponse(
                RefusalSerializer,
                description="Every response asked for is there already: no run was made.",
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
        if data["dry_run"]:
            # Nothing is left behind, not even the system the run would have made.
            estimate = engine_run_estimate_new(create=lambda: self._create(request, data))
            return run_start_answer(self.OutputSerializer, estimate=estimate)
        with transaction.atomic():  # one commit; the run starts once it is committed
            run = self._create(request, data)
            engine_run_start(run=run, user=request.user)
        started = {
            "run_id": run.pk,
            "url": reverse("engine:run-detail", args=[run.pk]),
            "progress_url": reverse("api-engine-run", args=[run.pk]),
        }
        return run_start_answer(self.OutputSerializer, started=started)

    def _create(self, request: Request, data: dict) -> EngineRun:
        try:
            benchmark = Benchmark.objects.get(name=data["benchmark"])
        except Benchmark.DoesNotExist:
            raise NotFoundError(
                f"Field 'benchmark': no benchmark named {data['benchmark']!r}.", field="benchmark"
            ) from None
        try:
            endpoint = endpoint_get(name=data["endpoint"])
        except EngineNotFoundError:
            raise EngineNotFoundError(
                f"Field 'endpoint': no endpoint named {data['endpoint']!r}.", field="endpoint"
            ) from None
        engine_run_check_may_start(user=request.user, endpoint=endpoint)
        system = generating_system_get_or_create(name=data["system"], endpoint=endpoint)
        return generation_run_create(
            benchmark=benchmark,
            systems=[system],
            endpoint=endpoint,
            user=request.user,
            subset=data.get("subset"),
            instruction_ids=data.get("instruction_ids") or None,
            sample=data.get("sample"),
            seed=data["seed"],
            replace=data["replace"],
            spending_cap_usd=data.get("spending_cap_usd"),
        )
