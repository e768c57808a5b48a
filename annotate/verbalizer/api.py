"""REST API of verbalizer manipulation: import a dataset's items, start a system's run on a set.
The report's API lives in evaluation.verbalizer.views."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.api import UploadField, UploadImportApi, upload_import_schema
from annotate.engine.api import (
    RUN_START_LIMITED,
    RefusalSerializer,
    SpendingCapField,
    run_start_answer,
)
from annotate.errors import FieldInputError
from annotate.http import api_upload_import
from annotate.roles import is_researcher
from annotate.verbalizer.models import ClassificationDataset, EvaluationSet, Mode
from annotate.verbalizer.services import runs
from annotate.verbalizer.services.imports import FORMATS, classification_import


class ItemsImportApi(UploadImportApi):
    """POST: import a file of items into a dataset, as the Verbalizer page's "Import items"
    form and `manage.py import_classification` do: every row or none (200 with what was
    imported; 400 naming the file's wrong lines and fields, nothing written)."""

    @extend_schema_serializer(component_name="ItemsImportInput")
    class InputSerializer(serializers.Serializer):
        dataset = serializers.CharField(
            max_length=200, help_text="A dataset made already (the Verbalizer page)."
        )
        format = serializers.ChoiceField(choices=FORMATS)
        upload = UploadField()

    @extend_schema_serializer(component_name="ItemsImported")
    class OutputSerializer(serializers.Serializer):
        file = serializers.CharField()
        dataset = serializers.CharField()
        created = serializers.IntegerField()
        positive = serializers.IntegerField()
        message = serializers.CharField()

    @upload_import_schema(InputSerializer, {200: OutputSerializer})
    def post(self, request: Request) -> Response:
        data = self.researcher_input(request)
        dataset = ClassificationDataset.objects.filter(name=data["dataset"]).first()
        if dataset is None:  # the page offers only datasets made already
            raise FieldInputError(f"No dataset named {data['dataset']!r}.", field="dataset")
        upload = data["upload"]
        summary, message = api_upload_import(
            upload,
            lambda path: classification_import(path=path, dataset=dataset.name, fmt=data["format"]),
            field="upload",
        )
        done = {**vars(summary), "file": upload.name, "message": message}
        return Response(self.OutputSerializer(done).data)


class RunApi(APIView):
    """POST: run a system over an evaluation set through an engine endpoint, in the background
    (202), as the set page's form does; `dry_run` answers 200 with the estimate and keeps
    nothing. Only admins may use an endpoint that costs money (403); an endpoint whose API key
    variable is unset in the server is refused (400, `field` endpoint), as every run's API. A run
    of a system that answered every prompt asked for already is refused (409) and none is made."""

    @extend_schema_serializer(component_name="VerbalizerRunInput")
    class InputSerializer(serializers.Serializer):
        system = serializers.CharField(max_length=200, help_text="The name the figures show.")
        endpoint = serializers.CharField(help_text="An engine endpoint's name.")
        modes = serializers.ListField(
            child=serializers.ChoiceField(choices=Mode.values),
            required=False,
            help_text="Some of the set's modes; left out: all of them.",
        )
        model_size_b = serializers.FloatField(
            min_value=0, required=False, allow_null=True, help_text="Billions; orders figures."
        )
        spending_cap_usd = SpendingCapField()
        dry_run = serializers.BooleanField(default=False)

    @extend_schema_serializer(component_name="VerbalizerRunStarted")
    class OutputSerializer(serializers.Serializer):
        run_id = serializers.IntegerField(allow_null=True, help_text="The system run's id.")
        engine_run_id = serializers.IntegerField(allow_null=True)
        url = serializers.CharField(allow_null=True)
        progress_url = serializers.CharField(allow_null=True)
        report_url = serializers.CharField()
        estimate = serializers.DictField(allow_null=True, help_text="Only for a dry run.")

    @extend_schema(
        request=InputSerializer,
        responses={
            202: OutputSerializer,
            200: OutputSerializer,
            403: OpenApiResponse(RefusalSerializer, description="A paid endpoint, not an admin."),
            409: OpenApiResponse(
                RefusalSerializer,
                description="The system answered every prompt asked for already: no run was made.",
            ),
            429: RUN_START_LIMITED,
        },
    )
    def post(self, request: Request, set_id: int) -> Response:
        if not is_researcher(request.user):
            raise Http404
        evaluation_set = get_object_or_404(EvaluationSet, pk=set_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        data = data.validated_data
        arguments = {
            "evaluation_set": evaluation_set,
            "system": data["system"],
            "endpoint": data["endpoint"],
            "modes": data.get("modes") or None,
            "model_size_b": data.get("model_size_b"),
            "spending_cap_usd": data.get("spending_cap_usd"),
            "created_by": request.user,
        }
        report_url = reverse("api-verbalizer-report", args=[evaluation_set.pk])
        # A refusal (AnnotateError, the engine's) is answered by api_exception_handler.
        if data["dry_run"]:
            estimate = runs.verbalizer_run_estimate(user=request.user, **arguments)
            return run_start_answer(self.OutputSerializer, estimate=estimate, report_url=report_url)
        system_run = runs.verbalizer_run_launch(user=request.user, **arguments)
        started = {
            "run_id": system_run.pk,
            "engine_run_id": system_run.engine_run_id,
            "url": reverse("engine:run-detail", args=[system_run.engine_run_id]),
            "progress_url": reverse("api-engine-run", args=[system_run.engine_run_id]),
        }
        return run_start_answer(self.OutputSerializer, started=started, report_url=report_url)
