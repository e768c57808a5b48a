"""The site's header in a real browser: an admin's navigation fits a laptop window."""

import pytest

from annotate.roles import ADMIN, ANNOTATOR, RESEARCHER
from tests.factories import UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _rows(page, selector: str) -> int:
    """How many rows the elements of `selector` sit on: a row is the elements whose middles lie
    within half a row's height of its first one's (a name, a link and a button are not all as
    tall, nor do their tops line up)."""
    boxes = page.eval_on_selector_all(
        selector, "els => els.map(e => e.getBoundingClientRect()).map(b => [b.top, b.height])"
    )
    rows: list[float] = []
    for middle, height in sorted((top + height / 2, height) for top, height in boxes):
        if not rows or middle - rows[-1] > height / 2:
            rows.append(middle)
    return len(rows)


def test_an_admins_header_takes_at_most_two_rows_at_1280_pixels(page_for, snap):
    """An admin who also annotates sees every section (16 links, the account's three beside):
    at 1280 pixels they wrapped to three rows, the third holding one group's tail."""
    user = UserFactory(
        username="admin", roles=[ADMIN, RESEARCHER, ANNOTATOR], is_staff=True, is_superuser=True
    )
    page = page_for(user, viewport={"width": 1280, "height": 800})
    page.goto("/")
    snap(page, "header")
    links = ".site-header .brand, .site-nav a, .account > *"
    # Every section is there (16 links today); a menu link added later must not break this test
    # when the header still fits: the rows are what it checks.
    assert page.locator(".site-nav a").count() >= 13
    assert _rows(page, links) <= 2
    window = page.evaluate("document.documentElement.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= window
