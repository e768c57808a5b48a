"""Settings shared by every environment. Every value can be set from the environment."""

import os
import secrets
from datetime import timedelta
from decimal import Decimal
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


def embedded_secret_key(var_dir: Path) -> str:
    """Return the key kept in var_dir/secret_key, creating a random one (mode 0600) on first run.

    The embedded default must not share one key with every other checkout: a known key lets
    anyone sign a crowd worker token or a session cookie for this site.
    """
    path = var_dir / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    var_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process of this checkout won the race: use its key
        return path.read_text().strip()
    with os.fdopen(descriptor, "w") as file:
        file.write(key + "\n")
    return key


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or embedded_secret_key(VAR_DIR)
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
    "knox",
    "django.forms",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "csp",
    "axes",
    "annotate",
    "annotate.crowd",
    "annotate.engine",
    "annotate.verbalizer",
    "annotate.revision",
    "evaluation.revision",
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
    "csp.middleware.CSPMiddleware",
    # Every page request on its user's (or address's) page limit; after authentication so a
    # logged-in user is counted as themselves (annotate/throttling.py).
    "annotate.http.PageRateLimitMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

# django-axes watches every password check (the login form, the admin, DRF's HTTP Basic) through
# Django's authenticate(); its back-end refuses even the right password while locked out.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Django's ModelBackend reading the logged-in user with one precompiled statement.
    "config.authentication.ModelBackend",
]

# Django's database sessions, read in plain SQL (config/sessions.py).
SESSION_ENGINE = "config.sessions"

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

