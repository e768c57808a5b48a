"""The KIWI report page in a real browser: its tables fit a laptop window."""

import pytest
from django.contrib.auth.models import User

from annotate.revision.models import Study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_kiwi_table_5_fits_a_1280_pixel_window(page_for, demo, snap):
    """Table 5's intervals never broke, so its "Unparsed" and "3-way agreement" columns lay
    160 pixels past the right edge of a 1280-pixel window, seen only by scrolling sideways."""
    page = page_for(
        User.objects.get(username="researcher"), viewport={"width": 1280, "height": 800}
    )
    page.goto(f"/revision-reports/{Study.objects.get().pk}/")
    table5 = page.locator("#table-table5")
    table5.scroll_into_view_if_needed()
    snap(page, "table 5")
    last = table5.locator("thead th").last
    assert last.inner_text() == "3-way agreement"
    window = page.evaluate("document.documentElement.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= window
    box = table5.evaluate("t => [t.scrollWidth, t.parentElement.clientWidth]")
    assert box[0] <= box[1], box  # nothing hidden in its scrolling box either
    assert last.bounding_box()["x"] + last.bounding_box()["width"] <= window
