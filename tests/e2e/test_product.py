"""The product in a real browser, on the demo: every role's navigation, gold labels that stay gold,
no dead ends (judge, export, 403, API docs), narrow and dark screens, and an axe-core check."""

import zipfile

import pytest
from django.contrib.auth.models import User

from annotate.models import Annotator, AnnotatorKind, Project
from annotate.roles import ANNOTATOR
from annotate.selectors.identities import OPERATOR
from annotate.services.demo import DEMO_ENDPOINT
from annotate.services.demo_data import DEMO_BENCHMARK
from evaluation.services.reports import EXPERT_MAJORITY, report_build
from tests.factories import UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def user(name):
    return User.objects.get(username=name)


def expert_numbers(benchmark):
    report = report_build(scope=OPERATOR, benchmark=benchmark, n_resamples=10)
    majority = [
        (r["system"], r["subset"], r["drfr"])
        for r in report["leaderboard"]
        if r["source"] == EXPERT_MAJORITY
    ]
    kappa = [
        (r["protocol"], r["subset"], r["fleiss_kappa"])
        for r in report["agreement"]
        if r["group"] == "expert"
    ]
    return majority, kappa


def answer_everything(page, key="n"):
    """Answer every question of the open task page with one key, then submit with Enter."""
    total = int(page.locator("#total-count").inner_text())
    for _ in range(total):
        page.keyboard.press(key)
    page.keyboard.press("Enter")


def test_a_new_account_clicking_through_demo_tasks_moves_no_expert_number(page_for, demo, snap):
    before = expert_numbers(demo)
    newcomer = UserFactory(username="newcomer", roles=[ANNOTATOR])
    page = page_for(newcomer)
    page.goto("/annotate/")
    assert page.locator("nav a[aria-current=page]").inner_text() == "My tasks"
    page.get_by_role("button", name="Start next task").first.click()
    page.wait_for_url("**/annotate/assignments/*/")
    assert "task 1 of 8" in page.locator("h1").inner_text()
    assert page.locator("details.guidelines").evaluate("e => e.open")
    page.keyboard.press("?")  # the keyboard help overlay
    assert page.locator("dialog#key-help").is_visible()
    snap(page, "keyboard-help")
    page.keyboard.press("Escape")
    assert not page.locator("dialog#key-help").is_visible()
    for number in (1, 2):
        current = page.url
        answer_everything(page)
        # Straight to the next task: wait for another assignment's page (the pattern alone
        # matched the page just submitted, and the heading was read before the redirect).
        page.wait_for_url(lambda url, current=current: url != current and "/assignments/" in url)
        page.wait_for_load_state("load")
        assert f"task {number + 1} of 8" in page.locator("h1").inner_text()
    assert not page.locator("details.guidelines").evaluate("e => e.open")

    assert Annotator.objects.get(user=newcomer).kind == AnnotatorKind.UNDECIDED
    assert expert_numbers(demo) == before

    researcher = page_for(user("researcher"))
    researcher.goto("/annotators/?kind=undecided")
    row = researcher.locator("tr[data-annotator=newcomer]")
    assert "2" in row.locator("td").nth(3).inner_text()  # tasks done
    row.locator("select[name=kind]").first.select_option("crowd")
    row.get_by_role("button", name="Save").first.click()
    researcher.wait_for_url("**/annotators/?kind=undecided")
    assert "newcomer is now: Crowd worker" in researcher.locator(".messages").inner_text()
    assert expert_numbers(demo) == before  # crowd labels never join the expert majority


def test_every_role_has_its_navigation_and_a_403_page_in_the_layout(page_for, demo):
    sections = {
        "cara": ["My tasks", "Label-word tasks", "Revision sessions"],
        "researcher": [
            *("Benchmarks", "Projects", "Imports", "Reports", "Annotators", "Verbalizer"),
            *("Revision studies", "Judges", "Judge runs", "Model runs"),
        ],
        "admin": [
            *("Benchmarks", "Projects", "Imports", "Reports", "Annotators", "Verbalizer"),
            *("Revision studies", "Judges", "Judge runs", "Model runs", "Crowd", "Endpoints"),
        ],
    }
    for username, labels in sections.items():
        page = page_for(user(username))
        page.goto("/")
        shown = page.locator("nav[aria-label=Main] a").all_inner_texts()
        assert shown[: len(labels)] == labels, (username, shown)
        for label in labels:
            link = page.locator("nav[aria-label=Main]").get_by_role("link", name=label)
            href = link.get_attribute("href")
            link.click()
            page.wait_for_url(f"**{href}")
            current = page.locator("nav a[aria-current=page]")
            assert current.count() == 1 and current.inner_text() == label, (username, label)
            assert page.locator("main h1").count() == 1

    researcher = page_for(user("researcher"))
    for url in ("/admin/", "/crowd/publications/", "/annotate/"):
        answer = researcher.goto(url)
        assert answer.status == 403, url
        assert "This page is not for your role" in researcher.locator("h1").inner_text()
        assert researcher.locator("nav[aria-label=Main] a").count() == 10  # the layout, not a stub
    assert researcher.locator("input[name=password]").count() == 0  # no second login form


