"""Run the Celery beat schedule in the serving process when there is no broker.

The embedded default (`make run`: no CELERY_BROKER_URL) has no `celery beat`, so without this
nothing would run CELERY_BEAT_SCHEDULE: a crowd submission the platform never confirmed would
hold its task's slot until an admin pressed "Sync", and a run whose process was killed would
stay "running" on every page that does not check it.

Where it starts: config/wsgi.py and config/asgi.py call `embedded_beat_start()` once they have
made the application, so it runs in the process that serves the site and in no other:
runserver's serving process (its autoreloader's parent never makes the application), each
gunicorn worker; never in a management command. Tests make their own handler (test client, live
server) and the test settings turn EMBEDDED_BEAT off, so no test runs it unless it starts one.
With a broker it does nothing: `celery beat` runs the schedule (docs/deploy.md).

One process at a time: the schedule runs only in the process holding an exclusive flock on
VAR_DIR/embedded-beat.lock. A second process on the same VAR_DIR (a second `runserver`, another
gunicorn worker, the next autoreloaded child) tries again every LOCK_RETRY_SECONDS and takes over
once the holder has ended; the kernel drops the lock however a process ends.

In the holder, a daemon thread runs every entry when it takes the lock, then every `schedule`
seconds, through the task's own function (as annotate.services.background runs one), one after
the other. A task that raises is logged; the others, and its next run, go on.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO

from celery import Task
from django import db
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from config.celery import app as celery_app

logger = logging.getLogger(__name__)

LOCK_FILE_NAME = "embedded-beat.lock"
LOCK_RETRY_SECONDS = 30.0

_start_lock = threading.Lock()
_started: EmbeddedBeat | None = None


@dataclass(frozen=True)
class BeatEntry:
    name: str
    task: str
    every: float
    args: tuple
    kwargs: dict


class EmbeddedBeat:
    """A beat schedule's entries, run at their intervals while this process holds the lock."""

    def __init__(self, *, schedule: dict, lock_path: Path) -> None:
        self.entries = [beat_entry(name, spec) for name, spec in schedule.items()]
        self.lock_path = lock_path
        self.thread = threading.Thread(target=self._loop, name="embedded-beat", daemon=True)
        self._lock_file: IO[str] | None = None
        self._next_run: dict[str, float] = {}
        self._stopped = threading.Event()

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """End the thread (after the task it runs, if any) and give up the lock."""
        self._stopped.set()
        if self.thread.is_alive():
            self.thread.join()
        if self._lock_file is not None:
            self._lock_file.close()  # closing the last descriptor drops the flock
            self._lock_file = None

    def step(self, *, now: float) -> float:
        """Run the entries due at `now` (time.monotonic() seconds) if this process holds the
        lock or can take it; return the time of the next step."""
        if not self._lock_taken():
            return now + LOCK_RETRY_SECONDS
        for entry in self.entries:
            if now >= self._next_run.get(entry.name, now):
                self._run(entry)
                self._next_run[entry.name] = now + entry.every
        return min(self._next_run.values(), default=now + LOCK_RETRY_SECONDS)

    def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                next_step = self.step(now=time.monotonic())
            except Exception:  # a bug of ours: the schedule must outlive it all the same
                logger.exception("Embedded beat: step failed")
                next_step = time.monotonic() + LOCK_RETRY_SECONDS
            finally:
                db.connections.close_all()  # this thread's own; none is held while it waits
            self._stopped.wait(max(0.0, next_step - time.monotonic()))

    def _lock_taken(self) -> bool:
        if self._lock_file is not None:
            return True
        try:
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            lock_file = open(self.lock_path, "a")  # noqa: SIM115 - kept open while the lock is held
        except OSError:
            logger.exception("Embedded beat: cannot open %s", self.lock_path)
            return False
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            lock_file.close()
            if not isinstance(error, BlockingIOError):  # BlockingIOError: another process has it
                logger.error("Embedded beat: cannot lock %s: %s", self.lock_path, error)
            return False
        lock_file.truncate(0)
        lock_file.write(f"{os.getpid()}\n")  # who holds it, for a person looking
        lock_file.flush()
        self._lock_file = lock_file
        logger.info(
            "Embedded beat: process %s runs %s",
            os.getpid(),
            ", ".join(f"{entry.name} every {entry.every:g} s" for entry in self.entries)
            or "nothing",
        )
        return True

    def _run(self, entry: BeatEntry) -> None:
        try:
            registered_task(entry.task).run(*entry.args, **entry.kwargs)
        except Exception:
            logger.exception("Embedded beat: %s (%s) failed", entry.name, entry.task)


def embedded_beat_start() -> EmbeddedBeat | None:
    """Start running CELERY_BEAT_SCHEDULE in this process (once); None with a broker, whose
    `celery beat` runs it, or with EMBEDDED_BEAT off."""
    global _started
    if settings.CELERY_BROKER_URL or not settings.EMBEDDED_BEAT:
        return None
    with _start_lock:
        if _started is None:
            _started = EmbeddedBeat(
                schedule=settings.CELERY_BEAT_SCHEDULE,
                lock_path=Path(settings.VAR_DIR) / LOCK_FILE_NAME,
            )
            _started.start()
        return _started


def beat_entry(name: str, spec: dict) -> BeatEntry:
    """One CELERY_BEAT_SCHEDULE entry; its schedule must be an interval."""
    every = spec["schedule"]
    if isinstance(every, timedelta):
        every = every.total_seconds()
    elif isinstance(getattr(every, "run_every", None), timedelta):  # celery.schedules.schedule
        every = every.run_every.total_seconds()
    if not isinstance(every, int | float) or every <= 0:
        raise ImproperlyConfigured(
            f"CELERY_BEAT_SCHEDULE[{name!r}]: the embedded beat runs a task every so many "
            f"seconds (a positive number, a timedelta or celery.schedules.schedule), not "
            f"{spec['schedule']!r}. Run `celery beat` with a broker for other schedules."
        )
    return BeatEntry(
        name=name,
        task=spec["task"],
        every=float(every),
        args=tuple(spec.get("args", ())),
        kwargs=dict(spec.get("kwargs", {})),
    )


def registered_task(name: str) -> Task:
    """The Celery task of that name, importing the apps' tasks modules if it is not known yet."""
    if name not in celery_app.tasks:
        celery_app.loader.import_default_modules()  # runs autodiscover_tasks (config/celery.py)
    return celery_app.tasks[name]
