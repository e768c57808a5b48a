"""Choose a crowd platform from settings and record every call made to it."""

from __future__ import annotations

import time
from dataclasses import asdict, is_dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.utils import timezone
from django.utils.module_loading import import_string

from annotate.crowd.base import CrowdPlatform
from annotate.errors import ConflictError, CrowdPlatformError

BACKENDS = {
    "mturk": "annotate.crowd.mturk.MTurkPlatform",
    "selfhosted": "annotate.crowd.selfhosted.SelfHostedPlatform",
    "fake": "annotate.crowd.fake.FakePlatform",
}
SUMMARY_LIMIT = 300


def platform_class(name: str) -> type:
    """Return the class for a short name ("mturk") or a dotted path."""
    try:
        return import_string(BACKENDS.get(name, name))
    except ImportError as error:
        raise CrowdPlatformError(
            f"Unknown crowd platform '{name}': use one of {sorted(BACKENDS)} or a dotted path."
        ) from error


PLATFORM_LABELS = {
    "mturk": "Amazon Mechanical Turk",
    "selfhosted": "Self-hosted link",
    "fake": "Offline demo",
}


def platform_label(name: str) -> str:
    """Return a platform's name as people say it ("Amazon Mechanical Turk" for "mturk")."""
    return PLATFORM_LABELS.get(name, name)


def platform_names() -> list[str]:
    """The platforms an admin may publish to: the configured one, and self-hosted links."""
    configured = platform_class(settings.CROWD_BACKEND).name
    return [configured] if configured == "selfhosted" else [configured, "selfhosted"]


def demo_platform_in_use() -> bool:
    """Whether the offline demo platform is the configured one (admins may then play its
    workers: annotate.crowd.fake)."""
    return "fake" in platform_names()


def get_platform(name: str | None = None, *, user=None) -> RecordedPlatform:
    """Return the platform `name` (default: CROWD_BACKEND), recording its calls as `user`'s."""
    return RecordedPlatform(platform_class(name or settings.CROWD_BACKEND)(), user=user)


def platform_on_sandbox(name: str) -> bool:
    """Whether work made now on the platform `name` is test work: MTurk while MTURK_SANDBOX
    points it at the requester sandbox. The offline demo platform is no sandbox."""
    return platform_class(name).on_sandbox()


def publication_platform(publication, *, user=None) -> RecordedPlatform:
    """The platform `publication` was made on (get_platform), refused when it points now at the
    other endpoint: the requester sandbox and MTurk production know nothing of each other's
    HITs, workers and assignments, so a sync, a verdict, a bonus or an expiry sent to the other
    one would act on nothing, or on the wrong account's work."""
    publication_endpoint_check(publication)
    return get_platform(publication.platform, user=user)


def publication_on_other_endpoint(publication) -> bool:
    """True when its platform points now at the other endpoint than the one `publication` was
    made on: a sandbox publication while MTURK_SANDBOX is false, or the reverse."""
    return publication.sandbox != platform_on_sandbox(publication.platform)


def publication_endpoint_check(publication) -> None:
    """Refuse work on a publication while its platform points at the other endpoint."""
    if not publication_on_other_endpoint(publication):
        return
    made, now = ("sandbox", "production") if publication.sandbox else ("production", "sandbox")
    made_setting, now_setting = ("true", "false") if publication.sandbox else ("false", "true")
    test_work = " Its work is test work either way: it counts nowhere, nothing is paid for it."
    raise ConflictError(
        f"Publication {publication.pk} ({platform_label(publication.platform)}) was made on the "
        f"MTurk {made} and MTURK_SANDBOX={now_setting} points at the MTurk {now} now, which has "
        "none of its HITs, workers or assignments: nothing was synced, decided, paid or "
        f"expired. Set MTURK_SANDBOX={made_setting} to work on it."
        + (test_work if publication.sandbox else "")
    )


def workers_endpoint_check(
    *, platform_name: str, sandbox: bool, workers: list[str], verb: str, done: str
) -> None:
    """Refuse to `verb` ("block") `workers` whose work was on one MTurk endpoint (`sandbox`: the
    requester sandbox) while MTURK_SANDBOX points at the other: the sandbox and production keep
    their own blocks and send their own messages, so the call would miss the account the
    worker works for us with."""
    if sandbox == platform_on_sandbox(platform_name):
        return
    made, now = ("sandbox", "production") if sandbox else ("production", "sandbox")
    made_setting, now_setting = ("true", "false") if sandbox else ("false", "true")
    known = "known only from test work on" if sandbox else "known from work on"
    who = f"Worker {workers[0]} is" if len(workers) == 1 else f"Workers {', '.join(workers)} are"
    them = "them" if len(workers) != 1 else "the worker"
    raise ConflictError(
        f"{who} {known} the MTurk {made}, and MTURK_SANDBOX={now_setting} points at the MTurk "
        f"{now} now, which is not where they work for us: nothing was {done}. Set "
        f"MTURK_SANDBOX={made_setting} to {verb} {them} on the MTurk {made}."
    )


def _summary(value):
    if isinstance(value, str):
        return value if len(value) <= SUMMARY_LIMIT else value[:SUMMARY_LIMIT] + "…"
    if isinstance(value, Decimal | datetime):
        return str(value)
    if is_dataclass(value):
        return _summary(asdict(value))
    if isinstance(value, dict):
        return {key: _summary(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set):
        return [_summary(item) for item in value][:20]
    return value


class RecordedPlatform:
    """A platform whose every method call leaves a PlatformCall row, whether it worked or not."""

    def __init__(self, platform: CrowdPlatform, *, user=None) -> None:
        self.platform = platform
        self.user = user if getattr(user, "is_authenticated", False) else None
        self.name = platform.name
        self.creates_hits = platform.creates_hits
        self.pays_workers = platform.pays_workers

    def __getattr__(self, operation: str):
        method = getattr(self.platform, operation)
        if not callable(method) or operation.startswith("_"):
            return method

        def recorded(**kwargs):
            started = time.monotonic()
            try:
                result = method(**kwargs)
            except CrowdPlatformError as error:
                self._record(operation, kwargs, started, ok=False, code=error.code, text=str(error))
                raise
            self._record(operation, kwargs, started, ok=True, text=repr(_summary(result)))
            return result

        return recorded

    def _record(self, operation, kwargs, started, *, ok, code="", text="") -> None:
        from annotate.crowd.models import PlatformCall

        PlatformCall.objects.create(
            created_at=timezone.now(),
            user=self.user,
            platform=self.name,
            operation=operation,
            request=_summary(kwargs),
            ok=ok,
            error_code=code[:100],
            result=text[:2000],
            duration_ms=int((time.monotonic() - started) * 1000),
        )
