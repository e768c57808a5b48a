from collections.abc import Iterator
from contextlib import contextmanager

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth import admin as auth_admin
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.template.defaultfilters import pluralize
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from annotate import models


class SaysWhyReadOnly:
    """Say on an existing row's page why some of its fields cannot be changed here
    (`read_only_why`), above them: the greyed fields alone read as a fault of the site. A row
    never deleted says why on its delete address (`delete_why`), in the admin's layout, to a
    user who may see it: Django's bare 403 there read as the user lacking a role."""

    read_only_why = ""
    delete_why = ""

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or not self.read_only_why:
            return fieldsets
        (name, options), *rest = fieldsets
        return [(name, {**options, "description": self.read_only_why}), *rest]

    def delete_view(self, request, object_id, extra_context=None):
        obj = self.get_object(request, unquote(object_id)) if self.delete_why else None
        if obj is None or self.has_delete_permission(request, obj):
            return super().delete_view(request, object_id, extra_context)
        if not self.has_view_or_change_permission(request, obj):
            return super().delete_view(request, object_id, extra_context)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "object": obj,
            "title": f"This {self.opts.verbose_name} cannot be deleted",
            "why": self.delete_why,
        }
        return TemplateResponse(request, "admin/delete_refused.html", context, status=403)


class QuestionInline(admin.TabularInline):
    model = models.Question
    extra = 0
    fields = ["position", "text", "constraint_mask"]


@admin.register(models.Benchmark)
class BenchmarkAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["name", "description"]


@admin.register(models.Instruction)
class InstructionAdmin(admin.ModelAdmin):
    list_display = ["external_id", "benchmark", "subset", "category"]
    list_filter = ["benchmark", "subset"]
    search_fields = ["external_id", "text", "category"]
    inlines = [QuestionInline]


@admin.register(models.Question)
class QuestionAdmin(admin.ModelAdmin):
    list_display = ["__str__", "text", "constraint_types"]
    list_filter = ["instruction__benchmark", "instruction__subset"]
    search_fields = ["text", "instruction__external_id"]
    list_select_related = ["instruction"]


@admin.register(models.System)
class SystemAdmin(admin.ModelAdmin):
    list_filter = ["responses__instruction__benchmark"]
    search_fields = ["name"]


@admin.register(models.Response)
class ResponseAdmin(admin.ModelAdmin):
    list_display = ["instruction", "system"]
    list_filter = ["system", "instruction__benchmark", "instruction__subset"]
    search_fields = ["instruction__external_id", "text"]
    list_select_related = ["instruction", "system"]


# Whether an annotator's work counts rests on these (annotate.selectors.results): a worker
# who came through a platform counts only what that platform confirmed for their worker id,
# and the kind decides the majorities. Emptied here, a forger's platform made every forged
# assignment count; a kind changed here was not stamped (kind_changed_at), so a cached report
# kept the old majorities; its stamp, edited by hand, made one miss a change or see one.
ANNOTATOR_ORIGIN_FIELDS = ("kind", "kind_changed_at", "platform", "worker_id")


@admin.register(models.Annotator)
class AnnotatorAdmin(SaysWhyReadOnly, admin.ModelAdmin):
    """A new annotator is made with every field; once it exists, its platform and worker id
    stay as they came, and its kind is set on the Annotators page (its rules and stamp)."""

    read_only_why = (
        "Kind (and when it changed), platform and worker id cannot be changed here. The kind is "
        "set on the site's Annotators page, which keeps its rules and tells the reports it "
        "changed; the platform "
        "and worker id stay as the annotator came, since whether their work counts rests on them."
    )

    list_display = ["name", "kind", "user", "platform", "worker_id", "judge_config"]
    list_filter = ["kind", "platform"]
    search_fields = ["name", "worker_id", "judge_config", "user__username"]

    def get_readonly_fields(self, request, obj=None):
        return ANNOTATOR_ORIGIN_FIELDS if obj is not None else ()


# Whether a label or direct score counts in results rests on these (annotate.selectors.results:
# one without an assignment counts when imported, or when its annotator came through no
# platform): editing them would make rejected or unconfirmed work count, or forge work.
WORK_ORIGIN_FIELDS = ("assignment", "imported")


