"""REST API of the researchers' revision actions: send a sample of turns for re-rating, import
KIWI sessions, upload a study's questions."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.api import UploadField, UploadImportApi, upload_import_schema
from annotate.engine.api import RefusalSerializer
from annotate.errors import FieldInputError, ImportFileError
from annotate.http import api_upload_import
from annotate.revision.models import Study
from annotate.revision.selectors import rerate_sent_count, study_annotators
from annotate.revision.services.imports import sessions_import, study_upload
from annotate.revision.services.reratings import RerateSampleError, reratings_sample
from annotate.roles import is_researcher


class RerateApi(APIView):
    """POST: send a seeded random sample of the study's finished turns for re-rating (201).

    `annotators` are usernames of annotator accounts; a turn never goes to the annotator of its
    own session. The same study state, annotators and seed draw the same sample as
    `manage.py revision_rerate`.

    A retry is safe only with `sent_before`: how many of the study's turns were sent before this
    request (0 for the first sample, then the previous reply's `study_sent`). If more were sent
    since, the request was sent already: 409 naming what went, nothing more sent. Without it
    every request sends a new sample, so a retried request sends a second one.
    """

    @extend_schema_serializer(component_name="RerateInput")
    class InputSerializer(serializers.Serializer):
        size = serializers.IntegerField(min_value=1)
        annotators = serializers.ListField(child=serializers.CharField(), min_length=1)
        seed = serializers.IntegerField(min_value=0, default=0)
        sent_before = serializers.IntegerField(
            min_value=0,
            required=False,
            help_text="The study's sent count this request expects (0, or the last `study_sent`): "
            "a retry finding more is refused (409) and sends nothing.",
        )

    @extend_schema_serializer(component_name="RerateSent")
    class OutputSerializer(serializers.Serializer):
        sent = serializers.IntegerField()
        study_sent = serializers.IntegerField(help_text="The study's turns sent, this sample too.")
        reratings = serializers.ListField(child=serializers.DictField())

    @extend_schema(
        request=InputSerializer,
        responses={
            201: OutputSerializer,
            409: OpenApiResponse(RefusalSerializer, description="Sent already (`sent_before`)."),
        },
    )
    def post(self, request: Request, study_id: int) -> Response:
        if not is_researcher(request.user):
            raise Http404
        study = get_object_or_404(Study, pk=study_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        names = data.validated_data["annotators"]
        users = list(study_annotators(study=study).filter(username__in=names))
        unknown = sorted(set(names) - {user.username for user in users})
        if unknown:
            raise serializers.ValidationError(
                {"annotators": [f"no annotator account named {', '.join(unknown)}"]}
            )
        try:
            sent = reratings_sample(
                study=study,
                annotators=users,
                size=data.validated_data["size"],
                seed=data.validated_data["seed"],
                now=timezone.now(),
                sent_before=data.validated_data.get("sent_before"),
            )
        except RerateSampleError as error:
            raise serializers.ValidationError({error.field: [str(error)]}) from None
        payload = {
            "sent": len(sent),
            "study_sent": rerate_sent_count(study=study),
            "reratings": [
                {"id": r.pk, "turn": r.turn_id, "annotator": r.annotator.username} for r in sent
            ],
        }
        return Response(self.OutputSerializer(payload).data, status=status.HTTP_201_CREATED)


def _study_name(data: dict) -> str:
    """The upload's study name, refused when blank (400 naming 'study')."""
    name = data["study"].strip()
    if not name:
        raise serializers.ValidationError({"study": ["the study needs a name"]})
    return name


class SessionsImportApi(UploadImportApi):
    """POST: import KIWI sessions (JSON Lines) into a study, made if new, as the revision upload
    page ("Sessions (KIWI format)") and `manage.py import_sessions` do: every line or none (200
    with what was imported; 400 naming the file's wrong lines and fields, nothing written);
    sessions stored already are left as they are."""

    @extend_schema_serializer(component_name="SessionsImportInput")
    class InputSerializer(serializers.Serializer):
        study = serializers.CharField(max_length=200, help_text="The study's name.")
        file = UploadField()

    @extend_schema_serializer(component_name="SessionsImported")
    class OutputSerializer(serializers.Serializer):
        study_id = serializers.IntegerField()
        file = serializers.CharField()
        rows = serializers.IntegerField()
        created = serializers.IntegerField()
        unchanged = serializers.IntegerField()
        skipped = serializers.IntegerField(
            help_text="Lines repeating a session earlier in the file: it is imported once."
        )
        message = serializers.CharField()
        report_url = serializers.CharField()

    @upload_import_schema(InputSerializer, {200: OutputSerializer})
    def post(self, request: Request) -> Response:
        data = self.researcher_input(request)
        name, upload = _study_name(data), data["file"]
        summary, message = api_upload_import(
            upload,
            lambda path: sessions_import(path=path, study_name=name),
            field="file",
            suffix=".jsonl",
        )
        study = Study.objects.get(name=name)
        done = {
            **vars(summary),
            "study_id": study.pk,
            "file": upload.name,
            "message": message,
            "report_url": reverse("api-revision-report", args=[study.pk]),
        }
        return Response(self.OutputSerializer(done).data)


class StudyQuestionsImportApi(UploadImportApi):
    """POST: add questions with their documents (JSON Lines) and systems to a study, made if
    new, as the revision upload page ("Questions with documents") and `manage.py import_study`
    do: every line or none (201 with the study and what was imported; 400 naming the file's
    wrong lines and fields, nothing written); questions stored already are left as they are.
    Only an admin may give a system an endpoint that costs money (403)."""

    @extend_schema_serializer(component_name="StudyQuestionsImportInput")
    class InputSerializer(serializers.Serializer):
        study = serializers.CharField(max_length=200, help_text="The study's name.")
        file = UploadField()
        systems = serializers.ListField(
            child=serializers.CharField(max_length=500),
            required=False,
            help_text="NAME or NAME=ENDPOINT (an engine endpoint; NAME alone: the offline fake "
            "model), as import_study's --system: repeat the field, or separate with commas as "
            "the upload page's Systems.",
        )

    @extend_schema_serializer(component_name="StudyQuestionsImported")
    class OutputSerializer(serializers.Serializer):
        study_id = serializers.IntegerField()
        url = serializers.CharField(help_text="The study's report page.")
        report_url = serializers.CharField(help_text="The study's report in the API.")
        file = serializers.CharField()
        rows = serializers.IntegerField()
        created = serializers.IntegerField()
        unchanged = serializers.IntegerField()
        message = serializers.CharField()

    @upload_import_schema(
        InputSerializer,
        {
            201: OutputSerializer,
            403: OpenApiResponse(
                RefusalSerializer,
                description="A system on a paid endpoint, not an admin. Nothing was written.",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.researcher_input(request)
        name, upload = _study_name(data), data["file"]
        systems = [
            spec.strip()
            for value in data.get("systems", [])
            for spec in value.split(",")
            if spec.strip()
        ]
        try:
            summary, message = api_upload_import(
                upload,
                lambda path: study_upload(
                    path=path, study_name=name, systems=systems, user=request.user
                ),
                field="file",
                suffix=".jsonl",
            )
        except ImportFileError as error:
            if error.path != "--system":
                raise
            # The command's option is this API's field.
            raise FieldInputError(
                f"systems: {error.problem}. Nothing was written.", field="systems"
            ) from None
        study = Study.objects.get(name=name)
        done = {
            **vars(summary),
            "study_id": study.pk,
            "url": reverse("revision-reports:report", args=[study.pk]),
            "report_url": reverse("api-revision-report", args=[study.pk]),
            "file": upload.name,
            "message": message,
        }
        return Response(self.OutputSerializer(done).data, status=status.HTTP_201_CREATED)
