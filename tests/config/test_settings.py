"""Settings: production refuses to start without a secret key; .env.example lists them all."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
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


def test_env_example_lists_every_setting_read_from_the_environment():
    read = re.compile(r'(?:environ\.get|environ\[|env_bool|env_list)\(?\s*"([A-Z][A-Z0-9_]+)"')
    used = {
        name
        for path in (Path(settings.BASE_DIR) / "config").rglob("*.py")
        for name in read.findall(path.read_text())
    }
    example = (Path(settings.BASE_DIR) / ".env.example").read_text()
    listed = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", example, flags=re.M))
    assert len(used) > 20
    assert used - listed == set()


@pytest.mark.django_db(transaction=True)
def test_a_new_postgresql_connection_starts_in_our_time_zone():
    """No SET TIME ZONE round trip after each connect (one per request at CONN_MAX_AGE=0)."""
    from django.db import connections

    fresh = connections.create_connection("default")
    if fresh.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    import psycopg

    # What the server says right after the connect, before Django configures anything.
    with psycopg.connect(**fresh.get_connection_params()) as raw:
        assert raw.info.parameter_status("TimeZone") == settings.TIME_ZONE
        assert fresh._configure_timezone(raw) is False  # Django has nothing left to set


def test_the_deployment_check_asks_for_a_shared_cache(settings):
    """Without CACHE_URL every web process counted its own rate limits, open claims per
    address and paid-start double clicks, and `make prod-check` said nothing."""
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    with pytest.raises(SystemCheckError, match=r"annotate\.W001.*No shared cache"):
        call_command("check", deploy=True, fail_level="WARNING", tags=["caches"])
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:6379/1",
        }
    }
    call_command("check", deploy=True, fail_level="WARNING", tags=["caches"])


def test_the_old_default_fee_rate_on_mturk_is_pointed_out(settings):
    """A deployment whose .env came from the old example kept CROWD_FEE_RATE=0.25: after the fee
    schedule every new MTurk publication stored a flat 25% (a 10-assignment HIT at $1.00 quoted
    $12.50 where MTurk charges $14.00), silently."""
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.CROWD_BACKEND = "mturk"
    settings.CROWD_FEE_RATE = "0.25"
    with pytest.raises(SystemCheckError, match=r"crowd\.W001.*CROWD_FEE_RATE=0\.25 on MTurk"):
        call_command("check", fail_level="WARNING")
    for backend, rate in (("mturk", ""), ("mturk", "0.2"), ("fake", "0.25"), ("self", "0.25")):
        settings.CROWD_BACKEND, settings.CROWD_FEE_RATE = backend, rate
        call_command("check", fail_level="WARNING")  # the schedule, a negotiated rate, no MTurk


def test_the_deployment_check_refuses_a_revision_call_timeout_not_below_the_visibility_timeout(
    settings,
):
    """Redis hands a task still running after its visibility timeout to a second worker; a
    revision call pending for less than REVISION_CALL_TIMEOUT_SECONDS is then asked (and paid
    for) again. Nothing said so when the timeout was raised to the visibility timeout."""
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 900}
    settings.REVISION_CALL_TIMEOUT_SECONDS = 900
    with pytest.raises(
        SystemCheckError, match=r"annotate\.E001.*\(900 s\) is not below .*\(900 s\)"
    ):
        call_command("check", deploy=True, tags=["celery"])
    settings.REVISION_CALL_TIMEOUT_SECONDS = 899
    call_command("check", deploy=True, fail_level="WARNING", tags=["celery"])
    # No visibility_timeout given: kombu's own hour is the one in use.
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"max_retries": 2}
    settings.REVISION_CALL_TIMEOUT_SECONDS = 3600
    with pytest.raises(SystemCheckError, match=r"annotate\.E001.*\(3600 s\)"):
        call_command("check", deploy=True, tags=["celery"])
    # Without a broker tasks run in-process and are never delivered twice.
    settings.CELERY_BROKER_URL = ""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    call_command("check", deploy=True, fail_level="WARNING", tags=["celery"])


def test_the_default_revision_call_timeout_is_below_the_default_visibility_timeout():
    from config.settings import base

    visibility = base.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    assert visibility > base.REVISION_CALL_TIMEOUT_SECONDS


@pytest.mark.django_db
def test_migrate_points_out_platform_work_that_stopped_counting():
    """A platform worker's labels without an assignment that no import marked count in no result
    since annotate 0018: `migrate` (a check of the database) says how many, so a report whose
    numbers moved with the upgrade is explained; work marked imported or of an in-house
    annotator is not named."""
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    from annotate.models import Annotator, AnnotatorKind, Label, LabelValue
    from tests.factories import project_with_tasks

    project = project_with_tasks(instructions=1, systems=1, questions=2)
    instruction = project.benchmark.instructions.get()
    response = instruction.responses.get()
    worker = Annotator.objects.create(
        name="mturk:W1", kind=AnnotatorKind.CROWD, platform="mturk", worker_id="W1"
    )
    in_house = Annotator.objects.create(name="ann", kind=AnnotatorKind.EXPERT)
    first, second = instruction.questions.order_by("position")
    Label.objects.create(
        question=first, response=response, annotator=in_house, value=LabelValue.YES
    )
    left = Label.objects.create(
        question=second, response=response, annotator=worker, value=LabelValue.NO
    )
    check = {"databases": ["default"], "fail_level": "WARNING", "tags": ["database"]}
    with pytest.raises(SystemCheckError, match=r"annotate\.W002.*1 labels and 0 direct scores"):
        call_command("check", **check)
    Label.objects.filter(pk=left.pk).update(imported=True)
    call_command("check", **check)


def test_a_broker_without_a_shared_cache_is_pointed_out_at_every_start(settings):
    """With CELERY_BROKER_URL the site is several processes (web and workers), yet without
    CACHE_URL each kept its own rate-limit counters (runs started, model calls) and paid-Start
    guard, and only `check --deploy` said so: `migrate` and `runserver` said nothing."""
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    settings.CELERY_TASK_ALWAYS_EAGER = False
    with pytest.raises(SystemCheckError, match=r"annotate\.W003.*CACHE_URL is not"):
        call_command("check", fail_level="WARNING", tags=["caches"])
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:6379/1",
        }
    }
    call_command("check", fail_level="WARNING", tags=["caches"])
    # The embedded default (no broker: one process, tasks in it) keeps its in-process cache.
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.CELERY_BROKER_URL, settings.CELERY_TASK_ALWAYS_EAGER = "", True
    call_command("check", fail_level="WARNING", tags=["caches"])