class WorkOriginReadOnly:
    """The work's origin stays as it came: `assignment` and `imported` never editable, and once
    the work exists its `annotator` neither (a platform worker's label without an assignment
    counts nowhere; handed to an in-house annotator it would count)."""

    def get_readonly_fields(self, request, obj=None):
        return (*WORK_ORIGIN_FIELDS, "annotator") if obj is not None else WORK_ORIGIN_FIELDS


class CorrectionStamped:
    """A label or direct score changed here is stamped (`changed_at`): a cached report is keyed
    by the latest stamp, so it is computed again after any correction."""

    def save_model(self, request, obj, form, change):
        if change:
            obj.changed_at = timezone.now()
        super().save_model(request, obj, form, change)


@admin.register(models.Label)
class LabelAdmin(CorrectionStamped, WorkOriginReadOnly, admin.ModelAdmin):
    list_display = ["question", "response", "annotator", "value", "created_at"]
    list_filter = ["value", "annotator__kind", "annotator", "response__system"]
    search_fields = ["question__instruction__external_id", "annotator__name"]
    list_select_related = [
        "question__instruction",
        "response__system",
        "response__instruction",
        "annotator",
    ]
    raw_id_fields = ["question", "response", "annotator"]


@admin.register(models.DirectScore)
class DirectScoreAdmin(CorrectionStamped, WorkOriginReadOnly, admin.ModelAdmin):
    list_display = ["response", "annotator", "score", "created_at"]
    list_filter = ["score", "annotator__kind", "response__system"]
    search_fields = ["response__instruction__external_id", "annotator__name"]
    list_select_related = ["response__instruction", "response__system", "annotator"]
    raw_id_fields = ["response", "annotator"]


class WorkKeptAdmin(admin.ModelAdmin):
    """Refuse to delete what holds work: a label or direct score keeps the assignment it came
    through (their foreign key is PROTECT), so its status still decides whether it counts.

    Said on Django's delete page (and the "delete selected" action's) as the protected objects
    are, counted rather than listed: a project's labels may be millions.
    """

    # The lookup from an assignment to this model ("" for an assignment itself).
    assignment_path = ""

    def get_deleted_objects(self, objs, request):
        held = self._work_held(objs)
        if held:
            return [], {}, set(), [held]
        return super().get_deleted_objects(objs, request)

    def _work_held(self, objs) -> str:
        key = (
            f"assignment__{self.assignment_path}__in" if self.assignment_path else "assignment__in"
        )
        labels = models.Label.objects.filter(**{key: objs}).count()
        scores = models.DirectScore.objects.filter(**{key: objs}).count()
        if not labels and not scores:
            return ""
        work = f"{labels} label{pluralize(labels)} and {scores} direct score{pluralize(scores)}"
        many = len(objs) > 1
        through = "them" if many else "it"
        if self.assignment_path:
            through = f"{'their' if many else 'its'} assignments"
        return (
            f"{work} submitted through {through}: work stays with the assignment it came "
            "through (reject an assignment to leave its work out of results)"
        )


@admin.register(models.Project)
class ProjectAdmin(WorkKeptAdmin):
    assignment_path = "task__batch__project"
    list_display = ["name", "benchmark", "mode", "assignments_per_task", "created_at"]
    list_filter = ["mode", "benchmark"]
    search_fields = ["name"]


@admin.register(models.Batch)
class BatchAdmin(WorkKeptAdmin):
    assignment_path = "task__batch"
    list_display = ["name", "project", "active", "created_at"]
    list_filter = ["active", "project"]
    search_fields = ["name", "project__name"]


@admin.register(models.Task)
class TaskAdmin(WorkKeptAdmin):
    assignment_path = "task"
    list_display = ["__str__", "batch", "instruction"]
    list_filter = ["batch__project"]
    search_fields = ["instruction__external_id"]
    raw_id_fields = ["instruction"]