def test_a_researcher_makes_a_judge_on_the_judges_page_and_the_run_form_offers_it(
    page_for, demo, snap
):
    researcher = page_for(user("researcher"))
    researcher.goto("/judge/runs/new/")
    researcher.get_by_role("link", name="Judges").first.click()
    researcher.wait_for_url("**/judge/judges/")
    researcher.get_by_label("Name").fill("browser-judge")
    researcher.get_by_label("Protocol").select_option("independent")
    researcher.get_by_label("Endpoint").select_option(
        label=f"{DEMO_ENDPOINT} (offline fake: no bill, researchers may use it)"
    )
    researcher.get_by_role("button", name="Create the judge").click()
    researcher.wait_for_url("**/judge/judges/")
    assert "Created the judge browser-judge" in researcher.locator(".messages").inner_text()
    row = researcher.locator("#judges tr", has_text="browser-judge")
    assert "Each question on its own" in row.inner_text() and "0 runs" in row.inner_text()
    snap(researcher, "judge created")

    researcher.get_by_label("Name").fill("browser-judge")  # the same name again: refused
    researcher.get_by_label("Endpoint").select_option(
        label=f"{DEMO_ENDPOINT} (offline fake: no bill, researchers may use it)"
    )
    researcher.get_by_role("button", name="Create the judge").click()
    error = researcher.locator("#id_name_error")
    assert "is taken by an annotator or a judge" in error.inner_text()
    assert researcher.get_by_label("Name").input_value() == "browser-judge"

    researcher.goto("/judge/runs/new/")
    researcher.get_by_label("Judge").select_option(
        label="browser-judge (offline fake: no bill, researchers may use it)"
    )


def test_no_dead_ends_judge_export_and_api_docs(page_for, demo, settings, tmp_path):
    settings.EXPORT_DIR = tmp_path
    settings.BACKGROUND_THREADS = True
    admin = page_for(user("admin"))
    admin.goto("/judge/runs/new/")
    assert admin.locator("#prerequisites").count() == 0  # the demo ships a judge
    admin.get_by_label("Judge").select_option(
        label="demo-judge (offline) (offline fake: no bill, researchers may use it)"
    )
    admin.get_by_label("Benchmark").select_option(label=DEMO_BENCHMARK)
    for box in admin.locator("input[name=systems]").all():
        box.check()
    admin.get_by_label("Subset").select_option("easy")
    admin.get_by_role("button", name="Start").click()
    # The demo's judge has run once already: a second run replaces its labels, so Start asks.
    admin.get_by_text("already have labels from this judge").wait_for()
    admin.get_by_label("Replace earlier labels").check()
    admin.get_by_role("button", name="Start").click()
    admin.wait_for_url("**/engine/runs/*/")  # the run page of the engine, following itself
    assert admin.locator("h1").inner_text().startswith("Judge run #")
    admin.get_by_role("link", name="See the results").click()  # back to the judge run's page
    admin.wait_for_url("**/judge/runs/*/")
    admin.locator("#status").get_by_text("Done").wait_for(timeout=120_000)

    researcher = page_for(user("researcher"))
    researcher.goto(f"/reports/{demo.pk}/")
    researcher.get_by_role("button", name="Export everything (zip)").click()
    researcher.wait_for_url(f"**/reports/{demo.pk}/?unknown=exclude&acc=exclude#exports")
    link = researcher.get_by_role("link", name="Download zip").first
    link.wait_for(timeout=120_000)  # appears by itself when the background export is done
    with researcher.expect_download() as download_info:
        link.click()
    with zipfile.ZipFile(download_info.value.path()) as archive:
        assert "report.json" in archive.namelist()
    assert str(tmp_path) not in researcher.content()

    docs = page_for()
    docs.goto("/api/docs/")
    docs.locator(".swagger-ui .opblock").first.wait_for()
    docs.goto("/api/redoc/")
    docs.get_by_text("InFoBench annotation API").first.wait_for()


