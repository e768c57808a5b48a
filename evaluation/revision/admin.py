from django.contrib import admin

from evaluation.revision import models


@admin.register(models.RevisionJudgeRun)
class RevisionJudgeRunAdmin(admin.ModelAdmin):
    list_display = ("id", "study", "task", "mode", "shots", "endpoint_name", "status", "created_at")
    list_filter = ("task", "mode", "status")
    search_fields = ("study__name", "endpoint_name")
    raw_id_fields = ("engine_run", "created_by")
