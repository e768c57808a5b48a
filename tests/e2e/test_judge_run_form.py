"""The judge run form in a real browser: choosing a benchmark lists that benchmark's systems,
all ticked, keeping the judge chosen and every field typed, with JavaScript or without; and the
browser asks for one system at least."""

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
    _type_the_rest(page)
    with page.expect_navigation():
        page.get_by_label("Benchmark").select_option(str(second.pk))
    boxes = page.locator("input[name=systems]")
    assert [box.is_checked() for box in boxes.all()] == [True, True]
    assert page.locator("#id_systems").inner_text().split() == ["beta", "gamma"]
    assert page.get_by_label("Judge").input_value() == str(judge.pk)
    _assert_typed_kept(page)
    assert page.get_by_role("button", name="List its systems").count() == 0  # JavaScript does it
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


TYPED = {
    "instruction_ids": "task_1, task_2",
    "sample": "2",
    "seed": "17",
    "spending_cap_usd": "1.25",
}


def _type_the_rest(page) -> None:
    for name, value in TYPED.items():
        page.locator(f"#id_{name}").fill(value)
    page.get_by_label("Subset").select_option("hard")


def _assert_typed_kept(page) -> None:
    for name, value in TYPED.items():
        assert page.locator(f"#id_{name}").input_value() == value, name
    assert page.get_by_label("Subset").input_value() == "hard"


def test_without_javascript_the_button_beside_the_benchmark_lists_its_systems(page_for, snap):
    from annotate.roles import RESEARCHER

    make_benchmark(systems=("alpha",))
    second, _, _ = make_benchmark(systems=("beta", "gamma"))
    judge = make_judge(name="fake-judge", backend="fake")
    user = UserFactory(username="no-script", roles=[RESEARCHER])
    page = page_for(user, java_script_enabled=False)
    page.goto("/judge/runs/new/")
    page.get_by_label("Judge").select_option(str(judge.pk))
    _type_the_rest(page)
    page.get_by_label("Benchmark").select_option(str(second.pk))
    with page.expect_navigation():
        page.get_by_role("button", name="List its systems").click()
    assert page.locator("#id_systems").inner_text().split() == ["beta", "gamma"]
    assert all(box.is_checked() for box in page.locator("input[name=systems]").all())
    assert page.get_by_label("Judge").input_value() == str(judge.pk)
    _assert_typed_kept(page)
    snap(page, "systems listed without javascript")
