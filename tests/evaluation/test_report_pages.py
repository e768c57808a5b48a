"""The report page, its downloads, the API and `manage.py report`, on the hand-computed benchmark."""

from __future__ import annotations

import csv
import io
import json
import zipfile

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from annotate.models import Label
from annotate.roles import ANNOTATOR
from annotate.selectors.identities import OPERATOR
from annotate.services.api_tokens import api_token_create
from evaluation.services.reports import report_build
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

# The report page's queries: a fixed number, whatever the data (main: 32; the effective kinds
# and their fingerprint: 4; the expert time span asked per subset even without experts: 3; the
# reader's crowd identities and the names of the annotators the report lists: 3; the cache key's
# hash of the instructions, questions, responses, systems and annotators' name order: 5; the
# hash of the assignments the platforms paid, id by id: 1; on the cache's miss, the cache key's
# 13 again, read in the snapshot of the report's reads so that the report is stored under the
# key of what it read, and the 2 ends of that snapshot, here a savepoint in the test's
# transaction, around the report's own: 15; the judges' runs and their statuses in the cache
# key, so a run stopped with no new answer moves it: 1 each time the key is read, 3; which runs
# set the judges' labels (evaluation.selectors.judge_label_runs), here none: 1, at most 3). On
# PostgreSQL the questions', responses' and labels' columns are read through psycopg itself
# (report_data._columns_from_postgresql), which Django's count does not see: 3 fewer there.
QUERIES = 67
FINGERPRINT_LAYOUT = 6


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def researcher_client(client, researcher):
    client.force_login(researcher)
    return client


def test_researcher_sees_every_table_of_the_report(researcher_client, bench):
    response = researcher_client.get(reverse("reports:detail", args=[bench.pk]))
    assert response.status_code == 200
    page = response.content.decode()
    for heading in ("Tables 2 and 6", "#Labels", "Leaderboard", "Fleiss", "expert majority"):
        assert heading.lower() in page.lower()
    assert "crowd-majority" in page and "judge" in page
    assert "undefined" in page  # the DRFR kappa of experts who always agree
    kappa = page.split('id="agreement"')[1].split("</table>")[0]
    assert "<td>3 crowd workers</td>" in kappa and "<td>3 experts</td>" in kappa
    assert "crowds" not in kappa
    assert reverse("reports:figure", args=[bench.pk, "constraints", "svg"]) in page
    assert "95% bootstrap over instructions, 1,000 resamples, seed 0." in page


def test_a_drfr_without_an_interval_shows_no_empty_brackets(researcher_client, bench):
    """The easy set is one instruction: its DRFRs have no interval (null), which the page
    showed as "1.000 [, ]"; now the figure alone, with a note saying why."""
    page = researcher_client.get(reverse("reports:detail", args=[bench.pk])).content.decode()
    leaderboard = page.split('id="leaderboard"')[1].split("</table>")[0]
    assert "[, ]" not in leaderboard
    assert '<span class="ci">[' in leaderboard  # overall keeps its intervals
    assert "without brackets has no interval" in page


def test_report_page_says_an_expert_row_is_against_the_other_experts(researcher_client, bench):
    page = researcher_client.get(reverse("reports:detail", args=[bench.pk])).content.decode()
    heading = page.split('<h2 id="sources">')[1].split("</h2>")[0]
    assert heading == (
        "Annotation sources against the expert majority (an expert against the other experts)"
        " (paper Table 4)"
    )
    assert "Annotation sources against the expert majority (paper Table 4)" not in page


def test_report_page_runs_a_fixed_number_of_queries(
    researcher_client, bench, django_assert_max_num_queries
):
    # Two of them fingerprint which work counts (annotate.selectors.results); four more read and
    # fingerprint the annotators' effective kinds (annotate.selectors.annotator_kinds).
    with django_assert_max_num_queries(QUERIES):
        assert researcher_client.get(reverse("reports:detail", args=[bench.pk])).status_code == 200
    # Served from the cache while the data is unchanged: only the fingerprint queries remain,
    # the viewer's role, which decides whose exports they see, and naming the annotators for
    # this viewer (their role, the crowd workers they may see, the names: 3).
    with django_assert_max_num_queries(19 + FINGERPRINT_LAYOUT):
        assert researcher_client.get(reverse("reports:detail", args=[bench.pk])).status_code == 200


