"""The label list and the 403 page in a real browser, and axe-core on the pages added since the
main pages' check (revision, verbalizer, engine, annotators, label list)."""

import pytest

from annotate.engine.models import Endpoint, EngineRun
from annotate.models import Label, Project
from annotate.revision.models import Study
from annotate.services.demo import CROWD_STUDY
from annotate.verbalizer.models import EvaluationSet, HumanStudy
from tests.e2e.test_product import axe_violations, user

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_researcher_filters_the_label_list(page_for, demo, snap):
    researcher = user("researcher")
    # Not on the crowd study: its workers' platform ids stay hidden from this researcher.
    Project.objects.get(name=CROWD_STUDY).researchers.remove(researcher)
    page = page_for(researcher)
    page.goto(f"/benchmarks/{demo.pk}/")
    page.locator("#label-list-link").click()
    page.wait_for_url(f"**/benchmarks/{demo.pk}/labels/")
    total = Label.objects.filter(response__instruction__benchmark=demo).count()
    assert f"({total} in all)" in page.locator("nav.pagination").inner_text()
    assert page.locator("nav a[aria-current=page]").inner_text() == "Benchmarks"

    form = page.get_by_role("search", name="Search and filter labels")
    form.get_by_label("Annotator kind").select_option("crowd")
    form.get_by_label("Value").select_option(label="NO")
    form.get_by_role("button", name="Show").click()
    page.wait_for_url("**kind=crowd**")
    snap(page, "crowd NO labels")
    crowd_no = Label.objects.filter(
        response__instruction__benchmark=demo, annotator__kind="crowd", value=0
    )
    rows = page.locator("#label-list tbody tr")
    assert rows.count() == min(crowd_no.count(), 50) > 0
    assert set(page.locator("#label-list tbody td:nth-child(8)").all_inner_texts()) == {"NO"}
    assert set(page.locator("#label-list tbody td:nth-child(7)").all_inner_texts()) == {"crowd"}
    # A crowd worker's platform id is shown to a researcher only on the worker's project.
    for name in crowd_no.values_list("annotator__worker_id", flat=True):
        assert name not in page.locator("#label-list").inner_text()

    page.get_by_role("link", name="Clear").click()
    page.wait_for_url(f"**/benchmarks/{demo.pk}/labels/")
    instruction = demo.instructions.order_by("position").first()
    page.goto(f"/benchmarks/{demo.pk}/instructions/{instruction.pk}/")
    page.locator("#instruction-labels-link").click()
    page.wait_for_url(f"**instruction={instruction.pk}")
    ids = set(page.locator("#label-list tbody td:first-child").all_inner_texts())
    assert ids == {instruction.external_id}


def test_role_errors_are_the_403_page_in_the_layout(page_for, demo, snap):
    wrong = {
        "cara": [f"/benchmarks/{demo.pk}/labels/", "/revision-reports/", "/engine/runs/"],
        "researcher": ["/revision/", "/verbalizer/work/", "/engine/endpoints/"],
    }
    for username, urls in wrong.items():
        page = page_for(user(username))
        for url in urls:
            answer = page.goto(url)
            assert answer.status == 403, (username, url)
            assert page.locator("main h1").inner_text() == "This page is not for your role"
            assert page.locator("nav[aria-label=Main] a").count() >= 1, url  # the layout
            assert username in page.locator("main").inner_text()
    snap(page, "403 for a researcher")


def test_the_newer_pages_pass_axe_core(page_for, demo):
    study = Study.objects.first()
    evaluation_set = EvaluationSet.objects.first()
    human_study = HumanStudy.objects.first()
    endpoint = Endpoint.objects.first()
    run = EngineRun.objects.first()
    pages = {
        "researcher": [
            f"/benchmarks/{demo.pk}/labels/",
            f"/benchmarks/{demo.pk}/labels/?kind=crowd&counted=no",
            "/annotators/",
            "/revision/upload/",
            "/revision-reports/",
            f"/revision-reports/{study.pk}/",
            "/verbalizer/",
            f"/verbalizer/sets/{evaluation_set.pk}/",
            "/engine/runs/",
            f"/engine/runs/{run.pk}/",
            "/engine/generate/",
        ],
        "admin": [
            "/engine/endpoints/",
            "/engine/endpoints/new/",
            f"/engine/endpoints/{endpoint.pk}/",
        ],
        "cara": ["/revision/", "/verbalizer/work/", f"/verbalizer/work/{human_study.pk}/"],
    }
    problems = {}
    for username, urls in pages.items():
        page = page_for(user(username))
        for url in urls:
            page.goto(url)
            if found := axe_violations(page):
                problems[url] = found
    cara = page_for(user("cara"))
    cara.goto("/revision/")
    cara.get_by_role("button", name="Start a session").first.click()
    cara.wait_for_url("**/revision/sessions/*/")
    cara.locator("#answer").wait_for()  # the page reloads itself once the model has answered
    cara.wait_for_load_state()
    if found := axe_violations(cara):
        problems["revision session"] = found
    assert not problems, problems
