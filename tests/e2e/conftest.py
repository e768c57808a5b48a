"""Browser tests: Playwright driving Debian's chromium against pytest-django's live_server."""

import os
import shutil

import pytest
from django.conf import settings
from django.test import Client

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# Playwright's sync API runs an event loop in this thread; the ORM calls of the test itself are
# still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser():
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        pytest.skip("Debian chromium is not installed (make chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture
def page_for(browser, live_server):
    """Return a function giving a new browser page logged in as the user."""
    contexts = []

    def open_page(user):
        client = Client()
        client.force_login(user)
        context = browser.new_context(base_url=live_server.url)
        context.add_cookies(
            [
                {
                    "name": settings.SESSION_COOKIE_NAME,
                    "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                    "url": live_server.url,
                }
            ]
        )
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(10_000)
        return page

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture(autouse=True)
def _role_groups(django_db_blocker, request):
    """Transactional tests flush the tables, data migrations' groups included: put them back."""
    if "live_server" not in request.fixturenames and "page_for" not in request.fixturenames:
        yield
        return
    from django.contrib.auth.models import Group

    from annotate.roles import ROLES

    with django_db_blocker.unblock():
        for name in ROLES:
            Group.objects.get_or_create(name=name)
    yield
