from django.apps import AppConfig


class VerbalizerConfig(AppConfig):
    name = "annotate.verbalizer"
    label = "verbalizer"
    verbose_name = "Verbalizer manipulation"
