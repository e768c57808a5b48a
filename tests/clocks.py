"""A worker host whose clock is off the database's."""

from datetime import timedelta

from django.utils import timezone


def clock_off_by(monkeypatch, seconds: float) -> None:
    """Set this process's clock `seconds` off the database's (a worker host whose clock is
    skewed): timezone.now() is what the process reads; the database keeps its own."""
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(seconds=seconds))
