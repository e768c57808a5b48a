from django.contrib import admin

from annotate.crowd import models


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records of what happened: shown, never edited by hand."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        # A publication's HITs and the platform's assignments are what crowd work counts by.
        return False


@admin.register(models.PlatformCall)
class PlatformCallAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "user",
        "platform",
        "operation",
        "ok",
        "error_code",
        "duration_ms",
    ]
    list_filter = ["platform", "operation", "ok"]
    search_fields = ["operation", "error_code", "result"]
    date_hierarchy = "created_at"


@admin.register(models.Publication)
class PublicationAdmin(ReadOnlyAdmin):
    list_display = [
        "batch",
        "platform",
        "sandbox",
        "status",
        "reward_usd",
        "created_by",
        "created_at",
    ]
    list_filter = ["platform", "sandbox", "status"]


@admin.register(models.Hit)
class HitAdmin(ReadOnlyAdmin):
    list_display = ["hit_id", "publication", "task", "status", "expires_at", "synced_at"]
    list_filter = ["status", "publication__platform"]
    search_fields = ["hit_id", "unique_request_token"]
    raw_id_fields = ["task"]


@admin.register(models.PlatformAssignment)
class PlatformAssignmentAdmin(ReadOnlyAdmin):
    list_display = ["platform_assignment_id", "worker_id", "status", "submitted_at", "assignment"]
    list_filter = ["status"]
    search_fields = ["platform_assignment_id", "worker_id"]


@admin.register(models.AccountBalance)
class AccountBalanceAdmin(ReadOnlyAdmin):
    list_display = ["platform", "sandbox", "balance_usd", "checked_at"]
    list_filter = ["platform", "sandbox"]
    search_fields = ["platform"]


@admin.register(models.Bonus)
class BonusAdmin(ReadOnlyAdmin):
    list_display = ["assignment", "human_answer", "amount_usd", "status", "created_by", "paid_at"]
    list_filter = ["status"]


@admin.register(models.WorkerBlock)
class WorkerBlockAdmin(ReadOnlyAdmin):
    list_display = ["annotator", "active", "reason", "created_by", "created_at"]
    list_filter = ["active"]


@admin.register(models.GoldAnswer)
class GoldAnswerAdmin(admin.ModelAdmin):
    list_display = ["project", "question", "response", "value"]
    list_filter = ["project"]
    raw_id_fields = ["question", "response"]


@admin.register(models.HitExtension)
class HitExtensionAdmin(ReadOnlyAdmin):
    list_display = [
        "hit",
        "count",
        "reward_usd",
        "status",
        "created_by",
        "created_at",
        "done_at",
        "settled_by",
        "settled_at",
    ]
    list_filter = ["status"]
    search_fields = ["hit__hit_id", "unique_request_token", "error"]