def test_cached_report_follows_new_labels(researcher_client, bench):
    url = reverse("api-report", args=[bench.pk])
    before = researcher_client.get(url).json()
    Label.objects.filter(annotator__name="judge").update(value=1)
    after = researcher_client.get(url).json()
    judge = [r for r in after["leaderboard"] if r["source"] == "judge" and r["subset"] == "overall"]
    assert all(r["drfr"] == 1.0 for r in judge)
    assert before["leaderboard"] != after["leaderboard"]


@pytest.mark.parametrize("role", ["anonymous", "annotator"])
def test_only_researchers_and_admins_see_reports(client, bench, role):
    if role == "annotator":
        client.force_login(UserFactory(username="someone", roles=[ANNOTATOR]))
    for url in (
        reverse("reports:list"),
        reverse("reports:detail", args=[bench.pk]),
        reverse("reports:download", args=[bench.pk, "json"]),
        reverse("reports:figure", args=[bench.pk, "leaderboard", "png"]),
        reverse("api-report", args=[bench.pk]),
    ):
        response = client.get(url)
        # Pages send a stranger to the login page; the API asks for credentials (401).
        assert response.status_code in (302, 401, 403, 404), url
        assert b"expert-majority" not in response.content


def test_admin_sees_reports(client, admin_user, bench):
    client.force_login(admin_user)
    assert client.get(reverse("reports:detail", args=[bench.pk])).status_code == 200


def test_unknown_option_changes_the_numbers_and_says_so(researcher_client, bench):
    url = reverse("reports:download", args=[bench.pk, "json"])
    default = json.loads(researcher_client.get(url).content)
    as_no = json.loads(researcher_client.get(url, {"unknown": "no"}).content)
    assert (default["unknown"], as_no["unknown"]) == ("exclude", "no")
    assert default["leaderboard"] != as_no["leaderboard"]
    refused = researcher_client.get(url, {"unknown": "maybe"})
    assert refused.status_code == 400
    assert "unknown must be one of exclude, no, official, not &#x27;maybe&#x27;." in refused.text


def test_every_unknown_convention_is_named_truthfully_on_the_page(researcher_client, bench):
    page = researcher_client.get(
        reverse("reports:detail", args=[bench.pk]), {"unknown": "official", "acc": "wrong"}
    ).content.decode()
    assert "official script" not in page.split('value="no"')[1].split("</option>")[0]
    assert "(equation 1)" in page and "(appendix A.3)" in page
    assert "the official evaluation.py&#x27;s ratio" in page
    assert '<option value="official" selected>' in page
    assert '<option value="wrong" selected>' in page
    # Every download on the page keeps both conventions.
    assert "?unknown=official&amp;acc=wrong" in page
    assert "?unknown=no&" not in page


def test_api_and_downloads_take_the_acc_convention(researcher_client, bench):
    api = reverse("api-report", args=[bench.pk])
    body = researcher_client.get(api, {"unknown": "official", "acc": "wrong"}).json()
    assert (body["unknown"], body["acc_unknown"]) == ("official", "wrong")
    judge = [r for r in body["sources"] if r["source"] == "judge" and r["subset"] == "overall"]
    assert judge[0]["compared"] == 9  # the UNKNOWN compared, as wrong
    bad = researcher_client.get(api, {"acc": "maybe"})
    assert bad.status_code == 400 and "acc" in bad.json()["detail"]
    assert bad.json()["field"] == "acc"
    bad = researcher_client.get(api, {"unknown": "maybe"})
    assert bad.status_code == 400 and bad.json() == {
        "detail": "unknown must be one of exclude, no, official, not 'maybe'.",
        "field": "unknown",
    }
    url = reverse("reports:download", args=[bench.pk, "json"])
    refused = researcher_client.get(url, {"acc": "maybe"})
    assert refused.status_code == 400 and "acc must be one of exclude, wrong" in refused.text
    default = json.loads(researcher_client.get(url).content)
    judge = [r for r in default["sources"] if r["source"] == "judge" and r["subset"] == "overall"]
    assert (default["acc_unknown"], judge[0]["compared"]) == ("exclude", 8)


