"""DRF endpoints of annotation work, for scripts and other front ends.

Session authentication with CSRF (DRF's default for SessionAuthentication). Errors are our own
exceptions, turned into responses by annotate.http.api_exception_handler.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.http import StreamingHttpResponse
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.errors import NotFoundError, NoWorkError, PermissionDeniedError
from annotate.http import FileNegotiation, api_upload_import, csv_download
from annotate.models import (
    DECIDED_KINDS,
    Benchmark,
    ImportJob,
    ImportKind,
    ImportStatus,
    Project,
    ProjectMode,
    System,
)
from annotate.roles import ANNOTATOR, RESEARCHER, has_role, is_admin, is_researcher
from annotate.selectors import benchmarks as benchmark_selectors
from annotate.selectors import work as work_selectors
from annotate.services import assignments as assignment_services
from annotate.services import projects as project_services
from annotate.services.import_jobs import (
    import_file,
    import_job_create,
    import_jobs_fail_stale,
    import_upload_check,
    is_csv_upload,
)
from annotate.services.projects import InstructionSelection, Selection
from annotate.services.submissions import assignment_submit
from annotate.throttling import (
    AnnotatorWorkThrottle,
    AnonRateThrottle,
    PollThrottle,
    UploadThrottle,
    UserRateThrottle,
)


def _require_admin(request: Request) -> None:
    if not is_admin(request.user):
        raise PermissionDeniedError("Only admins create or change projects.")


def _annotator(request: Request):
    if not has_role(request.user, ANNOTATOR):
        raise NotFoundError("Only annotators have tasks.")
    return assignment_services.annotator_for_user(user=request.user)


class SelectionSerializer(serializers.Serializer):
    selection = serializers.ChoiceField(choices=Selection.CHOICES, default=Selection.ALL)
    external_ids = serializers.ListField(child=serializers.CharField(), default=list)
    per_subset = serializers.IntegerField(min_value=1, required=False, default=0)
    seed = serializers.IntegerField(default=0)

    @staticmethod
    def selection_of(data: dict) -> InstructionSelection:
        return InstructionSelection(
            kind=data["selection"],
            external_ids=data["external_ids"],
            per_subset=data["per_subset"],
            seed=data["seed"],
        )


class ProjectCreateApi(APIView):
    @extend_schema_serializer(component_name="ProjectCreateInput")
    class InputSerializer(SelectionSerializer):
        name = serializers.CharField(max_length=200)
        benchmark = serializers.PrimaryKeyRelatedField(queryset=Benchmark.objects.all())
        systems = serializers.PrimaryKeyRelatedField(queryset=System.objects.all(), many=True)
        mode = serializers.ChoiceField(choices=ProjectMode.values, default=ProjectMode.DRFR)
        assignments_per_task = serializers.IntegerField(min_value=1, max_value=100, default=3)
        allotted_minutes = serializers.IntegerField(min_value=1, max_value=1440, default=60)
        guidelines = serializers.CharField(allow_blank=True, default="")
        researchers = serializers.PrimaryKeyRelatedField(
            queryset=User.objects.filter(groups__name=RESEARCHER), many=True, default=list
        )

    @extend_schema(request=InputSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        _require_admin(request)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        project = project_services.project_create(
            name=data["name"],
            benchmark=data["benchmark"],
            systems=data["systems"],
            selection=SelectionSerializer.selection_of(data),
            mode=data["mode"],
            assignments_per_task=data["assignments_per_task"],
            allotted_minutes=data["allotted_minutes"],
            guidelines=data["guidelines"],
            researchers=data["researchers"],
            created_by=request.user,
        )
        return Response({"id": project.id, "name": project.name}, status=201)


class BatchCreateApi(APIView):
    @extend_schema_serializer(component_name="BatchCreateInput")
    class InputSerializer(SelectionSerializer):
        name = serializers.CharField(max_length=200)

    @extend_schema(request=InputSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request, project_id: int) -> Response:
        _require_admin(request)
        project = work_selectors.project_get_for_researcher(
            project_id=project_id, user=request.user
        )
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        batch = project_services.batch_create(
            project=project, name=data["name"], selection=SelectionSerializer.selection_of(data)
        )
        return Response({"id": batch.id, "tasks": batch.tasks.count()}, status=201)


class BenchmarkListApi(APIView):
    @extend_schema(
        request=None,
        responses=OpenApiTypes.OBJECT,
        description="Every benchmark (researchers): id, name, instruction count, the systems with "
        "responses, and where its report is read.",
    )
    def get(self, request: Request) -> Response:
        if not is_researcher(request.user):
            raise NotFoundError("Only researchers read benchmarks.")
        systems = benchmark_selectors.benchmark_systems_by_benchmark()
        return Response(
            [
                {
                    "id": benchmark.pk,
                    "name": benchmark.name,
                    "description": benchmark.description,
                    "instructions": benchmark.instruction_count,
                    "systems": systems.get(benchmark.pk, []),
                    "report": reverse("api-report", args=[benchmark.pk]),
                }
                for benchmark in benchmark_selectors.benchmark_list_with_counts()
            ]
        )


_SUBMITTED_HELP = (
    "Submitted and holding its task's slot (not rejected, the worker not blocked, no sandbox "
    "test work), crowd platform work still waiting for its platform's confirmation included."
)
_LATE_HELP = (
    "Submitted after its claim lapsed and its task was filled (or confirmed by its crowd "
    "platform only after that): kept, never counted."
)
_UNCONFIRMED_HELP = (
    "Released unconfirmed work only: crowd platform work whose slot a sync took back because "
    "the platform's listing of its HIT did not have it, and that the platform has not confirmed "
    "since: kept, and counted only if the platform confirms it while its task has a slot. Work "
    "waiting for its platform's confirmation that still holds its slot is among the submitted "
    "work. Not late work."
)
_REJECTED_HELP = "Rejected in review: counted nowhere."
_BLOCKED_HELP = (
    "Submitted (not rejected) by a crowd worker blocked now: kept, counted in no result while "
    "the block lasts (an unblock counts it again). Work submitted in time still holds its "
    "task's slot until it is rejected. Not among the submitted, late or unconfirmed work."
)
_SANDBOX_HELP = (
    "Submitted through a HIT of a publication made on MTurk's requester sandbox: test work by "
    "test accounts, counted nowhere and paid by nobody. Not among the submitted, late, "
    "unconfirmed, rejected or blocked work."
)
_TASKS_DONE_HELP = (
    "Tasks whose assignments per task all count in results: submitted in time, not rejected, "
    "the worker not blocked, and confirmed by the crowd platform that handed them out."
)


@extend_schema_serializer(component_name="ProjectProgressAnnotator")
class ProgressRowSerializer(serializers.Serializer):
    """One annotator's line of a project's progress."""

    annotator = serializers.CharField(source="annotator__name")
    worker_blocked = serializers.BooleanField(
        help_text="A crowd worker blocked now: none of their work counts while the block lasts."
    )
    submitted = serializers.IntegerField(help_text=_SUBMITTED_HELP)
    live = serializers.IntegerField(help_text="Claimed, not submitted, not expired.")
    late = serializers.IntegerField(help_text=_LATE_HELP)
    unconfirmed = serializers.IntegerField(help_text=_UNCONFIRMED_HELP)
    rejected = serializers.IntegerField(help_text=_REJECTED_HELP)
    blocked = serializers.IntegerField(help_text=_BLOCKED_HELP)
    sandbox = serializers.IntegerField(help_text=_SANDBOX_HELP)
    returned = serializers.IntegerField()
    active_seconds = serializers.FloatField()


class ProjectProgressApi(APIView):
    throttle_classes = [PollThrottle]  # polled while the work runs: the polls' rate, not the user's

    @extend_schema_serializer(component_name="ProjectProgress")
    class OutputSerializer(serializers.Serializer):
        project = serializers.IntegerField()
        tasks_total = serializers.IntegerField()
        tasks_done = serializers.IntegerField(help_text=_TASKS_DONE_HELP)
        assignments_submitted = serializers.IntegerField(help_text=_SUBMITTED_HELP)
        assignments_live = serializers.IntegerField()
        assignments_late = serializers.IntegerField(help_text=_LATE_HELP)
        assignments_unconfirmed = serializers.IntegerField(help_text=_UNCONFIRMED_HELP)
        assignments_rejected = serializers.IntegerField(help_text=_REJECTED_HELP)
        assignments_blocked = serializers.IntegerField(help_text=_BLOCKED_HELP)
        assignments_sandbox = serializers.IntegerField(help_text=_SANDBOX_HELP)
        per_annotator = ProgressRowSerializer(many=True)

    @extend_schema(request=None, responses=OutputSerializer)
    def get(self, request: Request, project_id: int) -> Response:
        project = work_selectors.project_get_for_researcher(
            project_id=project_id, user=request.user
        )
        progress = work_selectors.project_progress(project=project, now=timezone.now())
        per_annotator = [
            {**row, "active_seconds": row["active_seconds"] or 0} for row in progress.per_annotator
        ]
        return Response(
            self.OutputSerializer(
                {**vars(progress), "project": project.id, "per_annotator": per_annotator}
            ).data
        )


class ProjectLabelsApi(APIView):
    content_negotiation_class = FileNegotiation  # a CSV, whatever Accept asks

    @extend_schema(
        request=None,
        responses={(200, "text/csv"): OpenApiTypes.STR},
        description="Every label and direct score of the project as CSV, late submissions marked.",
    )
    def get(self, request: Request, project_id: int) -> StreamingHttpResponse:
        project = work_selectors.project_get_for_researcher(
            project_id=project_id, user=request.user
        )
        return csv_download(
            work_selectors.project_label_rows(project=project),
            filename=f"project-{project.id}-labels.csv",
        )


def _task_payload(page: work_selectors.TaskPage) -> dict:
    """The task as the annotator sees it: positions and labels, never a system name or id."""
    instruction = page.instruction
    return {
        "assignment": page.assignment.id,
        "status": page.assignment.status,
        "expires_at": page.assignment.expires_at,
        "mode": page.project.mode,
        "phase": page.phase,
        "guidelines": page.guidelines,
        "instruction": instruction.text,
        "input": instruction.input_text,
        "fields": page.field_names,
        "responses": [
            {
                "position": item.position,
                "label": item.label,
                "text": item.text,
                "score_field": item.score_name if page.asks_scores else None,
                "questions": [
                    {"field": q.name, "position": q.position, "text": q.text}
                    for q in item.questions
                ],
            }
            for item in page.responses
        ],
    }


class ClaimNextApi(APIView):
    throttle_classes = [AnnotatorWorkThrottle]

    @extend_schema(
        request=None,
        responses={
            201: OpenApiResponse(OpenApiTypes.OBJECT, description="A task claimed now."),
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="The live claim you hold already in this project (asking again "
                "claims nothing new).",
            ),
        },
        description="Claim the next task of the project, or get back the one you hold: 201 "
        "when this request made the claim, 200 when it returns the live one you had.",
    )
    def post(self, request: Request, project_id: int) -> Response:
        annotator = _annotator(request)
        project = Project.objects.filter(pk=project_id).first()
        if project is None:
            raise NotFoundError("No such project.")
        try:
            assignment, made = assignment_services.assignment_claim_next_made(
                annotator=annotator, project=project, now=timezone.now()
            )
        except NoWorkError:
            # As the pages' start-next: a project never offered to them is missing, unnamed.
            if work_selectors.project_hidden_from(annotator=annotator, project=project):
                raise NotFoundError("No such project.") from None
            raise
        page = work_selectors.task_page_get(assignment_id=assignment.id, user=request.user)
        return Response(_task_payload(page), status=201 if made else 200)


class AssignmentApi(APIView):
    throttle_classes = [AnnotatorWorkThrottle]

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, assignment_id: int) -> Response:
        page = work_selectors.task_page_get(assignment_id=assignment_id, user=request.user)
        return Response(_task_payload(page))


class AssignmentSubmitApi(APIView):
    throttle_classes = [AnnotatorWorkThrottle]

    @extend_schema_serializer(component_name="SubmitInput")
    class InputSerializer(serializers.Serializer):
        answers = serializers.DictField(child=serializers.CharField(allow_blank=True))
        active_seconds = serializers.FloatField(default=0)

    @extend_schema(request=InputSerializer, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, assignment_id: int) -> Response:
        assignment = work_selectors.assignment_get_for_annotator(
            assignment_id=assignment_id, user=request.user
        )
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = assignment_submit(
            assignment_id=assignment.id,
            annotator=assignment.annotator,
            answers=serializer.validated_data["answers"],
            active_seconds=serializer.validated_data["active_seconds"],
            now=timezone.now(),
        )
        return Response(
            {
                "outcome": result.outcome,
                "status": result.assignment.status,
                "is_late": result.assignment.is_late,
            }
        )


class AssignmentReturnApi(APIView):
    throttle_classes = [AnnotatorWorkThrottle]

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, assignment_id: int) -> Response:
        assignment = work_selectors.assignment_get_for_annotator(
            assignment_id=assignment_id, user=request.user
        )
        returned = assignment_services.assignment_return(
            assignment_id=assignment.id, annotator=assignment.annotator, now=timezone.now()
        )
        return Response({"status": returned.status})


@extend_schema_field(OpenApiTypes.BINARY)
class UploadField(serializers.FileField):
    """A file sent as multipart/form-data (documented as binary, as a script sends it)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("allow_empty_file", True)  # the importer's refusal names an empty file
        super().__init__(**kwargs)


