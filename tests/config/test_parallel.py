"""`make test` runs the suite in several pytest-xdist processes: each has its own Redis database,
so that one process's tests never empty or read another's queues and cache (tests/parallel.py)."""

import os
import subprocess
import sys

from django.conf import settings

from tests.parallel import use_worker_redis_databases, worker_redis_url


def test_each_worker_moves_the_redis_database_on_by_its_number():
    assert worker_redis_url("redis://127.0.0.1:6379/11", 0) == "redis://127.0.0.1:6379/11"
    assert worker_redis_url("redis://127.0.0.1:6379/11", 1) == "redis://127.0.0.1:6379/12"
    assert worker_redis_url("redis://127.0.0.1:6379", 2) == "redis://127.0.0.1:6379/2"
    assert worker_redis_url("rediss://u:p@cache:6380/15?ssl_cert_reqs=none", 1) == (
        "rediss://u:p@cache:6380/0?ssl_cert_reqs=none"
    )
    assert worker_redis_url("amqp://guest@127.0.0.1//", 3) == "amqp://guest@127.0.0.1//"


def test_the_environment_is_moved_once_for_the_worker_and_its_subprocesses():
    environ = {
        "PYTEST_XDIST_WORKER": "gw1",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/11",
        "CACHE_URL": "redis://127.0.0.1:6379/4",
        "CELERY_RESULT_BACKEND": "",
    }
    use_worker_redis_databases(environ)
    moved = {**environ}
    assert moved["CELERY_BROKER_URL"] == "redis://127.0.0.1:6379/12"
    assert moved["CACHE_URL"] == "redis://127.0.0.1:6379/5"
    assert moved["CELERY_RESULT_BACKEND"] == ""
    use_worker_redis_databases(environ)  # a Celery worker started by one of gw1's tests
    assert environ == moved

    alone = {"CELERY_BROKER_URL": "redis://127.0.0.1:6379/11"}  # no xdist: nothing moves
    use_worker_redis_databases(alone)
    assert alone == {"CELERY_BROKER_URL": "redis://127.0.0.1:6379/11"}


def test_a_worker_process_and_a_celery_worker_it_starts_share_one_broker_database():
    code = "from django.conf import settings; print(settings.CELERY_BROKER_URL)"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "PYTEST_XDIST_WORKER": "gw1",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/11",
    }
    env.pop("TEST_REDIS_WORKER", None)
    script = (
        "import os, subprocess, sys, django; django.setup(); " + code + "; "
        "sys.stdout.flush(); "
        f"subprocess.run([sys.executable, '-c', 'import django; django.setup(); {code}'])"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["redis://127.0.0.1:6379/12"] * 2
