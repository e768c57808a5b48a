from django.contrib import admin

from annotate.revision import models


@admin.register(models.Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ("name", "retrieval", "max_turns", "created_at")
    search_fields = ("name",)


@admin.register(models.StudySystem)
class StudySystemAdmin(admin.ModelAdmin):
    list_display = ("name", "study", "endpoint_name", "position")
    list_filter = ("study",)
    search_fields = ("name", "endpoint_name")


@admin.register(models.RevisionSession)
class RevisionSessionAdmin(admin.ModelAdmin):
    # A failed call's message (initial_error, a turn's call_error) is shown here and logged,
    # never to the annotator: it names the endpoint or the model.
    list_display = (
        "id",
        "study",
        "system",
        "annotator",
        "status",
        "initial_status",
        "satisfied",
        "created_at",
        "given_up_at",
        "reopened_at",
    )
    list_filter = ("study", "status", "initial_status")
    search_fields = ("question__text", "annotator__username")
    raw_id_fields = ("question", "system", "annotator", "given_up_by", "reopened_by")


@admin.register(models.Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = ("id", "session", "position", "instruction_type", "rating", "call_status")
    list_filter = ("rating", "instruction_type", "call_status")
    search_fields = ("instruction", "comment")
    raw_id_fields = ("session",)


@admin.register(models.Rerating)
class ReratingAdmin(admin.ModelAdmin):
    list_display = ("id", "turn", "annotator", "status", "rating")
    list_filter = ("status", "rating")
    search_fields = ("annotator__username", "comment")
    raw_id_fields = ("turn", "annotator")
