from django.apps import AppConfig


class CrowdConfig(AppConfig):
    name = "annotate.crowd"
    label = "crowd"
    verbose_name = "Crowd platforms"
