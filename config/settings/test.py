"""Settings for the test suite: SQLite unless DATABASE_URL is set, fast hashing."""

from config.settings.base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Tests run background work in-process; the one test that starts a real worker turns this off.
CELERY_TASK_ALWAYS_EAGER = True
