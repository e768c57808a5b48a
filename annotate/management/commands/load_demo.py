import fcntl
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.utils.module_loading import import_string

from annotate.errors import AnnotateError
from annotate.services.demo import (
    DEMO_ENDPOINT,
    DEMO_GENERATING_SYSTEM,
    DEMO_LOGIN_NOTES,
    demo_generation_create,
    demo_projects_create,
    demo_revision_create,
)
from annotate.services.demo_data import demo_benchmark_load, demo_users_create
from annotate.verbalizer.demo import demo_verbalizer_create

LOCK_FILE_NAME = "setup.lock"


class Command(BaseCommand):
    help = "Load the demo benchmark and create one demo account per role (safe to run again)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--allow-production",
            action="store_true",
            help="Create the demo accounts (known passwords) even with DEBUG off.",
        )
        parser.add_argument(
            "--base-url",
            default="http://127.0.0.1:8000",
            help="Where the app is served, for the printed links (make run passes HOST and PORT).",
        )
        parser.add_argument(
            "--migrate",
            action="store_true",
            help="Apply the migrations first, under the same lock (make run).",
        )

    def handle(self, *args, **options):
        if not settings.DEBUG and not options["allow_production"]:
            raise CommandError(
                "Refusing to create demo accounts with known passwords: DEBUG is off."
            )
        with self._one_setup_at_a_time():
            if options["migrate"]:
                call_command("migrate", interactive=False, stdout=self.stdout, stderr=self.stderr)
            self._load(base=options["base_url"].rstrip("/"))

    @contextmanager
    def _one_setup_at_a_time(self) -> Iterator[None]:
        """Hold an exclusive flock on VAR_DIR/setup.lock for the whole load (and `--migrate`).

        Two loads at once (`make run` in two terminals) checked for the same missing rows and
        both made them: an error ("an endpoint named 'demo-fake' exists already"), the demo's runs
        twice, or, on SQLite, "database is locked" after the busy timeout, each load taking the
        write lock again the moment it let it go. Two migrates at once on a fresh database both
        saw no table and one failed (`table "django_content_type" already exists`), so
        `make run` migrates under the same lock. The second now waits for the first, then finds
        everything made (the load is safe to run again). The kernel drops the lock however the
        process ends."""
        path = settings.VAR_DIR / LOCK_FILE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as lock_file:
            try:
                fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self.stdout.write(f"Waiting for another set-up to end ({path} is locked).")
                self.stdout.flush()
                fcntl.flock(lock_file, fcntl.LOCK_EX)
            yield

    def _load(self, *, base: str) -> None:
        try:
            for summary in demo_benchmark_load():
                self.stdout.write(f"  {summary.message}")
        except AnnotateError as error:
            raise CommandError(str(error)) from None
        logins = list(demo_users_create())
        try:
            logins.extend(demo_projects_create())
            generated = demo_generation_create()
            verbalizer = demo_verbalizer_create()
            study = demo_revision_create()
            self.stdout.write(
                f"  Revision study {study.name!r}: {study.sessions.count()} sessions."
            )
        except AnnotateError as error:
            raise CommandError(str(error)) from None
        for path in settings.DEMO_EXTRA_LOADERS:
            self.stdout.write(f"  {import_string(path)()}")
        for path in settings.DEMO_LOADERS:
            for note in import_string(path)():
                self.stdout.write(f"  {note}")
        self.stdout.write(
            f"  {DEMO_GENERATING_SYSTEM}: {generated} responses generated through the offline "
            f"fake endpoint {DEMO_ENDPOINT} (see {base}/engine/runs/)"
        )
        self.stdout.write(f"  {verbalizer}")
        self.stdout.write(self.style.SUCCESS(f"Demo logins ({base}/accounts/login/):"))
        for login in logins:
            note = DEMO_LOGIN_NOTES.get(login.username, "")
            self.stdout.write(
                f"  {login.role:<11} {login.username:<11} password: {login.password:<16} {note}"
            )
        self.stdout.write(f"API documentation: {base}/api/docs/ (Swagger UI), {base}/api/redoc/")