# Forms render through templates/django/forms/ (one layout for every form of the site).
FORM_RENDERER = "django.forms.renderers.TemplatesSetting"

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
                "config.navigation.navigation",
            ],
            "builtins": ["annotate.crowd.templatetags.crowd_names"],
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
    # Several writers (the dev server's threads, a management command) wait for each other
    # instead of failing: every transaction takes the write lock when it begins (IMMEDIATE), so
    # none has to upgrade a read lock midway, which SQLite refuses at once ("database is
    # locked") whatever the busy timeout; the timeout then covers every wait. WAL lets readers
    # go on while one writes.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        }
    )
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
# Pages write dates as 2026-11-27 18:05 UTC (config/formats/en/formats.py), not "Nov. 27, 2026,
# 6:05 p.m.": since Django 5 the locale's formats win over DATETIME_FORMAT in settings.
FORMAT_MODULE_PATH = ["config.formats"]
# The annotator's hot-path statements (annotate.compiled.prepared_cursor) run prepared: planned
# once per kept connection. Turn off behind a pooler in transaction mode that cannot keep
# prepared statements (PgBouncer before 1.21, or without max_prepared_statements).
DATABASE_PREPARED_STATEMENTS = env_bool("DATABASE_PREPARED_STATEMENTS", True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    # The session starts in our time zone: otherwise Django sends SET TIME ZONE after every
    # connect (a server whose default is e.g. Etc/UTC), a round trip per request when each
    # request opens its own connection (DATABASE_CONN_MAX_AGE=0).
    _options["options"] = f"{_options.get('options', '')} -c TimeZone={TIME_ZONE}".strip()
    # psycopg prepares a statement of a server-binding cursor the first time it runs (Django's
    # own cursors bind client-side and are never prepared); None turns preparing off.
    _options["prepare_threshold"] = 0 if DATABASE_PREPARED_STATEMENTS else None

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
# Uploaded files (imports waiting for a worker). Web and workers must share this folder.
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "uploads"))
MEDIA_URL = "/media/"
# Refuse uploads bigger than this (bytes); a million labels as CSV is about 60 MB.
IMPORT_MAX_UPLOAD_BYTES = int(os.environ.get("IMPORT_MAX_UPLOAD_BYTES", str(500 * 1024 * 1024)))
# Every file part passes this handler first: nothing of a request without a logged-in user, and
# nothing of a file past IMPORT_MAX_UPLOAD_BYTES, is stored (annotate/upload_handlers.py).
FILE_UPLOAD_HANDLERS = [
    "annotate.upload_handlers.UploadLimitHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# The API imports a file up to this size in the request (answering what it did, or each wrong
# line); a larger one is queued as the Import page queues every upload (202, a status URL).
API_IMPORT_INLINE_BYTES = int(os.environ.get("API_IMPORT_INLINE_BYTES", str(5 * 1024 * 1024)))
# A running import stamps its heartbeat this often (seconds); one silent for IMPORT_STALE_SECONDS
# (its worker was killed) is marked failed by the beat and when the import pages are read.
IMPORT_HEARTBEAT_SECONDS = float(os.environ.get("IMPORT_HEARTBEAT_SECONDS", "30"))
IMPORT_STALE_SECONDS = int(os.environ.get("IMPORT_STALE_SECONDS", "600"))

# A shared cache (Redis in production); the login limit keeps its counters there (AXES_HANDLER).
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
# A report (or figure) missing from the cache is built by one request while the others wait
# (evaluation/caching.py); a builder silent this long (its worker was killed) is taken over.
CACHE_BUILD_LOCK_SECONDS = int(os.environ.get("CACHE_BUILD_LOCK_SECONDS", "60"))
# After LOGIN_FAILURE_LIMIT failed logins from one address, or for one username, every login of
# that address or username is refused (429) for LOGIN_FAILURE_WINDOW seconds, right password or not.
LOGIN_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "10"))
LOGIN_FAILURE_WINDOW = int(os.environ.get("LOGIN_FAILURE_WINDOW", "900"))
# Counters in Redis when there is one (CACHE_URL), else in the database: the in-process cache
# would not be shared by a second process (a management command, a second gunicorn worker).
AXES_HANDLER = (
    "axes.handlers.cache.AxesCacheHandler"
    if os.environ.get("CACHE_URL")
    else "axes.handlers.database.AxesDatabaseHandler"
)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(seconds=LOGIN_FAILURE_WINDOW)
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
AXES_LOCKOUT_CALLABLE = "annotate.login.lockout_response"
# The address as the page and API limits count it: REMOTE_ADDR, or behind TRUSTED_PROXY_COUNT
# proxies the client's (without it every login behind a proxy shared one lockout).
AXES_CLIENT_IP_CALLABLE = "annotate.login.client_address"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no version banner on every management command

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# A form whose CSRF token went stale (a login or logout in another tab) gets a page in the
# site's layout saying what to do, not Django's page about cookie settings.
CSRF_FAILURE_VIEW = "config.error_views.csrf_failure"

