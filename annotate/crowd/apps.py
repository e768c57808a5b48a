from django.apps import AppConfig


class CrowdConfig(AppConfig):
    name = "annotate.crowd"
    label = "crowd"
    verbose_name = "Crowd platforms"

    def ready(self) -> None:
        from annotate.crowd.pricing import fee_override

        fee_override()  # a CROWD_FEE_RATE that is not a rate stops the start, naming it