@admin.register(models.Assignment)
class AssignmentAdmin(SaysWhyReadOnly, WorkKeptAdmin):
    """A record of what a worker did, shown and never written by hand: its annotator, status,
    lateness, times and platform ids decide whether its labels count, its slot and Table 4's
    time and cost (a forger's assignment given to an in-house annotator counted the forger's
    labels; one added here as approved was paid and timed). Verdicts go through the review
    pages (annotate.crowd.services.review); an assignment holding no work may be deleted."""

    read_only_why = (
        "An assignment is a record of what a worker did: its annotator, status, times and "
        "platform ids decide whether its labels count and what the work cost, so it is shown "
        "here, never edited. Approve or reject it on its publication's review page; one "
        "holding no work may be deleted."
    )

    list_display = ["task", "annotator", "status", "claimed_at", "submitted_at", "is_late"]
    list_filter = ["status", "is_late", "task__batch__project"]
    search_fields = ["annotator__name", "task__instruction__external_id", "platform_assignment_id"]
    raw_id_fields = ["task", "annotator"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.TaskSlots)
class TaskSlotsAdmin(admin.ModelAdmin):
    """Read only: database triggers keep these counters (see models.TaskSlots)."""

    list_display = ["task", "held"]
    list_filter = ["task__batch__project"]
    search_fields = ["task__instruction__external_id"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = [
        "original_name",
        "kind",
        "benchmark_name",
        "status",
        "rows",
        "created",
        "created_at",
    ]
    list_filter = ["kind", "status"]
    search_fields = ["original_name", "benchmark_name", "message"]
    readonly_fields = ["created_at", "heartbeat_at", "lease", "finished_at"]


@admin.register(models.DeferredTask)
class DeferredTaskAdmin(admin.ModelAdmin):
    """Tasks waiting for the broker: a long list here means Redis or the beat is down."""

    list_display = ["name", "args", "created_at", "attempts", "last_error"]
    list_filter = ["name"]
    search_fields = ["name", "last_error"]
    readonly_fields = ["name", "args", "created_at", "attempts", "last_error"]


@admin.register(models.ProjectAnnotatorKind)
class ProjectAnnotatorKindAdmin(admin.ModelAdmin):
    list_display = ["annotator", "project", "kind", "changed_at"]
    list_filter = ["kind", "project"]
    search_fields = ["annotator__name", "project__name"]
    list_select_related = ["annotator", "project"]


@admin.register(models.PasswordTokenRevocation)
class PasswordTokenRevocationAdmin(admin.ModelAdmin):
    """Read only: written when a password change revokes a user's API tokens."""

    list_display = ["user", "token_count", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["user__username"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@contextmanager
def _token_revocation_told(request: HttpRequest, user: User) -> Iterator[None]:
    """Add a message when a password change made in the block revoked the user's API tokens:
    Django's own says only that the password changed, and scripts using them get 401 from then."""
    revocations = models.PasswordTokenRevocation.objects.filter(user=user).order_by("-pk")
    before = revocations.values_list("pk", flat=True).first() or 0
    yield
    revocation = revocations.filter(pk__gt=before).first()
    if revocation is None:
        return
    count = revocation.token_count
    tokens = f"{count} API token{pluralize(count)}"
    revoked = f"{pluralize(count, 'was,were')} revoked with the password change"
    scripts = f"scripts using {pluralize(count, 'it,them')} get 401 now"
    if user.pk == request.user.pk:
        told = (
            f"Your {tokens} {revoked}: {scripts}. Create a new one on the API tokens page "
            f"({reverse('api-tokens')})."
        )
    else:
        told = (
            f"The {tokens} of {user.get_username()} {revoked}: {scripts}; their API tokens "
            "page tells them why."
        )
    messages.warning(request, told)


class UserAdmin(auth_admin.UserAdmin):
    """Django's user admin, saying when a password it set or disabled revoked API tokens."""

    def user_change_password(self, request, id, form_url=""):
        user = self.get_object(request, unquote(id))
        if user is None or request.method != "POST":
            return super().user_change_password(request, id, form_url)
        with _token_revocation_told(request, user):
            return super().user_change_password(request, id, form_url)


if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, UserAdmin)


def admin_password_change(request: HttpRequest) -> HttpResponse:
    """The admin site's own "Change password", saying when it revoked the user's API tokens
    (config.urls routes /admin/password_change/ here, ahead of admin.site.urls)."""
    with _token_revocation_told(request, request.user):
        return admin.site.password_change(request)