REST_FRAMEWORK = {
    # A token first (knox: only its hash is stored; a fast SHA-512, where HTTP Basic runs the
    # password hasher on every request): being first, its "WWW-Authenticate: Token" makes an
    # anonymous request answer 401 rather than 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "annotate.login.LimitedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        "annotate.login.LimitedBasicAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "annotate.parsers.DepthLimitedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "annotate.http.api_exception_handler",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    # Limits count the client's REMOTE_ADDR, as the login limit does (django-axes): without this
    # DRF takes a client's own X-Forwarded-For header as its address, a new one per request.
    # Behind N reverse proxies that each append the address they saw to X-Forwarded-For, set
    # TRUSTED_PROXY_COUNT=N: the address the last one appended is the client's (with 0 every
    # client is the proxy's address, and all crowd workers share one page and start limit).
    "NUM_PROXIES": int(os.environ.get("TRUSTED_PROXY_COUNT", "0")),
    # Every API request is rate-limited (annotate/throttling.py); "N/second|minute|hour|day".
    "DEFAULT_THROTTLE_CLASSES": [
        "annotate.throttling.UserRateThrottle",
        "annotate.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": os.environ.get("API_RATE_USER", "1000/hour"),
        "anon": os.environ.get("API_RATE_ANON", "100/hour"),
        "annotator-work": os.environ.get("API_RATE_ANNOTATOR_WORK", "60/minute"),
        # The crowd worker pages (no login), per address: every page, and a self-hosted link's
        # starts (each makes a participant and claims a task).
        "crowd-pages": os.environ.get("CROWD_RATE_PAGES", "300/minute"),
        "crowd-starts": os.environ.get("CROWD_RATE_STARTS", "60/hour"),
        # Uploads on the import, study and dataset pages, per user.
        "uploads": os.environ.get("UPLOAD_RATE", "60/hour"),
        # API tokens made on the API tokens page, per user.
        "api-tokens": os.environ.get("API_TOKEN_RATE", "20/hour"),
        # Requests with a wrong API token, per address (refused before any other limit runs).
        "api-bad-tokens": os.environ.get("API_RATE_BAD_TOKENS", "30/hour"),
        # Revision session actions that send a model call (start, new instruction, retry), per
        # user: a turn is read and rated before the next, so an annotator sends a few a minute
        # at most; 120/hour leaves room for that and stops endless retries of a failing call.
        "model-calls": os.environ.get("MODEL_CALL_RATE", "120/hour"),
        # Engine runs started or run again (generation, judges, KIWI classifiers, verbalizer;
        # pages and API alike), per user, admins included: a run is a batch of model calls, so
        # a person starts a few an hour; this stops a script or a stuck form starting runs
        # without end on the endpoints' shared pacing. Management commands are not counted.
        "run-starts": os.environ.get("RUN_START_RATE", "30/hour"),
        # Report exports (each builds the report, draws every figure, writes a zip), per user.
        "exports": os.environ.get("EXPORT_RATE", "20/hour"),
        # Report figures (InFoBench, revision, verbalizer; the pages' images and the APIs alike),
        # per user: one not in the cache is drawn on the request. A report page loads at most
        # five, so 600/hour is 120 loads of the largest page an hour.
        "figures": os.environ.get("FIGURE_RATE", "600/hour"),
        # Every other page (lists, reports, forms, the admin site; the login page per address),
        # per user: a researcher clicking around opens a page every few seconds, a busy minute
        # a few dozen; this stops a script or a runaway tab (annotate.http.PageRateLimitMiddleware).
        "pages": os.environ.get("PAGE_RATE", "300/minute"),
        # What a page asks for again and again while work runs (a run's or an export's progress
        # JSON, a page reloading itself every 2 s, the API's progress views), per user: a page
        # polling every 2 s asks 30 times a minute, so 600/minute is twenty such tabs at once.
        "polls": os.environ.get("POLL_RATE", "600/minute"),
    },
}
# API tokens (django-rest-knox), made by each user on /accounts/tokens/: a token stops working
# API_TOKEN_TTL_DAYS days after it was made (0: never).
API_TOKEN_TTL_DAYS = int(os.environ.get("API_TOKEN_TTL_DAYS", "30"))
REST_KNOX = {
    "TOKEN_TTL": timedelta(days=API_TOKEN_TTL_DAYS) if API_TOKEN_TTL_DAYS > 0 else None,
    "AUTO_REFRESH": False,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "InFoBench annotation API",
    "VERSION": "1",
    # Swagger UI and ReDoc from our own static files (drf-spectacular-sidecar), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Table 4's acc_na and pld_na share their codes: one enum, not two names for it.
    "ENUM_NAME_OVERRIDES": {"SourceNaReasonEnum": "evaluation.report_formats.SOURCES_NA_REASONS"},
}

