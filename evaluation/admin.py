from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect

from evaluation.errors import JudgeConfigError
from evaluation.models import JudgeCall, JudgeConfig, JudgeConversation, JudgeRun, ReportExport
from evaluation.services.judge_configs import judge_config_create, judge_config_name_check


class JudgeConfigAdminForm(forms.ModelForm):
    class Meta:
        model = JudgeConfig
        fields = ["name", "endpoint", "protocol"]

    def clean_name(self) -> str:
        """A new judge's name must be free among annotators too (its labels' annotator)."""
        name = self.cleaned_data["name"]
        try:
            return judge_config_name_check(name=name)
        except JudgeConfigError as error:
            raise forms.ValidationError(str(error)) from None


@admin.register(JudgeConfig)
class JudgeConfigAdmin(admin.ModelAdmin):
    list_display = ["name", "endpoint", "protocol", "created_at"]
    form = JudgeConfigAdminForm

    def get_readonly_fields(self, request, obj=None):
        # The judge's labels land under an annotator of its name, made with it: a rename would
        # leave that annotator behind under the old name (and could take a human's).
        readonly = super().get_readonly_fields(request, obj)
        return readonly if obj is None else [*readonly, "name"]

    def add_view(self, request, form_url="", extra_context=None):
        try:
            return super().add_view(request, form_url, extra_context)
        except JudgeConfigError as error:  # the name was taken after the form checked it
            messages.error(request, str(error))  # nothing kept: the add view's transaction
            return HttpResponseRedirect(request.get_full_path())

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
    readonly_fields = ["files", "location", "message", "heartbeat_at", "lease", "finished_at"]
