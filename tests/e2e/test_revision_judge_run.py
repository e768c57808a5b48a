"""A researcher starts a KIWI rating-judge run from the report page of the demo study, with the
demo's offline fake endpoint, follows it on the engine run's page and reads its Table 5 row."""

import time

import pytest

from annotate.engine.services import endpoint_create, engine_background_wait
from annotate.roles import ANNOTATOR, RESEARCHER
from annotate.services.demo import (
    DEMO_ANNOTATOR_LOGINS,
    DEMO_ENDPOINT,
    DEMO_RERATERS,
    demo_revision_create,
)
from evaluation.revision.models import RevisionJudgeRun
from tests.factories import UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def wait_for_text(locator, text: str, timeout: float = 30.0) -> None:
    """Read the element every 100 ms until it shows `text` (the CSP forbids wait_for_function)."""
    deadline, seen = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        seen = locator.inner_text()
        if seen == text:
            return
        locator.page.wait_for_timeout(100)
    raise AssertionError(f"timed out waiting for {text!r}; the page showed {seen!r}")


def test_researcher_runs_the_rating_judge_and_reads_table5(page_for, snap):
    for login in DEMO_ANNOTATOR_LOGINS:
        UserFactory(username=login.username, roles=[ANNOTATOR])
    for username in DEMO_RERATERS:  # the demo's experts, whose re-ratings the Human row counts
        UserFactory(username=username, roles=[ANNOTATOR], kind="expert")
    study = demo_revision_create()
    endpoint_create(name=DEMO_ENDPOINT, base_url="", model="fake-demo", concurrency=4)
    researcher = UserFactory(username="e2e-researcher", roles=[RESEARCHER])
    page = page_for(researcher)

    page.goto(f"/revision-reports/{study.pk}/")
    assert page.locator("#table-table5 tbody tr").count() == 1  # only the Human row so far
    page.get_by_role("link", name="Run the rating judge (Table 5)").click()
    page.wait_for_url(f"**/revision-reports/{study.pk}/runs/rating-judge/")
    page.select_option(
        "#id_endpoint", label=f"{DEMO_ENDPOINT} (offline fake: no bill, researchers may use it)"
    )
    page.select_option("#id_mode", "k-shot")
    page.fill("#id_shots", "3")
    snap(page, "filled")
    page.click("#start-run")

    page.wait_for_url("**/engine/runs/*/")
    assert page.locator("h1").inner_text().startswith("Rating judge (Table 5): run #")
    wait_for_text(page.locator("#run-status"), "Done")  # polled in place by run_progress.js
    run = RevisionJudgeRun.objects.get()
    assert page.locator("#run-done").inner_text() == str(len(run.split["test"]))
    snap(page, "done")
    engine_background_wait(10)

    page.click("#run-results")
    page.wait_for_url(f"**/revision-reports/{study.pk}/")
    rows = page.locator("#table-table5 tbody tr")
    models = [rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())]
    assert models == ["Majority", "Random", DEMO_ENDPOINT, "Human"]
    judge_row = rows.nth(2).inner_text()
    assert "k-shot" in judge_row and str(len(run.split["test"])) in judge_row
    assert page.locator("#judge-runs").inner_text().count("Done") == 1
