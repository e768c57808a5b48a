"""The report page's convention form in a real browser, on the demo: each label stays beside its
select. At 1280 pixels "ACC: a source's UNKNOWN" hung at the end of the first line and its
select began the next. On a phone a label goes right above its select."""

import pytest
from django.contrib.auth.models import User

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _boxes(page, field: str) -> tuple[dict, dict]:
    label = page.locator(f"#report-conventions label[for={field}]").bounding_box()
    return label, page.locator(f"#report-conventions select#{field}").bounding_box()


@pytest.mark.parametrize("width", [1280, 1024])
def test_each_convention_label_sits_on_the_line_of_its_select(page_for, demo, snap, width):
    researcher = page_for(
        User.objects.get(username="researcher"), viewport={"width": width, "height": 800}
    )
    researcher.goto(f"/reports/{demo.pk}/")
    for field in ("unknown", "acc"):
        label, select = _boxes(researcher, field)
        label_middle = label["y"] + label["height"] / 2
        select_middle = select["y"] + select["height"] / 2
        assert abs(label_middle - select_middle) < select["height"] / 2, (width, field)
        assert label["x"] < select["x"], (width, field)
    snap(researcher, f"report conventions {width}")


def test_on_a_phone_each_convention_label_is_right_above_its_select(page_for, demo, snap):
    researcher = page_for(
        User.objects.get(username="researcher"), viewport={"width": 375, "height": 800}
    )
    researcher.goto(f"/reports/{demo.pk}/")
    for field in ("unknown", "acc"):
        label, select = _boxes(researcher, field)
        assert 0 <= select["y"] - (label["y"] + label["height"]) < 10, field
        assert select["x"] + select["width"] <= 375, field  # a long select shrinks to fit
    snap(researcher, "report conventions 375")


def test_the_report_pages_never_scroll_the_page_sideways(page_for, demo, snap):
    """At 800 px the InFoBench report was 844 px wide (Table 3's ten columns) and the
    verbalizer report 831 px (its "Every row"): a wide table now scrolls in a box of its own. At 320 px the
    figures' source selects made the InFoBench report 340 px wide. The KIWI report, whose
    tables scrolled in their boxes already, is checked beside them."""
    from annotate.revision.models import Study
    from annotate.verbalizer.models import EvaluationSet

    page = page_for(User.objects.get(username="researcher"), viewport={"width": 800, "height": 800})
    urls = (
        f"/reports/{demo.pk}/",
        f"/revision-reports/{Study.objects.get().pk}/",
        f"/reports/verbalizer/{EvaluationSet.objects.get().pk}/",
    )
    page_width = "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    for width in (800, 320):
        page.set_viewport_size({"width": width, "height": 800})
        for url in urls:
            # Not waiting for the figures: they are at most the page's width, and drawing them
            # all took more than the page's 10 s on a loaded machine.
            page.goto(url, wait_until="domcontentloaded")
            scrolled, window = page.evaluate(page_width)
            assert scrolled <= window, (width, url, scrolled)
    page.set_viewport_size({"width": 800, "height": 800})
    page.goto(urls[0], wait_until="domcontentloaded")
    table3 = page.locator("#agreement ~ .table-scroll").first
    table3.scroll_into_view_if_needed()
    snap(page, "table 3 at 800 px")
    # Its columns are all there, in the box that scrolls.
    assert table3.evaluate("box => box.scrollWidth > box.clientWidth")
    assert table3.locator("thead th").last.inner_text() == "Dropped"