def test_pages_fit_390_px_and_follow_a_dark_colour_scheme(page_for, demo):
    researcher = page_for(user("researcher"), viewport={"width": 390, "height": 844})
    # A project's summary: its "Tasks done" bar beside a long note made the page 594 px wide.
    project = Project.objects.filter(benchmark=demo).first()
    pages = ("/", f"/reports/{demo.pk}/", "/annotators/", f"/benchmarks/{demo.pk}/")
    for url in (*pages, f"/annotate/projects/{project.pk}/"):
        researcher.goto(url)
        width = researcher.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, (url, width)
    # The annotator's lists: a hidden column title ("Action") is placed at the table's right
    # end, which must not widen the page when the table scrolls inside its box.
    cara = page_for(user("cara"), viewport={"width": 390, "height": 844})
    for url in ("/annotate/", "/revision/"):
        cara.goto(url)
        width = cara.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, (url, width)
    # With recent assignments under the list: an instruction id is one long word (403 px).
    ana = page_for(user("ana"), viewport={"width": 390, "height": 844})
    ana.goto("/annotate/")
    assert ana.locator("td.task-id").count() > 0
    assert ana.evaluate("document.documentElement.scrollWidth") <= 390
    dark = page_for(user("cara"), color_scheme="dark")
    dark.goto("/annotate/")
    background = dark.evaluate("getComputedStyle(document.body).backgroundColor")
    red, green, blue = (int(part) for part in background[4:-1].split(",")[:3])
    assert red + green + blue < 150, background
    assert dark.locator("link[rel=icon]").get_attribute("href").endswith("favicon.svg")
    assert dark.request.get("/favicon.ico").ok


def axe_violations(page) -> list[str]:
    """Run axe-core (shipped in axe-playwright-python, no network) on the page; list problems."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        f"{violation['id']} ({violation['impact']}): "
        + "; ".join(node["target"][0] for node in violation["nodes"][:5])
        for violation in results.response["violations"]
    ]


def test_the_main_pages_pass_axe_core(page_for, demo):
    pages = {
        "cara": ["/", "/annotate/"],
        "researcher": [
            "/benchmarks/",
            f"/benchmarks/{demo.pk}/",
            f"/benchmarks/{demo.pk}/instructions/{demo.instructions.first().pk}/",
            "/annotate/projects/",
            "/benchmarks/imports/",
            "/reports/",
            f"/reports/{demo.pk}/",
            "/annotators/",
            "/judge/runs/",
            "/judge/runs/new/",
            "/judge/judges/",
            "/help/",
            "/help/reports/",
        ],
        "admin": ["/annotate/projects/new/", "/crowd/publications/"],
    }
    problems = {}
    for username, urls in pages.items():
        page = page_for(user(username))
        for url in urls:
            page.goto(url)
            found = axe_violations(page)
            if found:
                problems[url] = found
    cara = page_for(user("cara"))
    cara.goto("/annotate/")
    cara.get_by_role("button", name="Start next task").first.click()
    cara.wait_for_url("**/annotate/assignments/*/")
    if found := axe_violations(cara):
        problems["task page"] = found
    login = page_for()
    login.goto("/accounts/login/")
    if found := axe_violations(login):
        problems["login"] = found
    assert not problems, problems
    # The check can fail: a field without a label and an image without a text are found.
    login.set_content(
        '<html lang="en"><body><main><h1>x</h1><input name="q">'
        '<img src="/static/favicon.svg"></main></body></html>'
    )
    found = " ".join(axe_violations(login))
    assert "label" in found and "image-alt" in found


def test_the_sticky_submit_bar_never_hides_the_focused_question(page_for, snap):
    from tests.factories import project_with_tasks

    project_with_tasks(instructions=1, systems=3, questions=4)
    page = page_for(
        UserFactory(username="phone", roles=[ANNOTATOR]), viewport={"width": 390, "height": 640}
    )
    page.goto("/annotate/")
    page.get_by_role("button", name="Start next task").click()
    page.wait_for_url("**/annotate/assignments/*/")
    hidden = """() => {
        const group = document.activeElement.closest('fieldset.answer');
        const bar = document.querySelector('.submit-bar').getBoundingClientRect();
        return group.getBoundingClientRect().bottom - bar.top;
    }"""
    for number in range(11):  # every question but the last: focus moves on after each key
        page.keyboard.press("y")
        assert page.evaluate(hidden) <= 0, f"question {number + 2} is under the submit bar"
    snap(page, "last-question-focused")
