"""The new-project form in a real browser: its guidelines follow the mode chosen."""

import pytest

from annotate.services.projects import DEFAULT_GUIDELINES, DIRECT_SCORE_GUIDELINES

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_guidelines_follow_the_mode_until_the_researcher_writes_their_own(
    page_for, admin_user, snap
):
    page = page_for(admin_user)
    page.goto("/annotate/projects/new/")
    mode, guidelines = page.get_by_label("Mode"), page.get_by_label("Guidelines")
    assert guidelines.input_value() == DEFAULT_GUIDELINES

    mode.select_option("direct_score")
    assert guidelines.input_value() == DIRECT_SCORE_GUIDELINES
    mode.select_option("both")
    assert guidelines.input_value() == DEFAULT_GUIDELINES
    snap(page, "both steps: the questions' guidelines")

    guidelines.fill("Score how polite each response is.")
    mode.select_option("direct_score")
    assert guidelines.input_value() == "Score how polite each response is."
