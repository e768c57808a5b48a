"""Browser tests: Playwright driving Debian's chromium against pytest-django's live_server.

Every page a test opens is saved as a screenshot under var/test-screenshots/<test name>/ (or
$E2E_SCREENSHOT_DIR/<test name>/): page.goto and page.wait_for_url take one by themselves, and
`snap(page, "what")` takes one of a page's state (a dialog open, an error shown). No page may load
anything from outside the app: any request to a host other than the live server's fails the test.
"""

import io
import os
import re
import shutil
from importlib import import_module
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client

SCREENSHOT_ROOT = Path(
    os.environ.get("E2E_SCREENSHOT_DIR") or Path(settings.BASE_DIR) / "var" / "test-screenshots"
)
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}

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


class Screenshots:
    """Numbered screenshots of one test, in a folder of its own (emptied when the test starts)."""

    def __init__(self, folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.count = folder, 0

    def take(self, page, what: str = "") -> Path:
        self.count += 1
        path = urlsplit(page.url).path.strip("/").replace("/", "_") or "home"
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{self.count:02d}-{path}-{what}".strip("-"))
        target = self.folder / f"{name[:120]}.png"
        page.screenshot(path=str(target), full_page=True)
        return target


@pytest.fixture
def screenshots(request) -> Screenshots:
    test_name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)
    return Screenshots(SCREENSHOT_ROOT / test_name)


@pytest.fixture
def snap(screenshots):
    """snap(page, "what"): save a screenshot of the page as it is now."""
    return screenshots.take


def _watch(page, screenshots: Screenshots, outside: list[str]) -> None:
    """Screenshot after every goto / wait_for_url; refuse and record requests to other hosts."""

    def guard(route) -> None:
        host = urlsplit(route.request.url).hostname or ""
        if route.request.url.startswith(("data:", "blob:")) or host in LOCAL_HOSTS:
            route.continue_()
            return
        outside.append(route.request.url)
        route.abort()

    page.route("**/*", guard)
    goto, wait_for_url = page.goto, page.wait_for_url

    def goto_and_snap(url, **kwargs):
        response = goto(url, **kwargs)
        screenshots.take(page)
        return response

    def wait_and_snap(url, **kwargs):
        result = wait_for_url(url, **kwargs)
        screenshots.take(page)
        return result

    page.goto, page.wait_for_url = goto_and_snap, wait_and_snap


def browser_page(browser, live_server, screenshots, outside, user=None, **options):
    """Return a new page on the live server, logged in as `user` when given."""
    context = browser.new_context(base_url=live_server.url, **options)
    if user is not None:
        client = Client()
        client.force_login(user)
        context.add_cookies(
            [
                {
                    "name": settings.SESSION_COOKIE_NAME,
                    "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                    "url": live_server.url,
                }
            ]
        )
    page = context.new_page()
    page.set_default_timeout(10_000)
    _watch(page, screenshots, outside)
    return context, page


@pytest.fixture(scope="session")
def views_imported() -> None:
    """Import the URLconf, every view with it, before the first page: the live server's first
    request did (12 s of imports measured with 2 cores under a load average of 12, against 1 s
    for the same page next), within the page's 10 s, and a run's first page timed out now and
    then."""
    import_module(settings.ROOT_URLCONF)


@pytest.fixture
def page_for(browser, live_server, screenshots, views_imported):
    """Return a function giving a new browser page logged in as the user (options: viewport,
    color_scheme, ... as for browser.new_context)."""
    contexts, outside = [], []

    def open_page(user=None, **options):
        context, page = browser_page(browser, live_server, screenshots, outside, user, **options)
        contexts.append(context)
        return page

    yield open_page
    for context in contexts:
        context.close()
    assert not outside, f"pages asked for things outside the app: {sorted(set(outside))}"


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


@pytest.fixture
def demo(settings):
    """The demo of `make run` (every method's data, every printed login); its InFoBench benchmark."""
    from annotate.models import Benchmark
    from annotate.services.demo_data import DEMO_BENCHMARK

    settings.DEBUG = True
    call_command("load_demo", stdout=io.StringIO())
    settings.DEBUG = False
    return Benchmark.objects.get(name=DEMO_BENCHMARK)
