"""Cached values built once however many requests ask for them at the same time.

A report page draws its figures in separate requests; on a cold cache each used to compute the
same report (four figures, four computations of seconds each). `cache_get_or_build` lets one
request build it under a short lock kept in the cache itself (the in-process memory cache, or
Redis when CACHE_URL is set, shared by every worker process) while the others wait for the
value.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
import uuid
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache

from evaluation.selectors.snapshot import read_snapshot

T = TypeVar("T")

FIRST_WAIT_SECONDS = 0.02  # a waiter's first look again; doubled each time up to the last
LAST_WAIT_SECONDS = 0.5
FAILED_SECONDS = 10  # after a build failed, callers build each for themselves this long


def cache_get_or_build(
    *, key: str, read_key: Callable[[], str], build: Callable[[], T | None], timeout: int
) -> T | None:
    """Return the cached value of `key` (read_key() as the caller read it), building it with
    `build()` once for all callers, and storing it under the key of the data it was built from.

    The first caller to miss takes the lock `<key>:building` (`cache.add`, atomic in every
    backend) and stores what `build()` returns (None is returned and not stored: nothing to
    cache). The others wait for the value while the lock is held. The lock expires after
    CACHE_BUILD_LOCK_SECONDS, so when its holder dies (a killed worker) a waiter takes it over
    and builds; a holder whose `build()` raises lets it go at once, and the next waiter builds
    (and meets the same error itself). A build that outlasts the lock is started once more by
    a waiter (CACHE_BUILD_LOCK_SECONDS is set above the longest build). For FAILED_SECONDS
    after a failed build, a caller that finds the lock taken builds for itself instead of
    waiting: waiters queued behind failing builds would each hold a web worker for the length
    of every build before theirs.

    A key fingerprints the data by queries of its own, before the build's reads: a row
    committed between the two would be in a value stored under the key of the data without it,
    and served as current again once that row is deleted (the fingerprint back where it was).
    So the build runs in one read_snapshot with read_key() read again first (the build's own
    read_snapshot blocks share it), and its value is stored under that key. When the data moved
    since `key` was read, the value of the data as it stands may be cached already (by a caller
    who read the new key, or by the build this caller waited for): it is served without a build.
    """

    def build_in_snapshot() -> tuple[str, T | None]:
        with read_snapshot():
            current = read_key()
            if current != key:
                value = cache.get(current)
                if value is not None:
                    return current, value
            return current, build()

    return _get_or_build(key, build_in_snapshot, timeout)


def _get_or_build(key: str, build: Callable[[], tuple[str, T | None]], timeout: int) -> T | None:
    """cache_get_or_build's lock and wait, `build` returning the key to store its value under."""
    lock = f"{key}:building"
    wait = FIRST_WAIT_SECONDS
    while True:
        value = cache.get(key)
        if value is not None:
            return value
        token = uuid.uuid4().hex
        if cache.add(lock, token, settings.CACHE_BUILD_LOCK_SECONDS):
            return _build_holding(key, lock, token, build, timeout)
        if cache.get(f"{key}:failed"):
            return build()[1]
        _wait(wait)
        wait = min(wait * 2, LAST_WAIT_SECONDS)


def _wait(seconds: float) -> None:
    time.sleep(seconds)


def _build_holding(
    key: str, lock: str, token: str, build: Callable[[], tuple[str, T | None]], timeout: int
):
    try:
        # Built by the lock's last holder between our miss and our taking the lock.
        value = cache.get(key)
        if value is not None:
            return value
        try:
            built_key, value = build()
        except Exception:
            cache.set(f"{key}:failed", True, FAILED_SECONDS)
            raise
        if value is not None:
            cache.set(built_key, value, timeout)
        return value
    finally:
        # Not a lock that expired and was taken over meanwhile: that one is its new holder's.
        if cache.get(lock) == token:
            cache.delete(lock)


# The packages whose code decides what a report or figure holds: evaluation computes and draws,
# annotate decides what counts (annotator kinds, counted work, practice projects...).
CODE_PACKAGES = ("annotate", "evaluation")
CODE_ROOTS = tuple(Path(__file__).resolve().parent.parent / package for package in CODE_PACKAGES)
# The libraries that compute and draw them: an upgrade may move a figure as a code change does.
CODE_LIBRARIES = ("numpy", "matplotlib")
# The settings the numbers of a report or figure read: the expert's hourly rate (InFoBench Table
# 4), the bootstrap behind every interval (InFoBench, KIWI, verbalizer), the flat crowd fee (the
# crowd cost of work priced at today's fee). Every report's key has them all, so one added here
# needs no thought about which key reads it.
REPORT_SETTINGS = (
    "EXPERT_HOURLY_RATE_USD",
    "REPORT_BOOTSTRAP_RESAMPLES",
    "REPORT_BOOTSTRAP_SEED",
    "CROWD_FEE_RATE",
)


def computation_version() -> str:
    """Name what computes a cached report or figure (its code and the settings it reads), for
    its cache key.

    The code's part is read once per process (code_version); the settings' part each time it is
    asked for (settings_version): a restart with another rate and a test's override_settings
    change the settings, and the key must move with them (microseconds: a few values hashed).
    """
    return f"{code_version()}-{settings_version()}"


@functools.cache
def code_version() -> str:
    """Name the code that computes the cached reports and figures, for their cache keys.

    A deploy that changes how a figure is computed must not serve the figure the old code
    computed (the cache is Redis, which outlives the deploy). A version constant bumped by hand
    (the keys' "v6", "v3" and DRAWING_VERSION, kept) holds only while whoever changes a
    computation remembers it, also in code far from the key (a counting rule in annotate):
    the key holds a digest of the source of every Python module of CODE_PACKAGES and the
    versions of CODE_LIBRARIES as well. Broad on purpose: a deploy touching any module of those
    packages recomputes each report once (seconds), where a list of the modules a report runs
    would go stale silently as the code moves.

    Read once per process, when it loads its code: the evaluation app's ready() asks for it
    (about 17 ms of CPU of every start). Read on the first report instead, a process started
    before a deploy and still running the old code would hash the new files and cache the old
    code's report under the new code's key, for every process of the new code to serve.
    """
    libraries = [f"{name}=={_library_version(name)}" for name in CODE_LIBRARIES]
    return source_digest(CODE_ROOTS, extra=libraries)


def settings_version() -> str:
    """Return a short digest of the values of REPORT_SETTINGS as this process has them now."""
    values = repr([(name, getattr(settings, name, None)) for name in REPORT_SETTINGS])
    return hashlib.sha256(values.encode()).hexdigest()[:12]


def source_digest(roots: Iterable[Path], *, extra: Iterable[str] = ()) -> str:
    """Return a short digest of every `*.py` file under `roots` (path and content, in path
    order) and the `extra` strings.

    What is not a regular file is left out (an editor's lock file `.#name.py` is a dangling
    symlink), and so is a file or folder that cannot be read (deleted during the walk): a report
    is served all the same, its key naming the code that could be read.
    """
    digest = hashlib.sha256()
    for root in roots:
        for path in _python_files(root):
            try:
                if not path.is_file():
                    continue
                content = path.read_bytes()
            except OSError:
                continue
            digest.update(str(path.relative_to(root.parent)).encode() + b"\0")
            digest.update(content + b"\0")
    for text in extra:
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()[:16]


def _python_files(root: Path) -> list[Path]:
    # os.walk, not Path.rglob: rglob raises when a folder goes away while it lists it.
    found = []
    for folder, _folders, names in os.walk(root):
        found.extend(Path(folder, name) for name in names if name.endswith(".py"))
    return sorted(found)


def _library_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"
