from collections import Counter

from django.core.management.base import BaseCommand, CommandError
from django.template.defaultfilters import pluralize
from django.utils import timezone

from annotate.errors import AnnotateError
from annotate.revision.selectors import rerate_sent_count, study_annotators
from annotate.revision.services.exports import study_get
from annotate.revision.services.reratings import RerateRepeatError, reratings_sample


class Command(BaseCommand):
    help = "Send a random sample of a study's finished turns to other annotators for re-rating."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--size", type=int, required=True, help="How many turns.")
        parser.add_argument(
            "--annotator", action="append", required=True, help="Username; repeat for each."
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--sent-before",
            type=int,
            default=0,
            help="How many of the study's turns were sent for re-rating before this sample "
            "(default 0: the first sample). Finding another count, nothing is sent: the command "
            "run again sends no second sample; a deliberate one names the count it adds to, as "
            "the last run printed it.",
        )

    def handle(self, *args, **options):
        if options["sent_before"] < 0:
            raise CommandError(f"--sent-before must be 0 or more, not {options['sent_before']}")
        try:
            study = study_get(name=options["study"])
        except AnnotateError as error:
            raise CommandError(f"{error}\nNothing was written.") from None
        # The accounts the page and the API offer: active annotators (a researcher's or an
        # inactive account would get turns nobody rates).
        users = list(study_annotators(study=study).filter(username__in=options["annotator"]))
        missing = set(options["annotator"]) - {user.username for user in users}
        if missing:
            raise CommandError(
                f"--annotator: no active annotator account named {', '.join(sorted(missing))}. "
                "Nothing was sent."
            )
        try:
            sent = reratings_sample(
                study=study,
                annotators=users,
                size=options["size"],
                seed=options["seed"],
                now=timezone.now(),
                sent_before=options["sent_before"],
            )
        except RerateRepeatError as error:
            # This run, or the page, the API or another run, sent them: say what, not whose.
            raise CommandError(
                f"--sent-before {options['sent_before']}: {error.sent}.\nNothing was sent. To "
                "send one more sample on top of these, run again with "
                f"--sent-before {rerate_sent_count(study=study)}."
            ) from None
        except AnnotateError as error:
            raise CommandError(f"{error}\nNothing was written.") from None
        total = rerate_sent_count(study=study)
        # Every named annotator with their count, 0 included: a turn never goes to its own
        # session's annotator, so one may get none, and the run should say so.
        counts = Counter(rerating.annotator_id for rerating in sent)
        whom = ", ".join(f"{user.username} {counts[user.pk]}" for user in users)
        self.stdout.write(
            f"Sent {len(sent)} turn{pluralize(len(sent))} for re-rating ({whom}); the study has "
            f"{total} sent (another sample: --sent-before {total})."
        )
