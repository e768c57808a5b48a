from django.contrib import admin

from annotate.verbalizer import models


class ReadOnlyAdmin(admin.ModelAdmin):
    """Answers and prompts are records: shown, never edited by hand (a number depends on them)."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.ClassificationDataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "family", "positive_name", "negative_name", "created_at"]
    search_fields = ["name"]


@admin.register(models.Mapping)
class MappingAdmin(ReadOnlyAdmin):
    list_display = ["name", "group", "kind", "positive_word", "negative_word", "position"]
    list_filter = ["group", "kind"]


@admin.register(models.EvaluationSet)
class EvaluationSetAdmin(ReadOnlyAdmin):
    list_display = ["name", "items_per_dataset", "seed", "template_version", "created_at"]


@admin.register(models.ModelAnswer)
class ModelAnswerAdmin(ReadOnlyAdmin):
    list_display = ["system", "prompt", "created_at"]
    list_filter = ["system"]
    raw_id_fields = ["prompt", "run", "engine_call"]


@admin.register(models.HumanAnswer)
class HumanAnswerAdmin(ReadOnlyAdmin):
    list_display = [
        "annotator",
        "prompt",
        "word",
        "changed_from",
        "seconds",
        "status",
        "created_at",
    ]
    list_filter = ["study", "status"]
    search_fields = ["platform_assignment_id", "platform_hit_id", "annotator__worker_id"]
    raw_id_fields = ["prompt"]


@admin.register(models.HumanStudy)
class HumanStudyAdmin(admin.ModelAdmin):
    list_display = ["name", "evaluation_set", "answers_per_prompt", "active", "created_at"]
    fields = ["name", "active"]

    def has_add_permission(self, request) -> bool:
        return False
