"""Production settings refuse to start without a secret key."""

import os
import subprocess
import sys

from django.conf import settings


def _start_with_production_settings(**extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.production", **extra)
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_refuses_to_start_without_a_secret_key():
    started = _start_with_production_settings()
    assert started.returncode != 0
    assert "DJANGO_SECRET_KEY must be set in production" in started.stderr


def test_production_starts_with_a_secret_key():
    started = _start_with_production_settings(
        DJANGO_SECRET_KEY="a-long-random-secret-for-this-test", DJANGO_ALLOWED_HOSTS="example.org"
    )
    assert started.returncode == 0, started.stderr