@extend_schema_serializer(component_name="ImportRefusal")
class ImportRefusalSerializer(serializers.Serializer):
    """A refused import (annotate.http.error_payload): the message, and for a wrong file each
    wrong line with its field."""

    class WrongLine(serializers.Serializer):
        line = serializers.IntegerField(allow_null=True, help_text="Null: the whole file.")
        field = serializers.CharField(allow_null=True)
        problem = serializers.CharField()

    detail = serializers.CharField(help_text="What is wrong, ending 'Nothing was written.'")
    field = serializers.CharField(required=False, help_text="The input or the file's field.")
    file = serializers.CharField(required=False, help_text="The file's name, as sent.")
    errors = WrongLine(many=True, required=False)
    more = serializers.IntegerField(required=False, help_text="Wrong lines found, not named.")


@extend_schema_serializer(component_name="ImportJob")
class ImportJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField(help_text="queued, running, done or failed.")
    active = serializers.SerializerMethodField(help_text="Queued or running: poll again.")
    file = serializers.CharField(source="original_name")
    message = serializers.CharField(
        help_text="What the import did, or why it failed (each wrong line and field)."
    )
    rows = serializers.IntegerField()
    created = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    status_url = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField(help_text="The import's page.")

    def get_active(self, job: ImportJob) -> bool:
        return job.status in (ImportStatus.QUEUED, ImportStatus.RUNNING)

    def get_status_url(self, job: ImportJob) -> str:
        return reverse("annotate-api:import", args=[job.pk])

    def get_url(self, job: ImportJob) -> str:
        return reverse("annotate:import-detail", args=[job.pk])