# One Content-Security-Policy on every response (django-csp's middleware): our own scripts and
# styles only, nothing from elsewhere, never framed. Model output and imported text on a page can
# then run nothing even if escaping failed. The crowd worker pages widen frame-ancestors and
# form-action (annotate.crowd.worker_views); figures served on their own narrow it further.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Background work. Without a broker every task runs in-process, at once, in the caller.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", "") or None
# /health/ checks the broker (a new connection) at most once per this many seconds in each
# process, however often it is asked (config.health); 0: at every request.
HEALTH_BROKER_CHECK_SECONDS = float(os.environ.get("HEALTH_BROKER_CHECK_SECONDS", "5"))
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
# Without a broker, long work a page starts (report exports) runs in a thread of the process, so
# the request returns at once; with one, in a Celery worker.
BACKGROUND_THREADS = not CELERY_BROKER_URL
# Without a broker there is no `celery beat` either: the process serving the site runs
# CELERY_BEAT_SCHEDULE in a thread, one process per VAR_DIR at a time (config/embedded_beat.py).
# Ignored with a broker (run one `celery beat` then); false: nothing runs the schedule.
EMBEDDED_BEAT = env_bool("EMBEDDED_BEAT", True)

# Parts of the demo that live outside `annotate` (which never imports `evaluation`), called by
# `manage.py load_demo` after the benchmark and the accounts; each returns lines to print.
DEMO_LOADERS = ["evaluation.services.demo.demo_judge_load"]
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A task taken by a worker that is then killed (SIGKILL, OOM, lost machine) goes back to the
# queue after this many seconds (Redis transport). Longer than the longest retry countdown (600 s).
# A task still running after this long is handed to a second worker as well: every task must be
# safe then (a model run's chunk waits for its lease, ENGINE_CHUNK_LEASE_SECONDS below; every
# task's guard: docs/reliability.md, "Every other task delivered twice").
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
# A revision session's model call still pending after this many seconds is shown failed (Retry),
# and a delivery of its task that comes later calls nothing. It must stay below the visibility
# timeout above: Redis hands a task still running after that to a second worker, which would
# otherwise ask (and pay for) the same call again (annotate.E001, `check --deploy`).
REVISION_CALL_TIMEOUT_SECONDS = int(os.environ.get("REVISION_CALL_TIMEOUT_SECONDS", "300"))
CELERY_BEAT_SCHEDULE: dict = {
    # Abandoned claims give their slot back (annotate.services.assignments.assignments_expire).
    "annotate-expire-assignments": {
        "task": "annotate.tasks.expire_assignments",
        "schedule": float(os.environ.get("ASSIGNMENT_EXPIRY_INTERVAL", "60")),
    },
    # Imports whose worker died mid-run are failed (annotate.services.import_jobs).
    "annotate-fail-stale-imports": {
        "task": "annotate.tasks.fail_stale_imports",
        "schedule": 60.0,
    },
    # Tasks whose sending failed while Redis was down (annotate.services.deferred_tasks).
    "annotate-send-deferred-tasks": {
        "task": "annotate.tasks.send_deferred_tasks",
        "schedule": float(os.environ.get("DEFERRED_TASK_INTERVAL", "60")),
    },
}

# Outside systems, each chosen by a dotted path or a short name (see the modules that read them).
CROWD_BACKEND = os.environ.get("CROWD_BACKEND", "fake")
# The offline demo platform's HITs, workers and payments (annotate/crowd/fake.py): a file, so
# they outlive a restart of the server.
CROWD_FAKE_STATE_FILE = Path(
    os.environ.get("CROWD_FAKE_STATE_FILE", VAR_DIR / "crowd-fake-platform.json")
)
MTURK_SANDBOX = env_bool("MTURK_SANDBOX", True)
MTURK_ENDPOINT_URL = os.environ.get("MTURK_ENDPOINT_URL", "")
# boto3 retries throttled calls itself this many times in all; the Celery task then backs off.
MTURK_MAX_ATTEMPTS = int(os.environ.get("MTURK_MAX_ATTEMPTS", "4"))
# The public HTTPS address of this site: MTurk frames our task pages from it.
CROWD_PUBLIC_URL = os.environ.get("CROWD_PUBLIC_URL", "")
# Empty: MTurk's fee schedule (annotate/crowd/pricing.py) on MTurk and the offline platform; a
# rate (0.25 for 25%) replaces it with a flat fee (a negotiated price, another platform).
CROWD_FEE_RATE = os.environ.get("CROWD_FEE_RATE", "")
# The most, in dollars, that the bonuses of one assignment or one human-study answer may come to
# together: a bonus that would take them over it is refused on every page and API before
# anything is stored, and again just before it is sent (a typo of $10,000 for $10.00 is paid at
# once on MTurk and cannot be taken back).
try:
    CROWD_BONUS_MAX_USD = Decimal(os.environ.get("CROWD_BONUS_MAX_USD", "20.00"))
