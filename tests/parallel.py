"""The suite in several processes (pytest-xdist, `make test`): one Redis database per process.

pytest-django gives each xdist worker (gw0, gw1, ...) a test database of its own; this gives each
a Redis database of its own as well, so that one's tests never empty another's (a cache's
clear() is FLUSHDB) nor read its broker queues, results or cache keys. config/settings/test.py
calls it before reading the Redis URLs.
"""

import os
from urllib.parse import urlsplit, urlunsplit

REDIS_URL_VARIABLES = ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CACHE_URL")


def worker_redis_url(url: str, worker: int) -> str:
    """`url` with its Redis database number moved on by `worker`, modulo Redis's 16 databases:
    redis://127.0.0.1:6379/11 stays .../11 for worker 0 and is .../12 for worker 1. Anything but
    a redis:// or rediss:// URL is returned as it is."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or worker == 0:
        return url
    database = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(database + worker) % 16}"))


def use_worker_redis_databases(environ=os.environ) -> None:
    """In xdist worker gwN, move the Redis URLs of `environ` on by N databases, once.

    They are changed in the environment, not only in the settings: a Celery worker or server a
    test starts (a subprocess, whatever its settings module) and the tests reading a URL from the
    environment use the same database. A subprocess inherits PYTEST_XDIST_WORKER with the URLs
    already moved: TEST_REDIS_WORKER says they were, for that worker.
    """
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or environ.get("TEST_REDIS_WORKER") == worker:
        return
    for name in REDIS_URL_VARIABLES:
        if environ.get(name):
            environ[name] = worker_redis_url(environ[name], int(worker[2:]))
    environ["TEST_REDIS_WORKER"] = worker
