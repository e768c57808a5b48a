from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotate.errors import AnnotateError
from annotate.services.demo import demo_projects_create
from annotate.services.demo_data import demo_benchmark_load, demo_users_create


class Command(BaseCommand):
    help = "Load the demo benchmark and create one demo account per role (safe to run again)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--allow-production",
            action="store_true",
            help="Create the demo accounts (known passwords) even with DEBUG off.",
        )

    def handle(self, *args, **options):
        if not settings.DEBUG and not options["allow_production"]:
            raise CommandError(
                "Refusing to create demo accounts with known passwords: DEBUG is off."
            )
        try:
            for summary in demo_benchmark_load():
                self.stdout.write(f"  {summary.message}")
        except AnnotateError as error:
            raise CommandError(str(error)) from None
        logins = list(demo_users_create())
        try:
            logins.extend(demo_projects_create())
        except AnnotateError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            self.style.SUCCESS("Demo logins (http://127.0.0.1:8000/accounts/login/):")
        )
        for login in logins:
            self.stdout.write(f"  {login.role:<11} {login.username:<11} password: {login.password}")
