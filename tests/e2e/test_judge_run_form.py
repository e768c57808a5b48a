"""The judge run form in a real browser: choosing a benchmark lists that benchmark's systems,
all ticked, keeping the judge chosen; and the browser asks for one system at least."""

import pytest

from tests.evaluation.judge_helpers import make_benchmark, make_judge
from tests.factories import UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_choosing_a_benchmark_lists_its_systems_and_one_is_required(page_for, snap):
    from annotate.roles import RESEARCHER

    first, _, _ = make_benchmark(systems=("alpha",))
    second, _, _ = make_benchmark(systems=("beta", "gamma"))
    judge = make_judge(name="fake-judge", backend="fake")
    page = page_for(UserFactory(username="chooser", roles=[RESEARCHER]))
    page.goto("/judge/runs/new/")
    page.get_by_label("Judge").select_option(str(judge.pk))
    with page.expect_navigation():
        page.get_by_label("Benchmark").select_option(str(second.pk))
    boxes = page.locator("input[name=systems]")
    assert [box.is_checked() for box in boxes.all()] == [True, True]
    assert page.locator("#id_systems").inner_text().split() == ["beta", "gamma"]
    assert page.get_by_label("Judge").input_value() == str(judge.pk)
    snap(page, "systems of the chosen benchmark")

    posts = []
    page.on("request", lambda request: posts.append(request) if request.method == "POST" else 0)
    for box in boxes.all():
        box.uncheck()
    page.get_by_role("button", name="Estimate the cost").click()
    assert boxes.first.evaluate("box => box.validationMessage") == "Choose at least one."
    assert posts == []  # the browser kept the form
    boxes.last.check()
    assert boxes.first.evaluate("box => box.validity.valid")