def test_whole_report_downloads(researcher_client, bench):
    for fmt, marker in (
        ("json", b'"leaderboard"'),
        ("csv", b"# leaderboard"),
        ("tex", b"\\begin{tabular}"),
        ("md", b"| system |"),
    ):
        response = researcher_client.get(reverse("reports:download", args=[bench.pk, fmt]))
        assert response.status_code == 200, fmt
        assert "attachment" in response["Content-Disposition"]
        assert marker in response.content, fmt
    assert researcher_client.get(f"/reports/{bench.pk}/report.exe").status_code == 404


def test_table_downloads_match_the_report(researcher_client, bench):
    report = researcher_client.get(reverse("api-report", args=[bench.pk])).json()
    response = researcher_client.get(reverse("reports:table", args=[bench.pk, "sources", "csv"]))
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == len(report["sources"])
    judge = next(r for r in rows if r["source"] == "judge" and r["subset"] == "overall")
    assert float(judge["wpld"]) == pytest.approx(1.0)
    as_json = researcher_client.get(reverse("reports:table", args=[bench.pk, "agreement", "json"]))
    assert json.loads(as_json.content) == report["agreement"]
    missing = reverse("reports:table", args=[bench.pk, "secrets", "csv"])
    assert researcher_client.get(missing).status_code == 404


def test_figures_in_three_formats(researcher_client, bench):
    svg = researcher_client.get(reverse("reports:figure", args=[bench.pk, "constraints", "svg"]))
    assert svg["Content-Type"] == "image/svg+xml" and b"<svg" in svg.content
    assert "default-src 'none'" in svg["Content-Security-Policy"]
    png = researcher_client.get(reverse("reports:figure", args=[bench.pk, "leaderboard", "png"]))
    assert png.content.startswith(b"\x89PNG")
    pdf = researcher_client.get(
        reverse("reports:figure", args=[bench.pk, "positions", "pdf"]), {"download": 1}
    )
    assert pdf.content.startswith(b"%PDF") and "attachment" in pdf["Content-Disposition"]
    unknown = reverse("reports:figure", args=[bench.pk, "nonsense", "svg"])
    assert researcher_client.get(unknown).status_code == 404


def test_a_figure_of_an_unknown_label_source_is_a_400_not_a_500(researcher_client, bench):
    url = reverse("reports:figure", args=[bench.pk, "leaderboard", "svg"])
    answer = researcher_client.get(url, {"source": "nobody"})
    assert answer.status_code == 400
    assert "no data for the label source 'nobody'" in answer.text


def test_aggregated_labels_are_the_majorities_in_the_import_format(researcher_client, bench):
    response = researcher_client.get(reverse("reports:aggregated-labels", args=[bench.pk]))
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert set(rows[0]) == {"instruction_id", "system", "annotator", "question_index", "label"}
    majority = {
        (r["annotator"], r["system"], r["question_index"], r["label"])
        for r in rows
        if r["instruction_id"] == bench.instructions.order_by("id").first().external_id
    }
    assert ("expert-majority", "alpha", "2", "UNKNOWN") in majority  # the tie
    assert ("crowd-majority", "beta", "1", "NO") in majority
    assert len(rows) == 10 + 4  # experts: every item; crowd: i1 only


