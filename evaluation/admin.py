from django.contrib import admin

from evaluation.models import JudgeCall, JudgeConfig, JudgeConversation, JudgeRun, ReportExport
from evaluation.services.judge_configs import judge_config_create


@admin.register(JudgeConfig)
class JudgeConfigAdmin(admin.ModelAdmin):
    list_display = ["name", "endpoint", "protocol", "created_at"]
    exclude = ["annotator"]

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        fields = {k: v for k, v in form.cleaned_data.items() if k != "name"}
        created = judge_config_create(name=form.cleaned_data["name"], **fields)
        obj.pk, obj.annotator = created.pk, created.annotator


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ["id", "config", "benchmark", "status", "cost_usd", "created_at"]
    list_filter = ["status"]
    readonly_fields = ["engine_run", "prompt_tokens", "completion_tokens", "cost_usd"]


@admin.register(JudgeConversation)
class JudgeConversationAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "response", "status", "kept_going_after_unparseable"]
    list_filter = ["status"]
    raw_id_fields = ["run", "response"]


@admin.register(JudgeCall)
class JudgeCallAdmin(admin.ModelAdmin):
    list_display = ["id", "conversation", "question", "parsed", "prompt_version", "retries"]
    raw_id_fields = ["conversation", "question", "label", "engine_call"]


@admin.register(ReportExport)
class ReportExportAdmin(admin.ModelAdmin):
    list_display = ["id", "benchmark", "unknown", "status", "location", "created_at", "finished_at"]
    list_filter = ["status", "unknown", "benchmark"]
    search_fields = ["benchmark__name", "location", "message"]
    readonly_fields = ["files", "location", "message", "finished_at"]
