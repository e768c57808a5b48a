"""Cached values built once however many requests ask for them at the same time.

A report page draws its figures in separate requests; on a cold cache each used to compute the
same report (four figures, four computations of seconds each). `cache_get_or_build` lets one
request build it under a short lock kept in the cache itself (the in-process memory cache, or
Redis when CACHE_URL is set, shared by every worker process) while the others wait for the
value.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache

T = TypeVar("T")

FIRST_WAIT_SECONDS = 0.02  # a waiter's first look again; doubled each time up to the last
LAST_WAIT_SECONDS = 0.5
FAILED_SECONDS = 10  # after a build failed, callers build each for themselves this long


def cache_get_or_build(*, key: str, build: Callable[[], T | None], timeout: int) -> T | None:
    """Return the cached value of `key`, building it with `build()` once for all callers.

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
    """
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
            return build()
        _wait(wait)
        wait = min(wait * 2, LAST_WAIT_SECONDS)


def _wait(seconds: float) -> None:
    time.sleep(seconds)


def _build_holding(key: str, lock: str, token: str, build: Callable[[], T | None], timeout: int):
    try:
        # Built by the lock's last holder between our miss and our taking the lock.
        value = cache.get(key)
        if value is not None:
            return value
        try:
            value = build()
        except Exception:
            cache.set(f"{key}:failed", True, FAILED_SECONDS)
            raise
        if value is not None:
            cache.set(key, value, timeout)
        return value
    finally:
        # Not a lock that expired and was taken over meanwhile: that one is its new holder's.
        if cache.get(lock) == token:
            cache.delete(lock)
