"""Settings shared by every environment. Every value can be set from the environment."""

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "insecure-embedded-default-key-change-me")
DEBUG = env_bool("DJANGO_DEBUG", True)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "annotate",
    "annotate.crowd",
    "evaluation",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.framing.FrameAncestorsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "0")),
        # A kept connection is tested before each request reuses it, so a restarted PostgreSQL
        # costs the requests made while it is down, not the first one on each stale connection.
        conn_health_checks=env_bool("DATABASE_CONN_HEALTH_CHECKS", True),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default lives in var/, which a fresh checkout does not have yet.
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # Several writers (the dev server, a management command) wait for each other instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
# Uploaded files (imports waiting for a worker). Web and workers must share this folder.
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "uploads"))
MEDIA_URL = "/media/"
# Refuse uploads bigger than this (bytes); a million labels as CSV is about 60 MB.
IMPORT_MAX_UPLOAD_BYTES = int(os.environ.get("IMPORT_MAX_UPLOAD_BYTES", str(500 * 1024 * 1024)))

# A shared cache (Redis in production) makes the login limit hold across worker processes.
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": os.environ["CACHE_URL"],
        }
        if os.environ.get("CACHE_URL")
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
LOGIN_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "10"))
LOGIN_FAILURE_WINDOW = int(os.environ.get("LOGIN_FAILURE_WINDOW", "900"))

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "annotate.http.api_exception_handler",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
}
SPECTACULAR_SETTINGS = {"TITLE": "InFoBench annotation API", "VERSION": "1"}

# Background work. Without a broker every task runs in-process, at once, in the caller.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", "") or None
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A task taken by a worker that is then killed (SIGKILL, OOM, lost machine) goes back to the
# queue after this many seconds (Redis transport). Longer than any task runs and than the longest
# retry countdown (600 s), else a task still running is handed to a second worker as well.
# Sending gives up on an unreachable broker after about half a second instead of kombu's 4+ s
# of reconnecting per message: the web request stores the task for the beat and answers
# (annotate.services.deferred_tasks). Workers reconnect on their own schedule.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": int(os.environ.get("CELERY_VISIBILITY_TIMEOUT", "900")),
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE: dict = {
    # Abandoned claims give their slot back (annotate.services.assignments.assignments_expire).
    "annotate-expire-assignments": {
        "task": "annotate.tasks.expire_assignments",
        "schedule": float(os.environ.get("ASSIGNMENT_EXPIRY_INTERVAL", "60")),
    },
    # Tasks whose sending failed while Redis was down (annotate.services.deferred_tasks).
    "annotate-send-deferred-tasks": {
        "task": "annotate.tasks.send_deferred_tasks",
        "schedule": float(os.environ.get("DEFERRED_TASK_INTERVAL", "60")),
    },
}

# Outside systems, each chosen by a dotted path or a short name (see the modules that read them).
CROWD_BACKEND = os.environ.get("CROWD_BACKEND", "fake")
MTURK_SANDBOX = env_bool("MTURK_SANDBOX", True)
MTURK_ENDPOINT_URL = os.environ.get("MTURK_ENDPOINT_URL", "")
# boto3 retries throttled calls itself this many times in all; the Celery task then backs off.
MTURK_MAX_ATTEMPTS = int(os.environ.get("MTURK_MAX_ATTEMPTS", "4"))
# The public HTTPS address of this site: MTurk frames our task pages from it.
CROWD_PUBLIC_URL = os.environ.get("CROWD_PUBLIC_URL", "")
CROWD_FEE_RATE = os.environ.get("CROWD_FEE_RATE", "0.25")
# Where a worker's browser may post the finished assignment (MTurk's turkSubmitTo hosts), and the
# origins that may frame the worker pages. Tests add the fake server through the extra lists.
CROWD_SUBMIT_HOSTS = ["www.mturk.com", "workersandbox.mturk.com"] + env_list(
    "CROWD_EXTRA_SUBMIT_HOSTS", ""
)
CROWD_FRAME_ANCESTORS = ["https://www.mturk.com", "https://workersandbox.mturk.com"] + env_list(
    "CROWD_EXTRA_FRAME_ANCESTORS", ""
)
CROWD_SYNC_INTERVAL_SECONDS = int(os.environ.get("CROWD_SYNC_INTERVAL_SECONDS", "600"))
X_FRAME_OPTIONS = "DENY"
# Review suggests approving a worker whose gold-question accuracy is at least this.
CROWD_GOLD_MIN_ACCURACY = float(os.environ.get("CROWD_GOLD_MIN_ACCURACY", "0.7"))
CELERY_BEAT_SCHEDULE["crowd-sync"] = {
    "task": "annotate.crowd.tasks.sync_all_publications",
    "schedule": CROWD_SYNC_INTERVAL_SECONDS,
}
JUDGE_BACKEND = os.environ.get("JUDGE_BACKEND", "fake")
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
EXPORT_DIR = Path(os.environ.get("EXPORT_DIR", VAR_DIR / "exports"))
EXPORT_S3_BUCKET = os.environ.get("EXPORT_S3_BUCKET", "")
AWS_S3_ENDPOINT_URL = os.environ.get("AWS_S3_ENDPOINT_URL", "") or None
# Reports: what an expert's hour costs (the paper's $59/h), and the bootstrap behind every CI.
EXPERT_HOURLY_RATE_USD = float(os.environ.get("EXPERT_HOURLY_RATE_USD", "59"))
REPORT_BOOTSTRAP_RESAMPLES = int(os.environ.get("REPORT_BOOTSTRAP_RESAMPLES", "1000"))
REPORT_BOOTSTRAP_SEED = int(os.environ.get("REPORT_BOOTSTRAP_SEED", "0"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # The openai client's HTTP library logs every request at INFO: thousands per judge run.
    # matplotlib's PDF back-end logs every font table it subsets at INFO.
    "loggers": {
        "httpx2": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "fontTools": {"level": "WARNING"},
    },
}
