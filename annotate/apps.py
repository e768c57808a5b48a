from django.apps import AppConfig


class AnnotateConfig(AppConfig):
    name = "annotate"
    verbose_name = "Annotation"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import pre_save

        from annotate import checks  # noqa: F401 - registers the deployment checks
        from annotate.password_changes import mark_rehashes, revoke_api_tokens_on_password_change

        mark_rehashes()
        pre_save.connect(
            revoke_api_tokens_on_password_change,
            sender=get_user_model(),
            dispatch_uid="annotate.revoke_api_tokens_on_password_change",
        )
