from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from annotate.crowd.services.publishing import (
    PublishSettings,
    default_qualifications,
    publication_publish,
    task_base_url,
)
from annotate.errors import AnnotateError
from annotate.selectors.names import names_there_are
from annotate.verbalizer.models import HumanStudy
from annotate.verbalizer.services import crowd


def _usd(value: str) -> Decimal:
    try:
        return Decimal(value)
    except InvalidOperation:
        raise CommandError(f"not an amount in dollars: {value!r}") from None


class Command(BaseCommand):
    help = (
        "Publish a verbalizer human study to a crowd platform (one HIT per prompt on MTurk, or a "
        "self-hosted link). Without --confirm-total it only prints what publishing would cost."
    )

    def add_arguments(self, parser):
        parser.add_argument("study", help="the human study's name")
        parser.add_argument("--platform", required=True, help="mturk, selfhosted or fake")
        parser.add_argument(
            "--reward", type=_usd, help=f"USD per answer ({crowd.DEFAULT_REWARD_USD})"
        )
        parser.add_argument("--title", default="Pick the word an instruction asks for")
        parser.add_argument(
            "--description",
            default="Read a short instruction and a text; answer with one of two words.",
        )
        parser.add_argument("--minutes", type=int, default=5, help="time per assignment")
        parser.add_argument("--lifetime-hours", type=int, default=168)
        parser.add_argument("--base-url", default="", help="default: CROWD_PUBLIC_URL")
        parser.add_argument(
            "--confirm-total", type=_usd, help="the total the preview printed: publishes"
        )

    def handle(self, *args, **options):
        study = HumanStudy.objects.filter(name=options["study"]).first()
        if study is None:
            known = names_there_are(HumanStudy.objects.all(), what="human studies")
            raise CommandError(f"no human study named {options['study']!r} ({known})")
        try:
            preview = crowd.study_publication_preview(
                study=study, platform_name=options["platform"], reward_usd=options["reward"]
            )
            self.stdout.write(self._cost(preview))
            if preview.published_elsewhere_note:
                self.stdout.write(preview.published_elsewhere_note)
            if options["confirm_total"] is None:
                self.stdout.write(f"Nothing published: add --confirm-total {preview.total_usd}.")
                return
            self._check_total(preview, options["confirm_total"])
            publication = self._publish(study, options)
        except AnnotateError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"Publication {publication.pk}: {publication.get_status_display()}.")

    def _cost(self, preview) -> str:
        cost = (
            f"{preview.tasks} prompts × {preview.assignments_per_task} answers × "
            f"${preview.reward_usd}"
        )
        if preview.paid_outside:
            return f"{cost} = ${preview.total_usd}, paid on the recruiting site (no fee here)"
        balance = "unknown" if preview.balance_usd is None else f"${preview.balance_usd}"
        return f"{cost} + fee = ${preview.total_usd} ({preview.fee}); balance: {balance}"

    def _check_total(self, preview, confirmed) -> None:
        total = preview.total_usd
        if confirmed != total:
            raise CommandError(
                f"not published: the total is ${total}, not the ${confirmed} given; publish "
                f"with --confirm-total {total}"
            )
        if not preview.affordable:
            raise CommandError(
                f"not published: the total is ${total}, more than the balance "
                f"${preview.balance_usd}"
            )

    def _publish(self, study, options):
        chosen = PublishSettings(
            title=options["title"], description=options["description"],
            reward_usd=options["reward"], assignment_duration_seconds=options["minutes"] * 60,
            lifetime_seconds=options["lifetime_hours"] * 3600,
            qualification_requirements=default_qualifications(),
        )  # fmt: skip
        base = task_base_url(request_base=options["base_url"] or settings.CROWD_PUBLIC_URL)
        publication = crowd.study_publication_create(
            study=study, platform_name=options["platform"], chosen=chosen, base_url=base
        )
        return publication_publish(publication_id=publication.pk, now=timezone.now())
