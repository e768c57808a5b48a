"""A client-side requests-per-minute and tokens-per-minute limiter shared by threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """A bucket refilled at `per_minute / 60` units a second, holding at most `capacity`.

    A request needing more than the capacity waits for a full bucket and then takes it all
    (going into debt), so one huge prompt slows the run down instead of blocking it for ever.
    """

    def __init__(self, per_minute: float, *, capacity: float, now: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, capacity)
        self.level = self.capacity
        self.updated = now

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    def wait_time(self, amount: float, now: float) -> float:
        self._refill(now)
        needed = min(amount, self.capacity)
        return 0.0 if self.level >= needed else (needed - self.level) / self.rate

    def take(self, amount: float, now: float) -> None:
        self._refill(now)
        self.level -= amount

    def give_back(self, amount: float) -> None:
        self.level = min(self.capacity, self.level + amount)


class RateLimiter:
    """Hold callers back so that requests and tokens stay under per-minute limits.

    The buckets hold `burst_seconds` worth of budget, so a run starts at once but cannot spend a
    whole minute's allowance in the first second (servers enforce limits on shorter windows too).
    """

    def __init__(
        self,
        *,
        requests_per_minute: int,
        tokens_per_minute: int,
        burst_seconds: float = 6.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.clock, self.sleep = clock, sleep
        now = clock()
        self.requests = TokenBucket(
            requests_per_minute, capacity=requests_per_minute * burst_seconds / 60, now=now
        )
        self.tokens = TokenBucket(
            tokens_per_minute, capacity=tokens_per_minute * burst_seconds / 60, now=now
        )
        self.lock = threading.Lock()

    def acquire(self, tokens: int) -> None:
        """Block until one request of about `tokens` tokens fits in both budgets, then take it."""
        while True:
            with self.lock:
                now = self.clock()
                wait = max(self.requests.wait_time(1, now), self.tokens.wait_time(tokens, now))
                if wait <= 0:
                    self.requests.take(1, now)
                    self.tokens.take(tokens, now)
                    return
            self.sleep(wait)

    def settle(self, *, estimated: int, actual: int) -> None:
        """Correct the token budget once a reply says how many tokens the request really used."""
        with self.lock:
            if actual > estimated:
                self.tokens.take(actual - estimated, self.clock())
            else:
                self.tokens.give_back(estimated - actual)
