from django.apps import AppConfig


class RevisionEvaluationConfig(AppConfig):
    name = "evaluation.revision"
    label = "revision_eval"
    verbose_name = "Revision sessions: judges and reports"