def test_api_returns_the_report(researcher_client, bench):
    response = researcher_client.get(reverse("api-report", args=[bench.pk]))
    assert response.status_code == 200
    body = response.json()
    assert body["benchmark"] == bench.name
    assert [r["instructions"] for r in body["dataset"]] == [1, 1, 2]
    assert [r["labels"] for r in body["constraint_types"]] == [3, 3, 6]
    assert {r["domain"] for r in body["hard_domains"]} == {"Poetry"}
    assert {r["protocol"] for r in body["agreement"]} == {"drfr", "ds"}
    bad = researcher_client.get(reverse("api-report", args=[bench.pk]), {"unknown": "x"})
    assert bad.status_code == 400 and "unknown" in bad.json()["detail"]
    assert researcher_client.get(reverse("api-report", args=[99999])).status_code == 404


def test_a_script_with_a_token_downloads_the_report_files_and_figures(client, researcher, bench):
    """The page's CSV, LaTeX and figures are the session's only: a token reaches them here."""
    _, key = api_token_create(user=researcher)
    auth = {"HTTP_AUTHORIZATION": f"Token {key}"}
    page_file = reverse("reports:download", args=[bench.pk, "csv"])
    assert client.get(page_file, **auth).status_code == 302  # the page's: a login form
    csv_file = client.get(reverse("api-report-download", args=[bench.pk, "csv"]), **auth)
    assert csv_file.status_code == 200 and csv_file["Content-Type"].startswith("text/csv")
    assert "# leaderboard" in csv_file.content.decode()
    latex = client.get(
        reverse("api-report-download", args=[bench.pk, "tex"]), {"unknown": "no"}, **auth
    )
    assert latex.status_code == 200 and b"\\begin{tabular}" in latex.content
    png = client.get(reverse("api-report-figure", args=[bench.pk, "leaderboard", "png"]), **auth)
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
    stranger = client.get(
        reverse("api-report-figure", args=[bench.pk, "leaderboard", "svg"]),
        {"source": "nobody"},
        **auth,
    )
    assert stranger.status_code == 400 and stranger.json()["field"] == "source"
    bad = client.get(reverse("api-report-download", args=[bench.pk, "csv"]), {"acc": "x"}, **auth)
    assert bad.status_code == 400 and bad.json()["field"] == "acc"
    missing = reverse("api-report-figure", args=[bench.pk, "nonsense", "svg"])
    assert client.get(missing, **auth).status_code == 404
    assert (
        client.get(reverse("api-report-download", args=[bench.pk, "docx"]), **auth).status_code
        == 404
    )
    _, annotators_key = api_token_create(user=UserFactory(roles=[ANNOTATOR]))
    refused = client.get(
        reverse("api-report-download", args=[bench.pk, "csv"]),
        HTTP_AUTHORIZATION=f"Token {annotators_key}",
    )
    assert refused.status_code == 404


def test_report_command_prints_every_format(bench, tmp_path):
    output = io.StringIO()
    call_command("report", "--benchmark", bench.name, "--format", "json", stdout=output)
    report = json.loads(output.getvalue())
    assert {r["source"] for r in report["sources"]} >= {"judge", "expert-majority"}
    target = tmp_path / "tables.tex"
    call_command(
        "report",
        "--benchmark",
        bench.name,
        "--format",
        "latex",
        "--output",
        str(target),
        stderr=io.StringIO(),
    )
    assert "\\toprule" in target.read_text()
    markdown = io.StringIO()
    call_command("report", "--benchmark", bench.name, "--unknown", "no", stdout=markdown)
    assert "| system |" in markdown.getvalue()
    official = io.StringIO()
    call_command(
        "report",
        "--benchmark",
        bench.name,
        "--format",
        "json",
        "--unknown",
        "official",
        "--acc-unknown",
        "wrong",
        stdout=official,
    )
    report = json.loads(official.getvalue())
    assert (report["unknown"], report["acc_unknown"]) == ("official", "wrong")


def test_report_command_names_an_unknown_benchmark(db):
    with pytest.raises(CommandError, match="No benchmark named 'nope'"):
        call_command("report", "--benchmark", "nope")


def test_report_command_names_an_output_it_cannot_write(bench, tmp_path):
    missing = str(tmp_path / "no-such-folder" / "report.md")
    with pytest.raises(CommandError, match=r"no-such-folder/report.md: cannot write this file"):
        call_command("report", "--benchmark", bench.name, "--output", missing)


