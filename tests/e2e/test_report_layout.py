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
