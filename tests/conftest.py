import pytest
from django.core.cache import cache
from rest_framework.throttling import SimpleRateThrottle

from annotate.roles import ADMIN, ANNOTATOR, RESEARCHER
from tests.factories import UserFactory


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """After the test database is made, let Django probe the backend's features once (SQLite's
    JSON support is a query of its own the first time a JSON field is saved in a process), so
    the query-count tests count the pages' queries whatever test a worker ran first."""
    from django.db import connections

    with django_db_blocker.unblock():
        for alias in connections:
            connections[alias].features.supports_json_field  # noqa: B018


@pytest.fixture
def admin_user(db):
    return UserFactory(username="admin-user", roles=[ADMIN], is_staff=True)


@pytest.fixture
def superuser_client(client, admin_user):
    """A client logged in as an admin with every permission of Django's admin pages (the
    `admin` role's users are staff without permissions)."""
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    return client


@pytest.fixture
def researcher(db):
    return UserFactory(username="researcher-user", roles=[RESEARCHER])


@pytest.fixture
def annotator_user(db):
    return UserFactory(username="annotator-user", roles=[ANNOTATOR])


@pytest.fixture(autouse=True)
def _fresh_offline_crowd_platform():
    """Each test starts with an empty offline crowd platform: its state is a file
    (CROWD_FAKE_STATE_FILE), which would otherwise carry one test's HITs into the next."""
    from annotate.crowd.fake import FakePlatform

    FakePlatform.reset()


@pytest.fixture(autouse=True, scope="session")
def _no_offline_crowd_platform_file_left():
    yield
    from annotate.crowd.fake import FakePlatform, state_file

    FakePlatform.reset()
    state_file().with_name(state_file().name + ".lock").unlink(missing_ok=True)


@pytest.fixture(autouse=True)
def _empty_cache():
    """Each test starts with an empty cache: reports are cached under keys made of row counts
    and ids, which the test database hands out again, so one test could read another's."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _role_groups(request):
    """Transactional tests flush the tables, data migrations' groups included: put them back."""
    marker = request.node.get_closest_marker("django_db")
    if not (marker and marker.kwargs.get("transaction")):
        return
    from django.contrib.auth.models import Group

    from annotate.roles import ROLES

    request.getfixturevalue("transactional_db")
    for name in ROLES:
        Group.objects.get_or_create(name=name)


@pytest.fixture
def worker_rates(settings, monkeypatch):
    """Set the per-address and per-user rates (crowd-pages, crowd-starts, uploads, model-calls,
    run-starts, exports, figures, annotator-work); the throttles' clock is returned."""

    def set_rates(
        pages: str = "1000/minute",
        starts: str = "1000/minute",
        uploads: str = "1000/minute",
        model_calls: str = "1000/minute",
        run_starts: str = "1000/minute",
        exports: str = "1000/minute",
        figures: str = "1000/minute",
        annotator_work: str = "1000/minute",
    ) -> list[float]:
        rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]}
        rates.update(
            {
                "crowd-pages": pages,
                "crowd-starts": starts,
                "uploads": uploads,
                "model-calls": model_calls,
                "run-starts": run_starts,
                "exports": exports,
                "figures": figures,
                "annotator-work": annotator_work,
            }
        )
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
        return now

    now = [1_000_000.0]
    monkeypatch.setattr(SimpleRateThrottle, "timer", staticmethod(lambda: now[0]))
    cache.clear()
    yield set_rates
    cache.clear()