def test_export_writes_tables_figures_and_labels_to_the_export_folder(
    researcher_client, bench, settings, tmp_path, django_capture_on_commit_callbacks
):
    from evaluation.models import ExportStatus, ReportExport

    settings.EXPORT_DIR = tmp_path
    settings.EXPORT_S3_BUCKET = ""
    with django_capture_on_commit_callbacks(execute=True):
        response = researcher_client.post(
            reverse("reports:export", args=[bench.pk]), {"unknown": "official", "acc": "wrong"}
        )
    assert response.status_code == 302
    export = ReportExport.objects.get()
    assert export.status == ExportStatus.DONE, export.message
    assert (export.unknown, export.acc_unknown) == ("official", "wrong")
    assert str(tmp_path) in export.location
    names = {name.rsplit("/", 1)[-1] for name in export.files}
    assert {"report.json", "tables.tex", "report.md", "leaderboard.csv"} <= names
    assert {
        "constraints.png",
        "constraints.pdf",
        "aggregated_labels.csv",
        "raw_labels.csv",
    } <= names
    written = json.loads(next(tmp_path.rglob("report.json")).read_text())
    assert written["unknown"] == "official" and written["acc_unknown"] == "wrong"
    assert written["benchmark"] == bench.name
    page = researcher_client.get(reverse("reports:detail", args=[bench.pk])).content.decode()
    assert "Wrote" in page and "Download zip" in page
    assert str(tmp_path) not in page  # the page never shows a server path

    download = researcher_client.get(reverse("reports:export-download", args=[bench.pk, export.pk]))
    assert download.status_code == 200
    assert download["Content-Disposition"].startswith('attachment; filename="report-')
    with zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content))) as archive:
        zipped = set(archive.namelist())
        assert json.loads(archive.read("report.json"))["unknown"] == "official"
    stored = {name.split("/", 3)[-1] for name in export.files} - {"export.zip"}
    assert zipped == stored
    status = researcher_client.get(reverse("reports:export-status", args=[bench.pk, export.pk]))
    assert status.json()["downloadable"] is True
    steps = status.json()
    # Each figure drawn, each file stored, and the report built before them.
    drawn = sum(1 for name in export.files if name.split("/")[-2] == "figures")
    assert steps["steps_done"] == steps["steps_total"] == drawn + len(export.files) + 1


def test_a_running_export_shows_its_step_count_not_an_empty_bar(
    researcher_client, researcher, bench
):
    """Before its first step an export's bar is busy (no value), then it counts its steps; the
    page and the status it polls say the same."""
    from evaluation.models import ExportStatus, ReportExport

    building = ReportExport.objects.create(
        benchmark=bench, status=ExportStatus.RUNNING, created_by=researcher
    )
    drawing = ReportExport.objects.create(
        benchmark=bench, status=ExportStatus.RUNNING, steps_done=3, steps_total=25,
        created_by=researcher,
    )  # fmt: skip
    page = researcher_client.get(reverse("reports:detail", args=[bench.pk])).content.decode()
    assert f'max="1" aria-label="Export {building.pk} progress"' in page
    assert "Building the report (step 1)" in page
    assert f'max="25" value="3" aria-label="Export {drawing.pk} progress"' in page
    assert '<span class="export-steps">3 of 25 steps</span>' in page
    status = researcher_client.get(reverse("reports:export-status", args=[bench.pk, drawing.pk]))
    assert status.json()["steps_display"] == "3 of 25 steps"


def test_export_refuses_a_bad_option_and_annotators(client, researcher_client, bench):
    from evaluation.models import ReportExport

    url = reverse("reports:export", args=[bench.pk])
    assert researcher_client.post(url, {"unknown": "maybe"}).status_code == 400
    assert researcher_client.get(url).status_code == 405
    client.force_login(UserFactory(username="someone", roles=[ANNOTATOR]))
    assert client.post(url, {"unknown": "no"}).status_code == 403
    assert not ReportExport.objects.exists()