def upload_import_schema(input_serializer, responses: dict, **kwargs):
    """`extend_schema` of a file import's POST: a multipart body, the given answers, and 400
    with the refusal naming the file's wrong lines and fields."""
    refused = OpenApiResponse(ImportRefusalSerializer, description="Nothing was written.")
    return extend_schema(
        request={"multipart/form-data": input_serializer},
        responses=dict(sorted({**responses, 400: refused}.items())),
        **kwargs,
    )


class UploadImportApi(APIView):
    """A researcher's file to import, sent as multipart/form-data: counted against the upload
    pages' limit (UPLOAD_RATE) as well as the API's; anyone else gets 404. Subclasses declare
    their InputSerializer and read it with `researcher_input`."""

    parser_classes = [MultiPartParser]
    throttle_classes = [UserRateThrottle, AnonRateThrottle, UploadThrottle]
    InputSerializer: type[serializers.Serializer]

    def researcher_input(self, request: Request) -> dict:
        """The upload's validated fields (400 naming a wrong one); 404 for a non-researcher."""
        if not is_researcher(request.user):
            raise NotFoundError("Only researchers import files.")
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return data.validated_data


class ImportApi(UploadImportApi):
    """POST: import a file, as the Import page (/benchmarks/imports/) does: instructions,
    responses, labels or direct scores.

    A file up to API_IMPORT_INLINE_BYTES is imported in the request: 200 with what it did, or
    400 naming the file and each wrong line and field, nothing written. A larger one is stored
    and imported in the background (202), as every upload of the page is: poll `status_url`.
    """

    @extend_schema_serializer(component_name="ImportInput")
    class InputSerializer(serializers.Serializer):
        kind = serializers.ChoiceField(choices=ImportKind.values)
        benchmark_name = serializers.CharField(max_length=200)
        system_name = serializers.CharField(
            max_length=200, required=False, default="",
            help_text="Responses, and labels in evaluation JSON Lines: the system.",
        )  # fmt: skip
        annotator_name = serializers.CharField(
            max_length=200, required=False, default="",
            help_text="Labels in evaluation JSON Lines: the annotator.",
        )  # fmt: skip
        annotator_kind = serializers.ChoiceField(
            choices=[kind.value for kind in DECIDED_KINDS], required=False, default="",
            help_text="The kind of annotators the file makes (else as in the file).",
        )  # fmt: skip
        upload = UploadField(
            help_text="The file; labels are read as CSV when its name ends in .csv, else as "
            "evaluation JSON Lines.",
        )

    @extend_schema_serializer(component_name="ImportDone")
    class OutputSerializer(serializers.Serializer):
        file = serializers.CharField()
        rows = serializers.IntegerField()
        created = serializers.IntegerField()
        unchanged = serializers.IntegerField()
        message = serializers.CharField()

    @upload_import_schema(InputSerializer, {200: OutputSerializer, 202: ImportJobSerializer})
    def post(self, request: Request) -> Response:
        data = self.researcher_input(request)
        names = {key: data[key] for key in ("benchmark_name", "system_name", "annotator_name")}
        upload = data["upload"]
        import_upload_check(kind=data["kind"], upload=upload, **names)
        if upload.size > settings.API_IMPORT_INLINE_BYTES:
            job = import_job_create(
                kind=data["kind"], upload=upload, user=request.user,
                annotator_kind=data["annotator_kind"], **names,
            )  # fmt: skip
            return Response(ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
        summary, message = api_upload_import(
            upload,
            lambda path: import_file(
                kind=data["kind"], path=path, annotator_kind=data["annotator_kind"], **names
            ),
            field="upload",
            suffix=".csv" if is_csv_upload(upload) else ".jsonl",
        )
        done = {**vars(summary), "file": upload.name, "message": message}
        return Response(self.OutputSerializer(done).data)


class ImportJobApi(APIView):
    throttle_classes = [PollThrottle]  # polled while the work runs: the polls' rate, not the user's

    @extend_schema(
        request=None,
        responses=ImportJobSerializer,
        description="An import queued by POST /api/annotate/imports/ (or the Import page): "
        "poll until `active` is false; `message` names each wrong line of a failed one.",
    )
    def get(self, request: Request, job_id: int) -> Response:
        if not is_researcher(request.user):
            raise NotFoundError("Only researchers read imports.")
        import_jobs_fail_stale(now=timezone.now())  # as the page: a silent worker's job fails
        job = ImportJob.objects.filter(pk=job_id).first()
        if job is None:
            raise NotFoundError("No such import.")
        return Response(ImportJobSerializer(job).data)
