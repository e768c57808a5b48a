from django.apps import AppConfig


class EngineConfig(AppConfig):
    name = "annotate.engine"
    label = "engine"
    verbose_name = "Model engine"
