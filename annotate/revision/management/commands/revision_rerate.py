from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from annotate.errors import AnnotateError
from annotate.revision.services.exports import study_get
from annotate.revision.services.reratings import reratings_sample


class Command(BaseCommand):
    help = "Send a random sample of a study's finished turns to other annotators for re-rating."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True)
        parser.add_argument("--size", type=int, required=True, help="How many turns.")
        parser.add_argument(
            "--annotator", action="append", required=True, help="Username; repeat for each."
        )
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, **options):
        users = list(User.objects.filter(username__in=options["annotator"]).order_by("username"))
        missing = set(options["annotator"]) - {user.username for user in users}
        if missing:
            raise CommandError(f"no such user: {', '.join(sorted(missing))}")
        try:
            sent = reratings_sample(
                study=study_get(name=options["study"]),
                annotators=users,
                size=options["size"],
                seed=options["seed"],
                now=timezone.now(),
            )
        except AnnotateError as error:
            raise CommandError(f"{error}\nNothing was written.") from None
        self.stdout.write(f"Sent {len(sent)} turns for re-rating.")
