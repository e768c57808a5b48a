"""The cost estimate shown above a run form (engine/run_estimate.html), in a real browser."""

import pytest

from annotate.engine.services import endpoint_create
from annotate.roles import RESEARCHER
from annotate.verbalizer.services.sets import evaluation_set_create
from tests.annotate.verbalizer.helpers import fill
from tests.factories import UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_cost_estimate_wraps_inside_the_page(page_for):
    """The estimate sentence sat in a grid column sized to its whole length: on a verbalizer
    set's page it ran 100 pixels past a 1280-pixel window, and the page scrolled sideways."""
    fill("Reviews", [True, False])
    evaluation_set = evaluation_set_create(
        name="estimate-me", datasets=["Reviews"], items=2, seed=1, mappings="golden"
    ).evaluation_set
    endpoint_create(name="offline", base_url="", model="fake")
    page = page_for(UserFactory(username="estimator", roles=[RESEARCHER]))
    page.goto(f"/verbalizer/sets/{evaluation_set.pk}/")
    page.fill("#id_run-system", "m1")
    page.get_by_role("button", name="Estimate the cost").click()
    page.locator("#estimate", has_text="Estimate (nothing was sent): 2 prompts").wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
