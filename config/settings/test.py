"""Settings for the test suite: SQLite unless DATABASE_URL is set, fast hashing."""

from tests.parallel import use_worker_redis_databases

# With pytest-xdist each test process has a Redis database of its own (tests/parallel.py): the
# URLs in the environment are moved on before they are read here.
use_worker_redis_databases()

from config.settings.base import *  # noqa: E402, F403
from config.settings.base import ENGINE_API_KEY_ENVS  # noqa: E402

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# The tests' fake MTurk server (MTURK_ENDPOINT_URL) plays MTurk production, whose work counts
# and is paid; tests of the requester sandbox's test work set this to True.
MTURK_SANDBOX = False
# Tests run background work in-process; the one test that starts a real worker turns this off.
CELERY_TASK_ALWAYS_EAGER = True
# Threads do not see a test's open transaction: tests run background work inline (the browser
# tests, on a live server, turn threads on).
BACKGROUND_THREADS = False
# Nor does a beat run beside the tests (config.wsgi starts one): a test starts its own.
EMBEDDED_BEAT = False
# The judge tests read their stub's key from a variable of their own.
ENGINE_API_KEY_ENVS = [*ENGINE_API_KEY_ENVS, "JUDGE_TEST_KEY"]
# API rate limits high enough that no test meets them; tests/config/test_api_throttling.py sets
# low ones explicitly.
REST_FRAMEWORK = {  # noqa: F405
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_THROTTLE_RATES": {
        "user": "100000/minute",
        "anon": "100000/minute",
        "annotator-work": "100000/minute",
        "crowd-pages": "100000/minute",
        "crowd-starts": "100000/minute",
        "uploads": "100000/minute",
        "api-tokens": "100000/minute",
        "api-bad-tokens": "100000/minute",
        "model-calls": "100000/minute",
        "run-starts": "100000/minute",
        "exports": "100000/minute",
        "figures": "100000/minute",
        "pages": "100000/minute",
        "polls": "100000/minute",
    },
}
# On SQLite the test database is a file, not Django's shared-cache in-memory default: browser
# tests run a live server and background threads, each with its own connection, and shared-cache
# connections refuse each other at once ("database table is locked"), whatever the busy
# timeout; a file database makes them wait (IMMEDIATE transactions, timeout, WAL: base.py).
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")  # noqa: F405
    }
# The offline crowd platform's state, one file per test process (tests/conftest.py empties it
# before each test).
CROWD_FAKE_STATE_FILE = VAR_DIR / f"test-crowd-fake-{os.getpid()}.json"  # noqa: F405
