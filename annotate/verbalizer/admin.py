from django.contrib import admin
from django.template.defaultfilters import pluralize

from annotate.admin import SaysWhyReadOnly
from annotate.verbalizer import models


class ReadOnlyAdmin(admin.ModelAdmin):
    """Answers and prompts are records: shown, never edited by hand (a number depends on them)."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class AnswersKeptAdmin(admin.ModelAdmin):
    """Refuse to delete what holds people's answers (a human study, an evaluation set): each is
    a record the report counts and a platform may have paid, as an assignment holding work is
    (annotate.admin.WorkKeptAdmin); deleting one cascaded its answers out of every result.
    Said on Django's delete page as the protected objects are, counted."""

    # The lookup from a human answer to this model.
    answers_path = ""

    def get_deleted_objects(self, objs, request):
        answers = models.HumanAnswer.objects.filter(**{f"{self.answers_path}__in": objs}).count()
        if answers:
            held = (
                f"{answers} answer{pluralize(answers)} of people: answers stay, and count as "
                "they were given (reject an answer to leave it out of results)"
            )
            return [], {}, set(), [held]
        return super().get_deleted_objects(objs, request)


@admin.register(models.ClassificationDataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "family", "positive_name", "negative_name", "created_at"]
    search_fields = ["name"]


@admin.register(models.Mapping)
class MappingAdmin(ReadOnlyAdmin):
    list_display = ["name", "group", "kind", "positive_word", "negative_word", "position"]
    list_filter = ["group", "kind"]


@admin.register(models.EvaluationSet)
class EvaluationSetAdmin(AnswersKeptAdmin, ReadOnlyAdmin):
    answers_path = "prompt__evaluation_set"
    list_display = ["name", "items_per_dataset", "seed", "template_version", "created_at"]


@admin.register(models.ModelAnswer)
class ModelAnswerAdmin(ReadOnlyAdmin):
    list_display = ["system", "prompt", "created_at"]
    list_filter = ["system"]
    raw_id_fields = ["prompt", "run", "engine_call"]


@admin.register(models.HumanAnswer)
class HumanAnswerAdmin(SaysWhyReadOnly, ReadOnlyAdmin):
    """Shown only: an answer is the work itself (a reject leaves it out of results)."""

    read_only_why = (
        "An answer is the participant's work, counted by the report and perhaps paid: it is "
        "shown here, never edited or deleted. Reject it on its publication's review page to "
        "leave it out of results."
    )
    delete_why = (
        "Answers are kept as the study's record: the report counts each one as it was given, and "
        "a platform may have paid for it, so none is ever deleted. Reject an answer on its "
        "publication's review page to leave it out of results."
    )

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

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.HumanStudy)
class HumanStudyAdmin(AnswersKeptAdmin):
    answers_path = "study"
    list_display = ["name", "evaluation_set", "answers_per_prompt", "active", "created_at"]
    fields = ["name", "active"]

    def has_add_permission(self, request) -> bool:
        return False
