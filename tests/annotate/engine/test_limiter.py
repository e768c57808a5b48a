"""The client-side RPM / TPM limiter, on a fake clock (no sleeping)."""

import pytest

from annotate.engine.limiter import RateLimiter


class FakeClock:
    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def test_requests_per_minute_allow_a_short_burst_then_pace():
    clock = FakeClock()
    limiter = RateLimiter(
        requests_per_minute=60, tokens_per_minute=10**9, clock=clock, sleep=clock.sleep
    )
    starts = []
    for _ in range(10):
        limiter.acquire(1)
        starts.append(clock.now - 100)
    assert starts[:6] == [0] * 6  # six seconds' worth of budget at once
    assert starts[6:] == pytest.approx([1, 2, 3, 4])  # then one a second


def test_tokens_per_minute_hold_back_big_requests_and_settle_corrects_the_estimate():
    clock = FakeClock()
    limiter = RateLimiter(
        requests_per_minute=10**6, tokens_per_minute=600, clock=clock, sleep=clock.sleep
    )  # 10 tokens a second, 60 in the bucket
    limiter.acquire(30)
    limiter.acquire(30)
    assert clock.now == 100
    limiter.acquire(30)
    assert clock.now == pytest.approx(103)
    limiter.settle(estimated=30, actual=10)  # 20 tokens come back
    limiter.acquire(20)
    assert clock.now == pytest.approx(103)


def test_a_request_bigger_than_the_bucket_waits_for_a_full_bucket_not_for_ever():
    clock = FakeClock()
    limiter = RateLimiter(
        requests_per_minute=10**6, tokens_per_minute=600, clock=clock, sleep=clock.sleep
    )
    limiter.acquire(1000)
    limiter.acquire(1000)
    assert clock.now - 100 == pytest.approx(100)  # 940 tokens of debt + a full bucket of 60
