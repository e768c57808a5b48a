"""The report pages' figures in a real browser, on the demo: every figure shown at the size it
was drawn, with a link to it alone. The verbalizer and KIWI pages showed theirs in a fixed 700
pixels, so Figure 3 of the verbalizer report (922 pixels drawn) lost a quarter of its size and
its notes on the bars could not be read."""

import pytest
from django.contrib.auth.models import User

from annotate.revision.models import Study
from annotate.verbalizer.models import EvaluationSet

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("viewport", [(1280, 800), (1920, 1080)], ids=["1280", "1920"])
def test_every_report_figure_is_shown_at_the_size_it_was_drawn(page_for, demo, snap, viewport):
    width, height = viewport
    researcher = page_for(
        User.objects.get(username="researcher"), viewport={"width": width, "height": height}
    )
    pages = [
        f"/reports/{demo.pk}/",
        f"/revision-reports/{Study.objects.get().pk}/",
        f"/reports/verbalizer/{EvaluationSet.objects.get().pk}/",
    ]
    for url in pages:
        # Each figure is awaited below on its own: "load" waits for all of them at once, which
        # outlasts the page timeout on a loaded machine (a verbalizer figure is ~1 s of CPU).
        researcher.goto(url, wait_until="domcontentloaded")
        figures = researcher.locator("figure.report-figure")
        assert figures.count() >= 2, url
        for index in range(figures.count()):
            figure = figures.nth(index)
            figure.scroll_into_view_if_needed()
            image = figure.locator("img").element_handle()
            researcher.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image)
            drawn, shown = image.evaluate(
                "img => [img.naturalWidth, img.getBoundingClientRect().width]"
            )
            assert shown == pytest.approx(drawn, abs=1), (url, index, drawn, shown)
            assert figure.locator("figcaption a[href*='.svg']").count() >= 1, (url, index)
        snap(researcher, url.strip("/").replace("/", "-"))
