"""The embedded default as `make run` serves it, for concurrency tests: a SQLite file in a
temporary var/, `manage.py runserver` (one process, a thread per request; or under its
autoreloader, as `make run`) on a free port, and annotators with sessions of their own."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]
CSRF = "c" * 32  # any well-formed token: Django compares the cookie with the header or field
SETUP = """
import json, django
django.setup()
from django.contrib.auth.models import Group
from django.test import Client
from annotate.roles import ANNOTATOR, ROLES
from tests.factories import UserFactory, project_with_tasks
for name in ROLES:
    Group.objects.get_or_create(name=name)
project = project_with_tasks(instructions={tasks}, systems=2, questions=2, assignments_per_task=3)
sessions = []
for number in range({users}):
    client = Client()
    client.force_login(UserFactory(username=f"annotator{{number}}", roles=[ANNOTATOR]))
    sessions.append(client.cookies["sessionid"].value)
print(json.dumps({{"project": project.pk, "sessions": sessions}}))
"""


class Browser:
    """requests with the site's address, a session cookie and the CSRF token; no redirects."""

    def __init__(self, url: str, session: str) -> None:
        self.url = url
        self.http = requests.Session()
        self.http.cookies.update({"sessionid": session, "csrftoken": CSRF})
        self.http.headers["X-CSRFToken"] = CSRF

    def post(self, path: str, **kwargs) -> requests.Response:
        return self.http.post(self.url + path, allow_redirects=False, timeout=60, **kwargs)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class EmbeddedServer:
    """`manage.py runserver` on a fresh SQLite file, with a project and annotators' sessions."""

    def __init__(
        self,
        var_dir: Path,
        *,
        users: int,
        tasks: int,
        port: int | None = None,
        env: dict[str, str] | None = None,
        reload: bool = False,
    ) -> None:
        """`env` adds settings; `reload` serves as `make run` does, under the autoreloader (a
        parent process restarting a serving child), instead of in one process."""
        self.var_dir = var_dir
        inherited = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DATABASE_", "CELERY_", "CACHE_", "DJANGO_"))
        }
        self.env = {
            **inherited,
            "VAR_DIR": str(var_dir),
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            **(env or {}),
        }
        self._manage("migrate", "--no-input", "-v0")
        data = json.loads(self.python(SETUP.format(users=users, tasks=tasks)).splitlines()[-1])
        self.project_id, self.sessions = data["project"], data["sessions"]
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.port}",
                *([] if reload else ["--noreload"]),
            ],
            cwd=REPO,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=open(var_dir / "server.log", "w"),  # noqa: SIM115 - closed with the server
            start_new_session=True,  # stop() ends the autoreloader's child with it
        )  # fmt: skip
        self._wait_until_up()

    def python(self, code: str) -> str:
        """Run `code` in a Python process on the server's settings and database; its output."""
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode:
            raise RuntimeError(f"the script failed:\n{done.stderr}")
        return done.stdout.strip()

    def _manage(self, *args: str) -> None:
        subprocess.run(
            [sys.executable, "manage.py", *args], cwd=REPO, env=self.env, check=True, timeout=120
        )

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                requests.get(f"{self.url}/health/", timeout=2)
                return
            except requests.ConnectionError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the embedded server did not start")

    def client(self, session: str) -> Browser:
        """An HTTP client carrying the session and a CSRF token, as a logged-in browser does."""
        return Browser(self.url, session)

    def query(self, sql: str, *params) -> list[tuple]:
        with sqlite3.connect(self.var_dir / "db.sqlite3") as database:
            return database.execute(sql, params).fetchall()

    def log(self) -> str:
        return (self.var_dir / "server.log").read_text()

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=30)