except ArithmeticError:  # decimal.InvalidOperation: not a number
    CROWD_BONUS_MAX_USD = Decimal("NaN")
if not (
    CROWD_BONUS_MAX_USD.is_finite()
    and Decimal(0) < CROWD_BONUS_MAX_USD < Decimal(1_000_000)
    and CROWD_BONUS_MAX_USD.quantize(Decimal("0.01")) == CROWD_BONUS_MAX_USD
):
    raise ValueError("CROWD_BONUS_MAX_USD must be an amount in dollars and cents, e.g. 20.00.")
# Where a worker's browser may post the finished assignment (MTurk's turkSubmitTo hosts), and the
# origins that may frame the worker pages. Tests add the fake server through the extra lists.
CROWD_SUBMIT_HOSTS = ["www.mturk.com", "workersandbox.mturk.com"] + env_list(
    "CROWD_EXTRA_SUBMIT_HOSTS", ""
)
CROWD_FRAME_ANCESTORS = ["https://www.mturk.com", "https://workersandbox.mturk.com"] + env_list(
    "CROWD_EXTRA_FRAME_ANCESTORS", ""
)
CROWD_SYNC_INTERVAL_SECONDS = int(os.environ.get("CROWD_SYNC_INTERVAL_SECONDS", "600"))
# A publish making HITs beats every twentieth of this; one silent this long (its worker died) is
# shown stalled, with Resume, and taken over by the next delivery of its task
# (annotate.crowd.services.publishing).
CROWD_PUBLISH_STALE_SECONDS = float(os.environ.get("CROWD_PUBLISH_STALE_SECONDS", "600"))
# An Expire's run beats every twentieth of this; one silent this long (or asked and never
# started this long) is shown stopped, and Expire may be pressed again
# (annotate.crowd.services.expiry.expiry_run_of).
CROWD_EXPIRY_STALE_SECONDS = float(os.environ.get("CROWD_EXPIRY_STALE_SECONDS", "600"))
# How long work submitted here keeps its task's slot while the platform does not list it yet:
# the worker's browser hands it back to MTurk just after our page stored it
# (annotate.crowd.services.review.release_grace).
CROWD_RELEASE_GRACE_SECONDS = int(os.environ.get("CROWD_RELEASE_GRACE_SECONDS", "300"))
X_FRAME_OPTIONS = "DENY"
# Review suggests approving a worker whose gold-question accuracy is at least this.
CROWD_GOLD_MIN_ACCURACY = float(os.environ.get("CROWD_GOLD_MIN_ACCURACY", "0.7"))
# Self-hosted links: most starts without a participant id per link (a publication may set its own).
CROWD_ANONYMOUS_STARTS_PER_LINK = int(os.environ.get("CROWD_ANONYMOUS_STARTS_PER_LINK", "100"))
# Crowd worker pages: most tasks claimed and still open at once from one client address (a
# self-hosted link's starts, an MTurk HIT's accepts; 0: no limit). Beyond it 429 with
# Retry-After (annotate.crowd.services.addresses).
CROWD_OPEN_CLAIMS_PER_ADDRESS = int(os.environ.get("CROWD_OPEN_CLAIMS_PER_ADDRESS", "10"))
if CROWD_OPEN_CLAIMS_PER_ADDRESS < 0:
    raise ValueError("CROWD_OPEN_CLAIMS_PER_ADDRESS must be 0 (no limit) or a positive number.")
