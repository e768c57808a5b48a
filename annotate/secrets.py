"""Which environment variables a configuration stored in the database may read a key from.

A judge configuration or an engine endpoint names the environment variable that holds its API
key, and the key is then sent as a bearer token to the configured URL. Anyone who may write such
a configuration could otherwise name DJANGO_SECRET_KEY or AWS_SECRET_ACCESS_KEY and send it to a
server of their own, so only the names in the ENGINE_API_KEY_ENVS setting are accepted.
"""

from __future__ import annotations

from django.conf import settings

from annotate.errors import AnnotateError


class ApiKeyEnvError(AnnotateError):
    """A configuration names an environment variable that is not an allowed API key."""


def api_key_env_validate(name: str) -> str:
    """Return `name` stripped if it is blank or allow-listed; raise ApiKeyEnvError otherwise."""
    name = (name or "").strip()
    allowed = list(settings.ENGINE_API_KEY_ENVS)
    if name and name not in allowed:
        raise ApiKeyEnvError(
            f"API key env: {name!r} is not an allowed API key variable; use one of "
            f"{', '.join(allowed) or '(none)'} or leave it blank (setting ENGINE_API_KEY_ENVS)."
        )
    return name
