from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Evaluation"

    def ready(self) -> None:
        from evaluation.caching import code_version

        # The code as this process loaded it, before a deploy can put other files under it.
        code_version()
