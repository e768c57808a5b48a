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


def test_estimate_and_start_sit_level_with_each_other(page_for):
    """A rule meant for the task page's Return button pushed every secondary button 1rem down:
    Estimate the cost sat lower than Start beside it, and Start stretched to match."""
    fill("Reviews", [True, False])
    evaluation_set = evaluation_set_create(
        name="level-me", datasets=["Reviews"], items=2, seed=1, mappings="golden"
    ).evaluation_set
    endpoint_create(name="offline", base_url="", model="fake")
    page = page_for(UserFactory(username="leveller", roles=[RESEARCHER]))
    page.goto(f"/verbalizer/sets/{evaluation_set.pk}/")
    estimate = page.get_by_role("button", name="Estimate the cost").bounding_box()
    start = page.locator("#start-run").bounding_box()
    assert abs(estimate["y"] - start["y"]) < 1
    assert abs(estimate["height"] - start["height"]) < 1


def test_a_long_choice_in_a_run_form_does_not_widen_the_page(page_for):
    """A select is as wide as its longest option: a judge named in 200 characters made the
    judge run page 2,500 pixels wide, and an endpoint's label 573 on a phone."""
    from evaluation.services.judge_configs import judge_config_create

    judge_config_create(name="j" * 200, endpoint=endpoint_create(name="offline", model="fake"))
    page = page_for(UserFactory(username="narrow", roles=[RESEARCHER]))
    for width in (1280, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.goto("/judge/runs/new/")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
