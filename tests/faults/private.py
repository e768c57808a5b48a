"""Private PostgreSQL, Redis and Celery worker for the fault scripts.

The machine's PostgreSQL (5432) and Redis (6379) are shared with other people: a fault script
stops and restarts only the servers it started here, on free ports, in a temporary directory.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.harness import ROOT, Annotator, free_port, wait_for_port


def _as_postgres_user() -> list[str]:
    """initdb and postgres refuse to run as root: run them as the `postgres` user then."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


class PrivatePostgres:
    """A throw-away PostgreSQL cluster (trust auth, superuser `root`, fsync off)."""

    def __init__(self) -> None:
        binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not binaries:
            raise SystemExit("No PostgreSQL server binaries under /usr/lib/postgresql/")
        self.bin = Path(binaries[-1])
        self.dir = Path(tempfile.mkdtemp(prefix="fault-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        subprocess.run(
            [
                *_as_postgres_user(),
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "root",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def url(self, name: str) -> str:
        return f"postgres://root@127.0.0.1:{self.port}/{name}"

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            [*_as_postgres_user(), str(self.bin / "pg_ctl"), "-D", str(self.data), *args],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._ctl("-o", options, "-l", str(self.dir / "server.log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-m", mode, "-w", "stop")

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivateRedis:
    """A redis-server on a free port that keeps nothing on disk."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="fault-redis-"))
        self.process: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.dir),
            ],
            stdout=subprocess.DEVNULL,
        )
        if not wait_for_port(self.port, timeout=10):
            raise SystemExit("private redis-server did not start")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class CeleryWorker:
    """`celery worker` (optionally with an embedded beat) in a process group of its own."""

    def __init__(self, log: Path, *, beat: bool = False, concurrency: int = 2) -> None:
        self.log, self.beat, self.concurrency = log, beat, concurrency
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        if self.process and self.process.poll() is None:
            raise RuntimeError("the worker is already running: stop or kill it first")
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--concurrency",
            str(self.concurrency),
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        ]
        if self.beat:
            command += ["--beat", "--schedule", str(self.log.with_suffix(".beat"))]
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=os.environ,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its pool children share its process group
            )

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes at once, as a lost machine would."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        """Warm shutdown (SIGTERM to the main process: running tasks finish), else SIGKILL."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_until(condition, timeout: float, step: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


def verdict(name: str, failures: list[str], details: list[str]) -> int:
    """Print the details and a PASS/FAIL line; return the exit status."""
    for line in details:
        print("  " + line)
    for failure in failures:
        print("  FAILED: " + failure)
    print(f"VERDICT {'FAIL' if failures else 'PASS'}: {name}")
    return 1 if failures else 0


# Answers of a page or a submit that count as success while a fault is going on.
OK = {"200", "302"}


def keep_working(annotator: Annotator, deadline: float) -> None:
    """Let one simulated annotator claim and submit tasks until the deadline."""
    while time.monotonic() < deadline:
        if annotator.one_task() != "done":
            time.sleep(0.2)
