"""Production settings: refuse to start without a strong secret key; secure cookies and HTTPS."""

import os

from django.core.exceptions import ImproperlyConfigured

from config.settings.base import *  # noqa: F403
from config.settings.base import DATABASES, REST_FRAMEWORK, env_bool, env_list

# Values published somewhere (this repository's old built-in default, .env.example, docs) or too
# short to resist guessing: a key anyone can know signs worker tokens and sessions for them.
KNOWN_PLACEHOLDER_KEYS = {
    "x",
    "change-me",
    "changeme",
    "secret",
    "insecure-embedded-default-key-change-me",
    "change-me-to-a-long-random-string",
}
SECRET_KEY_MIN_LENGTH = 32


def secret_key_checked(key: str) -> str:
    """Return the key, or refuse to start when it is missing, a placeholder or too weak."""
    if not key:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set in production.")
    lowered = key.strip().lower()
    if lowered in KNOWN_PLACEHOLDER_KEYS or "change-me" in lowered or "insecure" in lowered:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is a published placeholder; set it to a long random string, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(50))'."
        )
    if len(key) < SECRET_KEY_MIN_LENGTH or len(set(key)) < 10:
        raise ImproperlyConfigured(
            f"DJANGO_SECRET_KEY is too short or too plain: use at least {SECRET_KEY_MIN_LENGTH} "
            "random characters, e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'."
        )
    return key


SECRET_KEY = secret_key_checked(os.environ.get("DJANGO_SECRET_KEY", ""))
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "")
# Keep database connections between requests unless told otherwise: a new PostgreSQL connection
# per request costs about 13 ms (a backend process started, authentication) on every page.
DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("DATABASE_CONN_MAX_AGE", "60"))

SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_SECURE_HSTS_SECONDS", "31536000"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# The API answers JSON only. DRF's browsable API (an HTML page of every endpoint, its forms
# posting to it, its own login link) is a development aid: in production it was one more way
# in to review and keep under the site's CSP, and /api/docs/ documents the API already.
REST_FRAMEWORK = {
    **REST_FRAMEWORK,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}