CELERY_BEAT_SCHEDULE["crowd-sync"] = {
    "task": "annotate.crowd.tasks.sync_all_publications",
    "schedule": CROWD_SYNC_INTERVAL_SECONDS,
}
# The model engine (annotate/engine, docs/engine.md); ENGINE_API_KEY_ENVS is below.
# Run kinds and the protocol class doing each kind's units (the engine imports none of them).
ENGINE_PROTOCOLS = {
    "generation": "annotate.engine.generation.GenerationProtocol",
    "judge": "evaluation.judges.protocol.JudgeRunProtocol",
    "verbalizer": "annotate.verbalizer.protocol.VerbalizerProtocol",
    "revision-judge": "evaluation.revision.protocol.RevisionJudgeProtocol",
}
# Further steps of `manage.py load_demo` on the measuring side (dotted paths of functions that
# take no argument and return a line to print), so that annotate never imports evaluation.
DEMO_EXTRA_LOADERS = ["evaluation.revision.demo.demo_revision_judges"]
# A running run beats every ENGINE_HEARTBEAT_SECONDS; one silent for the timeout is marked failed
# (its worker was killed or lost). The timeout must exceed the longest call's timeout.
ENGINE_HEARTBEAT_SECONDS = float(os.environ.get("ENGINE_HEARTBEAT_SECONDS", "5"))
ENGINE_HEARTBEAT_TIMEOUT_SECONDS = int(os.environ.get("ENGINE_HEARTBEAT_TIMEOUT_SECONDS", "300"))
# A run stops (failed, its done work kept) once this many calls in a row failed after their
# retries: the endpoint is down or refuses everything. 0: never.
ENGINE_FAILED_CALLS_IN_A_ROW = int(os.environ.get("ENGINE_FAILED_CALLS_IN_A_ROW", "20"))
# With a broker, a run's pending units are split into chunks of this many units, one Celery
# task each, so several workers share a run (docs/engine.md, "Celery").
ENGINE_CELERY_CHUNK_UNITS = int(os.environ.get("ENGINE_CELERY_CHUNK_UNITS", "50"))
# A chunk task delivered again (Redis does so once it has run longer than the visibility timeout)
# calls only once the first delivery's lease on the chunk has not been renewed for this long:
# its worker died. Renewed every ENGINE_HEARTBEAT_SECONDS (at most a quarter of it).
ENGINE_CHUNK_LEASE_SECONDS = float(os.environ.get("ENGINE_CHUNK_LEASE_SECONDS", "60"))
CELERY_BEAT_SCHEDULE["engine-reap-runs"] = {
    "task": "annotate.engine.tasks.engine_runs_reap_task",
    "schedule": 60.0,
}
JUDGE_BACKEND = os.environ.get("JUDGE_BACKEND", "fake")
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
# The only environment variables a judge configuration or engine endpoint may name for its API key
# (annotate.secrets): anything else, DJANGO_SECRET_KEY say, would be sent as a bearer token.
ENGINE_API_KEY_ENVS = env_list(
    "ENGINE_API_KEY_ENVS",
    "OPENAI_API_KEY,AZURE_OPENAI_API_KEY,ANTHROPIC_API_KEY,OPENROUTER_API_KEY,TOGETHER_API_KEY,"
    "GROQ_API_KEY,MISTRAL_API_KEY,DEEPSEEK_API_KEY,LLM_API_KEY",
)
# A report export beats every twentieth of this; one silent this long (its worker died) is
# written by the next delivery of its task (evaluation.services.report_runs).
REPORT_EXPORT_STALE_SECONDS = float(os.environ.get("REPORT_EXPORT_STALE_SECONDS", "600"))
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
        # django-axes logs each successful login at INFO; failures and lockouts stay WARNING.
        "axes": {"level": "WARNING"},
    },
}