def test_report_page_query_count_does_not_grow_with_the_data(researcher_client, bench):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotate.models import Benchmark
    from annotate.services.demo_data import DEMO_BENCHMARK, demo_benchmark_load

    demo_benchmark_load()
    demo = Benchmark.objects.get(name=DEMO_BENCHMARK)
    counts = []
    for benchmark in (bench, demo):
        cache.clear()
        with CaptureQueriesContext(connection) as queries:
            response = researcher_client.get(reverse("reports:detail", args=[benchmark.pk]))
        assert response.status_code == 200
        counts.append(len(queries))
    # The demo has more instructions, systems, annotators and labels; the page asks the same.
    assert counts[0] == counts[1] <= QUERIES, counts


def test_the_report_page_has_contents_explains_undefined_and_picks_figure_sources(
    researcher_client, bench
):
    url = reverse("reports:detail", args=[bench.pk])
    page = researcher_client.get(url, {"source_leaderboard": "judge", "source_domains": "nope"})
    assert 'aria-label="Contents of this report"' in page.text
    for anchor in ("leaderboard", "agreement", "sources", "figures", "tables", "exports"):
        assert f'href="#{anchor}"' in page.text and f'id="{anchor}"' in page.text
    choices = {figure["name"]: figure for figure in page.context["figures"]}
    assert "judge" in choices["leaderboard"]["sources"]
    assert choices["leaderboard"]["chosen"] == "judge"
    assert choices["domains"]["chosen"] == ""  # a source the report does not have is ignored
    leaderboard_src = f"/reports/{bench.pk}/figures/leaderboard.svg?unknown=exclude&amp;acc=exclude&amp;source=judge"
    assert leaderboard_src in page.text
    figure = researcher_client.get(
        reverse("reports:figure", args=[bench.pk, "leaderboard", "svg"]), {"source": "judge"}
    )
    assert figure.status_code == 200
    undefined = [r for r in page.context["report"]["agreement"] if r["fleiss_kappa"] is None]
    for row in undefined:  # the reason is on the page, not only in a tooltip
        assert f'undefined <span class="undefined-note">{row["undefined_reason"]}' in page.text


def test_the_reports_page_lists_the_verbalizer_and_revision_reports_too(researcher_client, db):
    """A verbalizer report lives under /reports/ and lights up "Reports" in the navigation, but
    that page listed InFoBench benchmarks only: the way back to the report went through another
    section."""
    from annotate.verbalizer.services.sets import evaluation_set_create
    from tests.annotate.verbalizer.helpers import fill

    fill("SST-2", [True, False])
    made = evaluation_set_create(name="paper", datasets=["SST-2"], items=2, seed=1)
    page = researcher_client.get(reverse("reports:list")).content.decode()
    report = reverse("verbalizer-reports:detail", args=[made.evaluation_set.pk])
    assert f'<a href="{report}">paper</a>' in page
    assert f'<a href="{reverse("revision-reports:list")}">' in page


