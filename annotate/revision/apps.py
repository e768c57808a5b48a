from django.apps import AppConfig


class RevisionConfig(AppConfig):
    name = "annotate.revision"
    label = "revision"
    verbose_name = "Revision sessions (KIWI)"
