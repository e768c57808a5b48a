"""DRF endpoints of crowd work, for admins' scripts: preview and publish, progress, sync, review
and payment. Everyone else gets 404; errors are mapped by annotate.http.api_exception_handler."""

from __future__ import annotations

from decimal import Decimal

from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotate.crowd import limits, selectors, tasks
from annotate.crowd.models import HitExtensionStatus, PlatformCall
from annotate.crowd.platforms import platform_label, platform_names
from annotate.crowd.services import publishing, replacements, review
from annotate.crowd.services.expiry import ExpiryRun, expiry_run_of
from annotate.crowd.services.publishing import (
    SECONDS_AT_MOST,
    PublishSettings,
    default_qualifications,
)
from annotate.errors import NotFoundError, PublishError
from annotate.models import Batch
from annotate.roles import is_admin
from annotate.services.deferred_tasks import task_enqueue_on_commit
from annotate.verbalizer.selectors import study_review_rows


class AdminApi(APIView):
    def initial(self, request: Request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        if not is_admin(request.user):
            raise NotFoundError("Not found.")


@extend_schema_serializer(component_name="CrowdPreviewInput")
class PreviewSerializer(serializers.Serializer):
    platform = serializers.CharField()
    # As the publish page's form: no negative reward (a preview would quote a negative total).
    reward_usd = serializers.DecimalField(
        max_digits=8, decimal_places=2, min_value=Decimal(0), required=False
    )


def _preview(batch: Batch, data: dict, user) -> publishing.CostPreview:
    return publishing.publication_preview(
        batch=batch, platform_name=data["platform"], reward_usd=data.get("reward_usd"), user=user
    )


def _preview_payload(preview: publishing.CostPreview) -> dict:
    return {
        "platform": preview.platform,
        "tasks": preview.tasks,
        "assignments_per_task": preview.assignments_per_task,
        "tasks_in_batch": preview.tasks_in_batch,
        "assignments_taken": preview.assignments_taken,
        "assignments": preview.assignments,
        "reward_usd": str(preview.reward_usd),
        # null: MTurk's schedule (20%, 40% on HITs of 10+ assignments, at least $0.01), as `fee` says
        "fee_rate": None if preview.fee_rate is None else str(preview.fee_rate),
        "fee": preview.fee,
        "total_usd": str(preview.total_usd),
        "balance_usd": None if preview.balance_usd is None else str(preview.balance_usd),
        "affordable": preview.affordable,
        "paid_outside": preview.paid_outside,
        # The other platforms the batch is published on (their workers race for its slots).
        "published_elsewhere": list(preview.published_elsewhere),
        "published_elsewhere_note": preview.published_elsewhere_note,
    }


class PublishPreviewApi(AdminApi):
    @extend_schema(request=PreviewSerializer, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, batch_id: int) -> Response:
        batch = get_object_or_404(Batch, pk=batch_id)
        data = PreviewSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(_preview_payload(_preview(batch, data.validated_data, request.user)))


class PublishApi(AdminApi):
    @extend_schema_serializer(component_name="CrowdPublishInput")
    class InputSerializer(PreviewSerializer):
        # MTurk's limits, for every platform (annotate.crowd.limits).
        title = serializers.CharField(max_length=limits.TITLE_MAX_CHARS)
        description = serializers.CharField(max_length=limits.DESCRIPTION_MAX_CHARS)
        keywords = serializers.CharField(
            max_length=limits.KEYWORDS_MAX_CHARS, required=False, default="", allow_blank=True
        )
        assignment_duration_seconds = serializers.IntegerField(
            min_value=30, max_value=SECONDS_AT_MOST["assignment_duration_seconds"], default=3600
        )
        auto_approval_delay_seconds = serializers.IntegerField(
            min_value=0, max_value=SECONDS_AT_MOST["auto_approval_delay_seconds"], default=259200
        )
        lifetime_seconds = serializers.IntegerField(
            min_value=30, max_value=SECONDS_AT_MOST["lifetime_seconds"], default=604800
        )
        qualification_requirements = serializers.ListField(
            child=serializers.DictField(), required=False, max_length=limits.QUALIFICATIONS_MAX
        )
        completion_code = serializers.CharField(
            max_length=100, required=False, default="", allow_blank=True
        )
        completion_url = serializers.URLField(required=False, default="", allow_blank=True)
        confirm_total_usd = serializers.DecimalField(max_digits=12, decimal_places=2)

    @extend_schema(request=InputSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request, batch_id: int) -> Response:
        batch = get_object_or_404(Batch.objects.select_related("project"), pk=batch_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        preview = _preview(batch, values, request.user)
        if values["confirm_total_usd"] != preview.total_usd:
            raise PublishError(
                f"The cost is ${preview.total_usd}: send it as confirm_total_usd to publish."
            )
        if not preview.affordable:
            raise PublishError(
                f"The {platform_label(preview.platform)} account has ${preview.balance_usd}, "
                f"less than the ${preview.total_usd} this publication costs: nothing was "
                "published."
            )
        chosen = PublishSettings(
            title=values["title"],
            description=values["description"],
            keywords=values["keywords"],
            reward_usd=values.get("reward_usd"),
            assignment_duration_seconds=values["assignment_duration_seconds"],
            auto_approval_delay_seconds=values["auto_approval_delay_seconds"],
            lifetime_seconds=values["lifetime_seconds"],
            qualification_requirements=values.get("qualification_requirements")
            or default_qualifications(),
            completion_code=values["completion_code"],
            completion_url=values["completion_url"],
        )
        publication = publishing.publication_create(
            batch=batch,
            platform_name=values["platform"],
            chosen=chosen,
            base_url=publishing.task_base_url(request_base=request.build_absolute_uri("/")),
            user=request.user,
        )
        user_id = request.user.pk
        task_enqueue_on_commit(task=tasks.publish_publication, args=(publication.pk, user_id))
        return Response({"id": publication.pk}, status=status.HTTP_201_CREATED)


class PublicationApi(AdminApi):
    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, publication_id: int) -> Response:
        publication = selectors.publication_get(publication_id=publication_id)
        if publication.status in publishing.BUSY and publishing.publications_stalled_mark(
            now=timezone.now(), publication_id=publication.pk
        ):  # its publish went silent: "stalled", as the page shows it
            publication = selectors.publication_get(publication_id=publication_id)
        progress = selectors.publication_progress(publication=publication)
        return Response(
            {
                "id": publication.pk,
                "batch": publication.batch_id,
                "human_study": publication.human_study_id,
                "platform": publication.platform,
                "sandbox": publication.sandbox,  # test work: counts nowhere, nothing paid
                "status": publication.status,
                # why it ended so, and how many HITs are missing as stored now
                "error": selectors.publication_note(publication=publication, progress=progress),
                "hits_total": progress.total,
                "hits_created": progress.created,
                "hits_failed": progress.failed,
                "hits_missing": progress.missing,  # not made yet, or refused: what Resume makes
                # HITs workers may still take; of them, those whose expiry MTurk did not confirm
                "hits_live": progress.live,
                "hits_expiry_pending": progress.expiry_pending,
                # of those, HITs the platform has not answered about yet (no refusal stored)
                "hits_expiring": progress.expiring,
                "expiry_outcome": publication.expiry_outcome,  # what the last Expire came to
                "expiry": _expiry_payload(expiry_run_of(publication, now=publication.database_now)),
                "platforms": platform_names(),
            }
        )


def _expiry_payload(run: ExpiryRun) -> dict:
    """The last Expire's run: "" (never pressed), "asked" (its run not started), "running",
    "finished" (outcome says how), or "stopped" (silent for CROWD_EXPIRY_STALE_SECONDS: its
    worker killed or its task lost; Expire may be pressed again)."""
    return {
        "state": run.state,
        "asked_at": run.asked_at,
        "started_at": run.started_at,
        "last_sign_of_life_at": run.heartbeat_at,
        "finished_at": run.finished_at,
        "outcome": run.outcome,
    }


def _balance_payload(known) -> dict:
    return {
        "balance_usd": None if known is None else str(known.balance_usd),
        "balance_checked_at": None if known is None else known.checked_at,
    }


# The account balance as last asked of the platform, and when: the fields of every answer that
# shows it (the balance check, the resume quote, the replacements stored). A serializer showing
# it derives from this one, after a base with the fields it shows first (a base's fields come
# before the class's own) and before those it declares itself; `balance_help` says what the
# fields mean there (their descriptions in the API schema). No docstring: the schema would give
# it as every such serializer's description.
class BalanceSerializer(serializers.Serializer):
    balance_usd = serializers.DecimalField(max_digits=12, decimal_places=2, allow_null=True)
    balance_checked_at = serializers.DateTimeField(allow_null=True)

    balance_help: dict[str, str] = {}

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()  # copies of the declared fields: changing them is safe
        for name, text in self.balance_help.items():
            fields[name].help_text = text
        return fields


class PublicationBalanceApi(AdminApi):
    """Ask the publication's platform for the account balance now (the publication page's
    "Check balance"), and keep it: the GETs of the resume quote and of the replacements show
    the balance last checked, with its time, and ask the platform nothing."""

    @extend_schema_serializer(component_name="CrowdBalance")
    class OutputSerializer(BalanceSerializer):
        balance_help = {
            "balance_usd": "The account balance; null: the platform has none (a self-hosted link)."
        }

    @extend_schema(request=None, responses=OutputSerializer)
    def post(self, request: Request, publication_id: int) -> Response:
        publication = selectors.publication_get(publication_id=publication_id)
        review.require_admin(request.user)
        known = publishing.publication_balance_check(
            publication_id=publication.pk, user=request.user
        )
        return Response(_balance_payload(known))


class PublicationSyncApi(AdminApi):
    @extend_schema(request=None, responses={202: OpenApiTypes.OBJECT})
    def post(self, request: Request, publication_id: int) -> Response:
        publication = selectors.publication_get(publication_id=publication_id)
        user_id = request.user.pk
        task_enqueue_on_commit(task=tasks.sync_publication, args=(publication.pk, user_id))
        return Response({"queued": True}, status=status.HTTP_202_ACCEPTED)


@extend_schema_serializer(component_name="CrowdRefusal")
class RefusalSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What was refused and what to do.")


_RESUME_HELP = (
    "Resume a publication whose publish ended or stalled with HITs missing (stalled, partly "
    "published), as the publication page's Resume: GET quotes the missing HITs (not made yet, "
    "or refused; a deleted HIT is never made again) with the account balance as last checked "
    "(balance_checked_at; GET asks the platform nothing: POST .../balance/ checks it); POST "
    "with that total as confirm_total_usd asks the platform for the balance and starts the "
    "publish of those HITs (202), each HIT made once. "
    "Refused with 400 when the total is not the quote, the balance does not cover it, nothing "
    "is missing, or the publication is a self-hosted link; 409 while its publish still runs or "
    "when another resume started it a moment ago. Nothing is published when refused."
)


class PublicationResumeApi(AdminApi):
    __doc__ = _RESUME_HELP

    @extend_schema_serializer(component_name="CrowdResumeInput")
    class InputSerializer(serializers.Serializer):
        confirm_total_usd = serializers.DecimalField(
            max_digits=12,
            decimal_places=2,
            help_text="The total_usd of the quote (GET): what the missing HITs cost at most.",
        )

    class _MissingCost(serializers.Serializer):
        publication = serializers.IntegerField()
        status = serializers.CharField(help_text="The publication's status (Publication).")
        hits = serializers.IntegerField(help_text="HITs missing: not made yet, or refused.")
        assignments = serializers.IntegerField(help_text="Their MaxAssignments, summed.")
        total_usd = serializers.DecimalField(
            max_digits=12, decimal_places=2, help_text="What they cost at most, fee included."
        )
        fee = serializers.CharField(help_text="Which fee applies and why.")

    @extend_schema_serializer(component_name="CrowdResumeQuote")
    class QuoteSerializer(_MissingCost, BalanceSerializer):
        balance_help = {
            "balance_usd": "The account balance as last checked (POST .../balance/, a preview, "
            "a confirmation); null when never checked, or nothing is missing.",
            "balance_checked_at": "When that balance was asked of the platform.",
        }
        affordable = serializers.BooleanField(
            help_text="Whether that balance covers the total (true when it is unknown: the "
            "POST checks it)."
        )

    @extend_schema_serializer(component_name="CrowdResumeStarted")
    class StartedSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        status = serializers.CharField(help_text='"pending": its publish is queued.')

    @extend_schema(request=None, responses=QuoteSerializer, description=_RESUME_HELP)
    def get(self, request: Request, publication_id: int) -> Response:
        publication = selectors.publication_get(publication_id=publication_id)
        quote = publishing.publication_resume_quote(publication=publication, user=request.user)
        return Response(
            {
                "publication": publication.pk,
                "status": publication.status,
                "hits": quote.hits,
                "assignments": quote.assignments,
                "total_usd": str(quote.total_usd),
                "fee": quote.fee,
                "balance_usd": None if quote.balance_usd is None else str(quote.balance_usd),
                "balance_checked_at": quote.balance_checked_at,
                "affordable": quote.affordable,
            }
        )

    @extend_schema(
        request=InputSerializer,
        responses={
            202: StartedSerializer,
            400: OpenApiResponse(RefusalSerializer, description="Refused: nothing published."),
            409: OpenApiResponse(
                RefusalSerializer, description="Its publish runs: nothing published."
            ),
        },
        description=_RESUME_HELP,
    )
    def post(self, request: Request, publication_id: int) -> Response:
        publication = selectors.publication_get(publication_id=publication_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        review.require_admin(request.user)
        try:
            resumed = publishing.publication_resume(
                publication_id=publication.pk,
                confirm_total=data.validated_data["confirm_total_usd"],
                now=timezone.now(),
                user=request.user,
            )
        except PublishError as error:  # named as this endpoint's input, not the page's
            if error.field == "confirm_total":
                error.field = "confirm_total_usd"
            raise
        task_enqueue_on_commit(
            task=tasks.publish_publication, args=(publication.pk, request.user.pk)
        )
        return Response(
            {"id": resumed.pk, "status": resumed.status}, status=status.HTTP_202_ACCEPTED
        )


def _plan_payload(plan: replacements.ReplacementPlan) -> dict:
    return {
        "publication": plan.publication.pk,
        "hits": [
            {
                "hit_id": row.hit.hit_id,
                "task": row.hit.task_id,
                "prompt": row.hit.prompt_id,
                "still_needed": row.wanted,
                "still_offered": row.available,
                "add": row.add,
                "reopen": row.reopen,
                "accepted_not_here": row.unseen,
                "refused": row.refused,
            }
            for row in plan.rows
        ],
        "assignments": plan.assignments,
        "reopens": plan.reopens,
        "reward_usd": str(plan.reward_usd),
        "fee_rate": None if plan.fee_rate is None else str(plan.fee_rate),
        "fee": plan.fee,
        "total_usd": str(plan.total_usd),
        "balance_usd": None if plan.balance_usd is None else str(plan.balance_usd),
        "affordable": plan.affordable,
        "handed_back": plan.handed_back,
    }


class ReplacementsApi(AdminApi):
    """Workers in place of work that no longer counts: what is stored here (GET: what the tasks
    still need, the balance last checked; no platform call), the plan and its cost as the
    platform tells them (POST .../replacements/check/), asked for once its total is confirmed
    (POST confirm_total_usd)."""

    @extend_schema_serializer(component_name="CrowdReplacementsInput")
    class InputSerializer(serializers.Serializer):
        confirm_total_usd = serializers.DecimalField(max_digits=12, decimal_places=2)

    class _StillNeeded(serializers.Serializer):
        publication = serializers.IntegerField()
        still_needed_hits = serializers.IntegerField(
            help_text="Created HITs whose tasks (a study's prompts) still need workers, as "
            "stored here; how many their HITs still offer only the check asks."
        )
        still_needed_assignments = serializers.IntegerField()

    @extend_schema_serializer(component_name="CrowdReplacementsStored")
    class StoredSerializer(_StillNeeded, BalanceSerializer):
        balance_help = {"balance_usd": "The account balance as last checked; null: never."}

    @extend_schema(request=None, responses=StoredSerializer)
    def get(self, request: Request, publication_id: int) -> Response:
        publication = selectors.publication_get(publication_id=publication_id)
        needed = replacements.replacements_stored_need(
            publication_id=publication.pk, now=timezone.now(), user=request.user
        )
        known = publishing.balance_last_known(
            platform_name=publication.platform, sandbox=publication.sandbox
        )
        return Response(
            {
                "publication": publication.pk,
                "still_needed_hits": needed.hits,
                "still_needed_assignments": needed.assignments,
                **_balance_payload(known),
            }
        )

    @extend_schema(request=InputSerializer, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, publication_id: int) -> Response:
        publication = selectors.publication_get(publication_id=publication_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        done = replacements.replacements_create(
            publication_id=publication.pk,
            confirm_total=data.validated_data["confirm_total_usd"],
            now=timezone.now(),
            user=request.user,
        )
        return Response(
            {"added": done.added, "hits": done.hits, "reopened": done.reopened,
             "failed": done.failed, "stopped": done.stopped, "handed_back_note": done.handed_back}
        )  # fmt: skip


class ReplacementsCheckApi(AdminApi):
    """The plan and its cost as the platform tells them (the replacements page's Check): asks
    it about each created HIT whose task still needs work, and for the account balance. Nothing
    is spent; POST .../replacements/ with its total_usd asks for it."""

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, publication_id: int) -> Response:
        publication = selectors.publication_get(publication_id=publication_id)
        plan = replacements.replacements_plan(
            publication_id=publication.pk, now=timezone.now(), user=request.user
        )
        return Response(_plan_payload(plan))


_ADDITIONS_HELP = (
    "Assignments added to the publication's HITs in place of work that no longer counts, as "
    "the replacements page lists them (what is stored here: no platform call): what each cost, "
    "which are counted, and which an admin settles by hand (`to_settle`: pending, and MTurk "
    "may have forgotten its token, so its HIT cannot say whether it made it). The first "
    f"{replacements.ADDITIONS_SHOWN} additions; the totals count them all."
)


@extend_schema_serializer(component_name="CrowdAddition")
class AdditionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    hit_id = serializers.CharField()
    count = serializers.IntegerField(help_text="Assignments asked for.")
    reward_usd = serializers.DecimalField(
        max_digits=8, decimal_places=2, help_text="The reward per assignment it was asked at."
    )
    cost_usd = serializers.DecimalField(
        max_digits=12, decimal_places=2, help_text="What it costs once made, the fee included."
    )
    counted_usd = serializers.DecimalField(
        max_digits=12,
        decimal_places=2,
        help_text="What is counted as spent: its cost once done, else 0.00.",
    )
    status = serializers.ChoiceField(choices=HitExtensionStatus.choices)
    error = serializers.CharField(help_text="The platform's refusal (status failed).")
    created_at = serializers.DateTimeField()
    settled_by = serializers.CharField(
        allow_null=True, help_text="The admin who settled it by hand; null: not settled by hand."
    )
    settled_at = serializers.DateTimeField(allow_null=True)
    asked_again_until = serializers.DateTimeField(
        allow_null=True,
        help_text="Pending with its token kept: the next request for replacements asks for it "
        "again with that token (a no-op if MTurk made it), until about then.",
    )
    to_settle = serializers.BooleanField(
        help_text="Pending, its token forgotten: settle it (POST .../replacements/settle/) "
        "once compared with the HIT on the requester site."
    )


def _addition_payload(row: replacements.AdditionRow) -> dict:
    extension = row.extension
    return {
        "id": extension.pk,
        "hit_id": extension.hit.hit_id,
        "count": extension.count,
        "reward_usd": extension.reward_usd,
        "cost_usd": row.cost_usd,
        "counted_usd": row.counted_usd,
        "status": extension.status,
        "error": extension.error,
        "created_at": extension.created_at,
        "settled_by": extension.settled_by.get_username() if extension.settled_by else None,
        "settled_at": extension.settled_at,
        "asked_again_until": row.remembered_until,
        "to_settle": row.settle,
    }


class ReplacementAdditionsApi(AdminApi):
    __doc__ = _ADDITIONS_HELP

    @extend_schema_serializer(component_name="CrowdAdditions")
    class OutputSerializer(serializers.Serializer):
        publication = serializers.IntegerField()
        assignments = serializers.IntegerField(help_text="Assignments added: the done ones'.")
        hits = serializers.IntegerField(help_text="HITs they were added to.")
        total_usd = serializers.DecimalField(
            max_digits=12, decimal_places=2, help_text="What they cost, the fee included."
        )
        additions = AdditionSerializer(many=True)

    @extend_schema(request=None, responses=OutputSerializer, description=_ADDITIONS_HELP)
    def get(self, request: Request, publication_id: int) -> Response:
        publication = selectors.publication_get(publication_id=publication_id)
        additions = replacements.additions_overview(
            publication_id=publication.pk, now=timezone.now(), user=request.user
        )
        payload = {
            "publication": publication.pk,
            "assignments": additions.assignments,
            "hits": additions.hits,
            "total_usd": additions.total_usd,
            "additions": [_addition_payload(row) for row in additions.rows],
        }
        return Response(self.OutputSerializer(payload).data)


_SETTLE_HELP = (
    "Settle an addition the platform's HIT cannot tell about (`to_settle` in "
    ".../replacements/additions/), as the admin found it on the requester site, as the "
    "replacements page's buttons do: made (its assignments and cost counted, the HIT's "
    "assignments here grown by its count) or not_made (never asked for again, nothing counted). "
    "404 for an addition of another publication; 409, with nothing changed, for one settled "
    "already, one whose token MTurk still keeps (the next request for replacements asks for it "
    "again safely), made when the HIT on the platform has no room for it, or while a request "
    "for replacements runs on the publication."
)


class ReplacementSettleApi(AdminApi):
    __doc__ = _SETTLE_HELP

    @extend_schema_serializer(component_name="CrowdAdditionSettleInput")
    class InputSerializer(serializers.Serializer):
        addition = serializers.IntegerField(
            min_value=1,
            max_value=2**63 - 1,  # a database id: larger ones are no id, and overflow a query
            help_text="The addition's id (.../replacements/additions/).",
        )
        outcome = serializers.ChoiceField(
            choices=[("made", "The platform made it"), ("not_made", "It did not")]
        )

    @extend_schema(
        request=InputSerializer,
        responses={
            200: AdditionSerializer,
            400: OpenApiResponse(RefusalSerializer, description="Malformed: nothing changed."),
            404: OpenApiResponse(RefusalSerializer, description="No such addition here."),
            409: OpenApiResponse(RefusalSerializer, description="Refused: nothing changed."),
        },
        description=_SETTLE_HELP,
    )
    def post(self, request: Request, publication_id: int) -> Response:
        publication = selectors.publication_get(publication_id=publication_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        settled = replacements.hit_extension_settle(
            publication_id=publication.pk,
            extension_id=data.validated_data["addition"],
            made=data.validated_data["outcome"] == "made",
            now=timezone.now(),
            user=request.user,
        )
        row = replacements.AdditionRow(
            extension=settled,
            cost_usd=replacements.addition_cost(settled),
            remembered_until=None,
            settle=False,
        )
        return Response(AdditionSerializer(_addition_payload(row)).data)


class PublicationLinkApi(AdminApi):
    @extend_schema_serializer(component_name="CrowdLinkInput")
    class InputSerializer(serializers.Serializer):
        closed = serializers.BooleanField()
        anonymous_starts_limit = serializers.IntegerField(
            required=False,
            allow_null=True,
            default=None,
            min_value=0,
            max_value=review.STARTS_LIMIT_AT_MOST,
        )

    @extend_schema(request=InputSerializer, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, publication_id: int) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        publication = review.publication_link_set(
            publication_id=publication_id,
            user=request.user,
            now=timezone.now(),
            **data.validated_data,
        )
        return Response(
            {
                "id": publication.pk,
                "closed": publication.link_closed_at is not None,
                "anonymous_starts_limit": publication.anonymous_starts_limit,
            }
        )


class ReviewApi(AdminApi):
    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, publication_id: int) -> Response:
        publication = selectors.publication_get(publication_id=publication_id)
        rows = selectors.review_rows(publication=publication)
        rec = selectors.reconciliation(publication=publication)
        return Response(
            {
                "assignments": [
                    {
                        "id": row.assignment.pk,
                        "worker": row.worker.worker_id,
                        "worker_annotator": row.worker.pk,
                        "status": row.assignment.status,
                        "reject_reason": row.assignment.reject_reason,
                        "platform_status": row.platform_status,
                        "confirmation": row.confirmation,
                        "gold_correct": row.gold.correct if row.gold else None,
                        "gold_total": row.gold.total if row.gold else None,
                        "suggestion": row.suggestion,
                        "blocked": row.blocked,
                    }
                    for row in rows
                ],
                "answers": _study_answers(publication),
                "missing_here": [r.platform_assignment_id for r in rec.missing_here],
                "missing_on_platform": [a.pk for a in rec.missing_on_platform],
            }
        )


def _study_answers(publication) -> list[dict]:
    """A human study's crowd answers (one per HIT), as the review page shows them."""
    if publication.human_study_id is None:
        return []
    return [
        {
            "id": row.answer.pk,
            "worker": row.worker.worker_id,
            "worker_annotator": row.worker.pk,
            "prompt": row.answer.prompt_id,
            "word": row.answer.word,
            "correct": row.correct,
            "seconds": row.answer.seconds,
            "status": row.answer.status,
            "reject_reason": row.answer.reject_reason,
            "platform_status": row.platform_status,
            "confirmation": row.confirmation,
            "blocked": row.blocked,
        }
        for row in study_review_rows(publication=publication)
    ]


_REQUEST_TOKEN_HELP = (
    "Bonus only: 16 to 64 letters, digits, '-' or '_', new for each bonus. Sent again, the same "
    "token is the same bonus (paid once). Without one, a bonus of the same amount and reason "
    "as one made for this work in the last 24 hours is refused (409) as a retry."
)
_DECISION_CONFLICT_HELP = (
    "The work refuses it: already decided otherwise (approve, reject), not approved (bonus, "
    '"field": "assignment"), or a bonus without request_token like one made for it in the last '
    '24 hours (its id, status and time in `detail`, "field": "request_token"): to pay a '
    "second on purpose, send a new request_token. Nothing paid."
)


class AssignmentDecisionApi(AdminApi):
    action = ""

    @extend_schema_serializer(component_name="CrowdDecisionInput")
    class InputSerializer(serializers.Serializer):
        feedback = serializers.CharField(
            required=False,
            default="",
            allow_blank=True,
            help_text="Approve and reject: what the worker is sent (required to reject), at most "
            f"{review.FEEDBACK_MAX_CHARS} characters, MTurk's limit, for every platform; longer, "
            '400 with "field": "feedback", nothing stored or sent. Bonus: its reason, the same '
            "limit.",
        )
        amount_usd = serializers.DecimalField(
            max_digits=8,
            decimal_places=2,
            required=False,
            help_text="Bonus only: dollars; the assignment's bonuses together (paid and pending) "
            "at most CROWD_BONUS_MAX_USD (default 20.00); above it 400 with "
            '"field": "amount_usd", nothing paid.',
        )
        # A bonus sent again with the same token is the same bonus (paid once).
        request_token = serializers.CharField(
            required=False, default="", allow_blank=True, help_text=_REQUEST_TOKEN_HELP
        )

    @extend_schema(
        request=InputSerializer,
        responses={
            200: OpenApiTypes.OBJECT,
            409: OpenApiResponse(RefusalSerializer, description=_DECISION_CONFLICT_HELP),
        },
    )
    def post(self, request: Request, assignment_id: int) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values, user = data.validated_data, request.user
        if self.action == "approve":
            done = review.assignment_approve(
                assignment_id=assignment_id, user=user, feedback=values["feedback"]
            )
        elif self.action == "reject":
            done = review.assignment_reject(
                assignment_id=assignment_id, user=user, feedback=values["feedback"]
            )
        else:
            bonus = review.bonus_create(
                assignment_id=assignment_id,
                amount_usd=values.get("amount_usd") or Decimal(0),
                reason=values["feedback"],
                user=user,
                request_token=values["request_token"],
                now=timezone.now(),
            )
            bonus = review.bonus_pay(bonus_id=bonus.pk, user=user, now=timezone.now())
            return Response({"bonus": bonus.pk, "status": bonus.status, "error": bonus.error})
        return Response({"id": done.pk, "status": done.status})


class WorkerApi(AdminApi):
    """Block or unblock a crowd worker (`action`); WorkerNotifyApi messages one."""

    action = ""

    @extend_schema_serializer(component_name="CrowdWorkerInput")
    class InputSerializer(serializers.Serializer):
        reason = serializers.CharField(required=False, default="", allow_blank=True)

    @extend_schema(request=InputSerializer, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, annotator_id: int) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values, user = data.validated_data, request.user
        if self.action == "block":
            block = review.worker_block(
                annotator_id=annotator_id, reason=values["reason"], user=user
            )
            note = review.platform_not_told(block.annotator, done="blocked")
            return Response({"ok": True, "platform_note": note})
        done = review.worker_unblock(annotator_id=annotator_id, reason=values["reason"], user=user)
        return Response(
            {
                "ok": True,
                "restored": done.restored,
                "left_out": done.left_out,
                "platform_note": done.platform_note,
            }
        )


class WorkerNotifyApi(AdminApi):
    """Message one crowd worker through their platform."""

    @extend_schema_serializer(component_name="CrowdWorkerNotifyInput")
    class InputSerializer(serializers.Serializer):
        subject = serializers.CharField(
            required=False,
            default="",
            allow_blank=True,
            help_text=f"At most {limits.SUBJECT_MAX_CHARS} characters, MTurk's limit, for every "
            'platform; longer, 400 with "field": "subject", nothing sent.',
        )
        message = serializers.CharField(
            required=False,
            default="",
            allow_blank=True,
            help_text=f"At most {limits.MESSAGE_MAX_CHARS} characters, MTurk's limit, for every "
            'platform; longer, 400 with "field": "message", nothing sent.',
        )

    @extend_schema_serializer(component_name="CrowdWorkerNotified")
    class OutputSerializer(serializers.Serializer):
        failed = serializers.ListField(
            child=serializers.CharField(),
            help_text="Platform worker ids the platform could not reach.",
        )
        not_sent = serializers.ListField(
            child=serializers.CharField(),
            help_text="Web accounts (signed up on this site) sent nothing: they have no platform.",
        )
        unknown_ids = serializers.ListField(
            child=serializers.CharField(),
            help_text="Worker ids their platform never gives (typed into our task page's "
            "address), left out of its call: MTurk refuses a message naming one.",
        )

    @extend_schema(
        request=InputSerializer,
        responses={
            200: OutputSerializer,
            409: OpenApiResponse(
                RefusalSerializer,
                description="Nothing was sent: the worker is a web account, which no platform "
                "can message, has an id their platform never gives (which it refuses), or "
                "works for us on the other MTurk endpoint than the one MTURK_SANDBOX names now.",
            ),
        },
    )
    def post(self, request: Request, annotator_id: int) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        done = review.workers_notify(
            annotator_ids=[annotator_id],
            subject=data.validated_data["subject"],
            message=data.validated_data["message"],
            user=request.user,
        )
        return Response(
            {"failed": done.failed, "not_sent": done.not_sent, "unknown_ids": done.unknown_ids}
        )


class CallListApi(AdminApi):
    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        calls = PlatformCall.objects.select_related("user")[:200]
        return Response(
            [
                {
                    "at": call.created_at,
                    "user": call.user.username if call.user else None,
                    "platform": call.platform,
                    "operation": call.operation,
                    "request": call.request,
                    "ok": call.ok,
                    "error_code": call.error_code,
                    "result": call.result,
                }
                for call in calls
            ]
        )
