from django.apps import AppConfig


class CrowdConfig(AppConfig):
    name = "annotate.crowd"
    label = "crowd"
    verbose_name = "Crowd platforms"

    def ready(self) -> None:
        from django.core.checks import register

        from annotate.crowd.checks import old_flat_rate_check
        from annotate.crowd.pricing import fee_override

        fee_override()  # a CROWD_FEE_RATE that is not a rate stops the start, naming it
        register(old_flat_rate_check)