def test_exports_over_the_users_rate_are_refused_and_queue_nothing(
    researcher_client, bench, worker_rates, django_capture_on_commit_callbacks
):
    from evaluation.models import ReportExport

    worker_rates(exports="1/hour")
    url = reverse("reports:export", args=[bench.pk])
    with django_capture_on_commit_callbacks(execute=False) as queued:
        assert researcher_client.post(url, {"unknown": "maybe"}).status_code == 400  # not counted
        assert researcher_client.post(url, {"unknown": "exclude"}).status_code == 302
        refused = researcher_client.post(url, {"unknown": "exclude"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert (
        b"Too many report exports and label downloads" in refused.content
        and b"Nothing was queued" in refused.content
    )
    assert ReportExport.objects.count() == 1 and len(queued) == 1


def test_the_aggregated_labels_csv_counts_with_the_exports_and_is_refused_over_the_rate(
    researcher_client, bench, worker_rates
):
    """It holds the benchmark's every label, built in memory: counted with the exports."""
    worker_rates(exports="2/hour")
    url = reverse("reports:aggregated-labels", args=[bench.pk])
    first = researcher_client.get(url)
    assert first.status_code == 200 and first["Content-Disposition"].endswith(
        'filename="labels-aggregated.csv"'
    )
    assert researcher_client.post(reverse("reports:export", args=[bench.pk]), {}).status_code == 302
    refused = researcher_client.get(url)
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert b"Too many report exports and label downloads" in refused.content
    assert reverse("reports:detail", args=[bench.pk]).encode() in refused.content


def test_the_report_page_shows_acc_as_the_latex_table_does(researcher_client, bench):
    from evaluation.report_formats import _fixed

    page = researcher_client.get(reverse("reports:detail", args=[bench.pk])).content.decode()
    table = page.split('<h2 id="sources">')[1].split("</table>")[0]
    shown = {
        (cells[0], cells[1]): cells[4].split('<sup class="na-reason">')[0]  # its reason's mark
        for row in table.split("<tr>")[2:]
        for cells in [[cell.split("</td>")[0].strip() for cell in row.split("<td>")[1:]]]
    }
    api = researcher_client.get(reverse("api-report", args=[bench.pk])).json()
    expected = {
        (row["subset"], row["source"]): "–"
        if row["acc"] is None
        else _fixed(row["acc"], scale=100, digits=1, minus="-")
        for row in api["sources"]
    }
    assert shown == expected
    assert any(value not in ("–", "100.0") for value in expected.values())


@pytest.mark.parametrize(
    "where",
    [
        ("reports:detail", ()),
        ("reports:table", ("leaderboard", "csv")),
        ("reports:figure", ("leaderboard", "svg")),
    ],
)
def test_a_convention_the_report_does_not_know_is_named_not_a_missing_page(
    researcher_client, bench, where
):
    name, args = where
    refused = researcher_client.get(reverse(name, args=[bench.pk, *args]), {"acc": "yes"})
    assert refused.status_code == 400
    assert "acc must be one of exclude, wrong, not &#x27;yes&#x27;." in refused.text


def test_the_kappa_table_says_what_its_columns_count(researcher_client, bench):
    page = researcher_client.get(reverse("reports:detail", args=[bench.pk])).content.decode()
    note = page.split('id="agreement-note">')[1].split("</p>")[0]
    assert "An item is one instruction and one pair of systems" in note
    assert "raw agreement is the share of items on which all" in note
    assert "Dropped: items of the subset with fewer, left out, those no annotator" in note
    assert "Items and Dropped add up to the subset's instructions times the pairs" in note


def test_cached_report_follows_labels_edited_in_the_admin(researcher_client, bench, admin_user):
    """A label's value is corrected on the admin's change page. Two corrections that leave the
    count, the last id and the sum of values as they were (a YES made NO on alpha, a NO made
    YES on beta) were served the report cached before them, for as long as it was kept."""
    url = reverse("api-report", args=[bench.pk])

    def judge_drfr(report):
        rows = report["leaderboard"]
        return {
            r["system"]: r["drfr"]
            for r in rows
            if r["source"] == "judge" and r["subset"] == "overall"
        }

    before = judge_drfr(researcher_client.get(url).json())
    judge = Label.objects.filter(annotator__name="judge").order_by("id")
    to_no = judge.filter(response__system__name="alpha", value=1).first()
    to_yes = judge.filter(response__system__name="beta", value=0).first()
    assert to_no is not None and to_yes is not None
    admin_user.is_superuser = True
    admin_user.save()
    admin = Client()
    admin.force_login(admin_user)
    for label, value in ((to_no, 0), (to_yes, 1)):
        form = {"question": label.question_id, "response": label.response_id, "value": value}
        assert admin.post(f"/admin/annotate/label/{label.pk}/change/", form).status_code == 302

    after = judge_drfr(researcher_client.get(url).json())
    fresh = judge_drfr(report_build(scope=OPERATOR, benchmark=bench, n_resamples=10))
    assert after == fresh != before


def test_cached_report_follows_four_admin_corrections_that_cancel_out(
    researcher_client, bench, admin_user
):
    """Four labels corrected on the admin's change page, two made YES and two made NO, whose
    ids balance (a + d = b + c): the count, last id, sum of values, sum of id × value and the
    sums of questions and responses all stay as they were, and the cached report was served."""
    from itertools import combinations

    from django.db.models import Count, F, Max, Sum

    url = reverse("api-report", args=[bench.pk])
    judge = Label.objects.filter(annotator__name="judge")
    before = researcher_client.get(url).json()["leaderboard"]
    values = dict(judge.values_list("id", "value"))
    up_a, down_b, down_c, up_d = next(
        (a, b, c, d)
        for a, b, c, d in combinations(sorted(values), 4)
        if a + d == b + c and values[a] == values[d] == 0 and values[b] == values[c] == 1
    )
    checksum = {
        "n": Count("id"), "last": Max("id"), "total": Sum("value"),
        "weighted": Sum(F("id") * F("value")), "questions": Sum("question_id"),
        "responses": Sum("response_id"),
    }  # fmt: skip
    sums = judge.aggregate(**checksum)
    admin_user.is_superuser = True
    admin_user.save()
    admin = Client()
    admin.force_login(admin_user)
    for pk, value in ((up_a, 1), (down_b, 0), (down_c, 0), (up_d, 1)):
        label = Label.objects.get(pk=pk)
        form = {"question": label.question_id, "response": label.response_id, "value": value}
        assert admin.post(f"/admin/annotate/label/{pk}/change/", form).status_code == 302
    assert judge.aggregate(**checksum) == sums  # no sum of the rows tells the corrections

    after = researcher_client.get(url).json()["leaderboard"]
    fresh = report_build(scope=OPERATOR, benchmark=bench, n_resamples=10)["leaderboard"]
    assert after == fresh != before


def _sources_table(page: str) -> str:
    return page.split('id="sources"')[1].split('<h2 id="figures"')[0]


def test_table_4_gives_each_dash_its_own_reason(researcher_client, bench):
    """A judge that labelled one system: ACC there, PLD "–", and the legend said every "–"
    meant no expert-majority label, false here."""
    Label.objects.filter(annotator__name="judge", response__system__name="beta").delete()
    page = researcher_client.get(reverse("reports:detail", args=[bench.pk])).text
    table = _sources_table(page)

    assert "no item of that source has an expert-majority label" not in table
    judge = next(r for r in table.split("<tr>") if "<td>overall</td><td>judge</td>" in r)
    cells = judge.split("<td>")
    assert not cells[5].startswith("–")  # ACC
    mark = cells[6].split('<sup class="na-reason">')[1].split("</sup>")[0]
    reasons = table.split('id="sources-na-reasons">')[1].split("</ol>")[0].split("<li>")[1:]
    assert reasons[int(mark) - 1].startswith(
        "The source labelled fewer than two systems on every instruction of that set"
    )


def test_the_leaderboard_marks_a_partial_drfr(researcher_client, bench):
    page = researcher_client.get(reverse("reports:detail", args=[bench.pk])).text
    leaderboard = page.split('<h2 id="leaderboard"')[1].split("</table>")[0]
    crowd = next(r for r in leaderboard.split("<tr>") if "<td>crowd-majority</td><td>alpha" in r)
    easy, hard, overall = crowd.split("<td>")[3:6]
    assert "partial" not in easy and hard.startswith("–")
    assert '<span class="partial">partial: 1 of 2 responses labelled</span>' in overall
    judge = next(r for r in leaderboard.split("<tr>") if "<td>judge</td><td>alpha" in r)
    assert "partial" not in judge


def test_report_command_markdown_numbers_as_the_page_shows_them(bench, capsys):
    call_command("report", "--benchmark", bench.name, "--format", "md")
    out = capsys.readouterr().out
    dataset = next(line for line in out.splitlines() if line.startswith("| overall | 2 |"))
    # 2 instructions, 5 questions: 2.50 questions per instruction, as on the page.
    assert "| 5 | 2.50 |" in dataset
