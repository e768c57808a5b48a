import json

import pytest
from django.urls import reverse

from annotate.revision.models import Study
from annotate.revision.services.imports import sessions_import
from annotate.roles import ANNOTATOR
from tests.evaluation.revision.sample import sample_study, turn
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_researcher_sees_the_report_page_downloads_figures_and_api(client, researcher, tmp_path):
    study = sample_study(tmp_path)
    client.force_login(researcher)
    page = client.get(reverse("revision-reports:report", args=[study.pk])).content.decode()
    assert "Table 2: sessions per system" in page and "1.50" in page
    table2 = client.get(reverse("revision-reports:report", args=[study.pk])).context["tables"][0]
    assert table2["columns"][-5:] == [
        "Turns",
        "Turns edited",
        "Turns per session",
        "% information-seeking",
        "% stylistic",
    ]
    llama = [cell["text"] for cell in table2["rows"][1][-3:]]
    assert llama == ["3.00", "67", "33"]  # llama: 2 of 3 turns seeking
    api = client.get(reverse("api-revision-report", args=[study.pk])).json()
    assert api["table2"][1] == pytest.approx(
        {
            "system": "llama",
            "sessions": 1,
            "turns": 3,
            "edited": 1,
            "turns_per_session": 3.0,
            "information_seeking": 2 / 3,
            "stylistic": 1 / 3,
        }
    )
    csv = client.get(reverse("revision-reports:download", args=[study.pk, "csv"]))
    assert csv["Content-Type"] == "text/csv" and b"# table5" in csv.content
    for fmt, magic in (("svg", b"<svg"), ("png", b"\x89PNG"), ("pdf", b"%PDF")):
        figure = client.get(reverse("revision-reports:figure", args=[study.pk, "ratings", fmt]))
        assert figure.status_code == 200 and magic in figure.content[:200]
    positions = client.get(reverse("revision-reports:figure", args=[study.pk, "positions", "svg"]))
    assert positions.status_code == 200
    # Names in the SVG come from imported sessions: opened on its own it may run nothing.
    policy = positions["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert "script-src" not in policy, policy


def test_annotators_cannot_read_reports(client, annotator_user, tmp_path):
    study = sample_study(tmp_path)
    client.force_login(annotator_user)
    assert client.get(reverse("revision-reports:report", args=[study.pk])).status_code == 403
    assert client.get(reverse("api-revision-report", args=[study.pk])).status_code == 404


def test_the_page_shows_tables_3_and_4_merged_and_every_category_apart(
    client, researcher, tmp_path
):
    turns = [
        turn(f"Remove sentence {n}.", "stylistic", "good", category="remove") for n in range(20)
    ]
    turns.append(turn("Shorten it.", "stylistic", "good", category="condense"))  # 1 of 21: 4.8%
    session = {"original_question": "Q?", "model_name": "m", "initial_answer": "a0"}
    path = tmp_path / "merge.jsonl"
    path.write_text(json.dumps({**session, "interaction": turns}) + "\n")
    sessions_import(path=str(path), study_name="merge")
    study = Study.objects.get(name="merge")
    client.force_login(researcher)
    page = client.get(reverse("revision-reports:report", args=[study.pk]))
    merged = page.context["tables"][3]
    assert merged["name"] == "table3" and merged["merged"] == ["condense"]

    def texts(rows):
        return [[cell["text"] for cell in row[:2]] for row in rows]

    assert texts(merged["rows"]) == [["remove", "20"], ["others", "1"]]
    assert texts(merged["detail"]["rows"]) == [["condense", "1"], ["remove", "20"]]
    assert (
        "merged into “others”: condense" in page.text and "Every category on its own" in page.text
    )
    api = client.get(reverse("api-revision-report", args=[study.pk])).json()["table3"]
    assert [r["category"] for r in api["rows"]] == ["remove", "others"]
    assert [r["category"] for r in api["categories"]] == ["condense", "remove"]
    markdown = client.get(reverse("revision-reports:download", args=[study.pk, "md"])).text
    assert "Merged into others (under 5%, KIWI appendix A.3): condense." in markdown


@pytest.mark.parametrize("name", ["ratings", "positions"])
def test_figure2_names_its_bars_and_keeps_its_legend_off_them(tmp_path, name, drawn_figure):
    """The ratings bars were labelled s / i / o with no key, and the positions legend sat on the
    bars (its information-seeking swatch drawn over a bar of the same colour)."""
    from evaluation.revision import figures
    from evaluation.revision.reports import revision_report_build

    report = revision_report_build(study=sample_study(tmp_path))
    figure = drawn_figure(figures, figures.render_revision_figure, report, name, "png")
    (axes,) = figure.axes
    assert not axes.get_legend()  # the legend belongs to the figure, outside the axes
    (legend,) = figure.legends
    box, plot = legend.get_window_extent(), axes.get_window_extent()
    assert box.y0 >= plot.y1 and figure.bbox.x0 <= box.x0 and box.x1 <= figure.bbox.x1
    if name == "ratings":
        ticks = [t.get_text() for t in axes.get_xticklabels()]
        assert ticks[:3] == ["gpt-4\nstylistic", "gpt-4\ninfo-seeking", "gpt-4\nall"], ticks


def test_researcher_downloads_the_sessions_from_the_report_page(client, researcher, tmp_path):
    """The sessions as `export_sessions` writes them, from the page: KIWI JSON Lines that import
    again into the same report, and one CSV row per turn; annotators get 403."""
    from evaluation.revision.reports import revision_report_build

    study = sample_study(tmp_path)
    client.force_login(researcher)
    page = client.get(reverse("revision-reports:report", args=[study.pk])).content.decode()
    jsonl_url = reverse("revision-reports:sessions-download", args=[study.pk, "jsonl"])
    csv_url = reverse("revision-reports:sessions-download", args=[study.pk, "csv"])
    assert jsonl_url in page and csv_url in page
    answer = client.get(jsonl_url)
    assert answer.status_code == 200 and "sessions-" in answer["Content-Disposition"]
    lines = answer.content.decode().splitlines()
    assert len(lines) == Study.objects.get(pk=study.pk).sessions.count()
    path = tmp_path / "again.jsonl"
    path.write_bytes(answer.content)
    sessions_import(path=str(path), study_name="again")
    again = Study.objects.get(name="again")
    first, second = revision_report_build(study=study), revision_report_build(study=again)
    assert first["table2"] == second["table2"]
    rows = client.get(csv_url).content.decode().splitlines()
    assert len(rows) == 1 + first["turns"] and rows[0].startswith("study,")
    assert (
        client.get(reverse("revision-reports:sessions-download", args=[study.pk, "x"])).status_code
        == 404
    )
    client.force_login(UserFactory(username="ann-dl", roles=[ANNOTATOR]))
    assert client.get(jsonl_url).status_code == 403


def test_figure2_ratings_of_seven_systems_stay_readable(tmp_path, drawn_figure):
    """Seven systems (as in the KIWI paper) made 21 bars of 1.15 inches, a 24-inch figure the page
    showed in 700 pixels. Now the systems go on rows within MAX_WIDTH, every bar named, no text
    under MIN_FONT_SIZE points or on another."""
    from evaluation import figures as shared
    from evaluation.revision import figures
    from evaluation.revision.reports import revision_report_build
    from tests.evaluation.figure_layout import (
        drawn_texts,
        legends_off_the_plots,
        overlapping_texts,
        smallest_font,
    )

    report = revision_report_build(study=sample_study(tmp_path))
    systems = ["gpt-4-0613", "gpt-3.5-turbo", "claude-2.1", "llama-2-70b-chat"]
    systems += ["tulu-2-dpo-70b", "mixtral-8x7b-instruct", "yi-34b-chat"]
    model = [row for row in report["figure2_ratings"] if row["system"] == "gpt-4"]
    report["figure2_ratings"] = [{**row, "system": name} for name in systems for row in model]
    figure = drawn_figure(figures, figures.render_revision_figure, report, "ratings", "png")
    assert figure.get_figwidth() <= shared.MAX_WIDTH
    assert len(figure.axes) > 1
    assert smallest_font(figure) >= shared.MIN_FONT_SIZE
    assert overlapping_texts(figure) == []
    assert legends_off_the_plots(figure) == []
    bars = [text.get_text() for text in drawn_texts(figure) if "\n" in text.get_text()]
    assert bars == [f"{name}\n{kind}" for name in systems for kind in figures.KIND_LABEL.values()]


def test_the_report_shows_how_far_annotators_are_and_where_they_work(
    client, researcher, tmp_path, settings, django_capture_on_commit_callbacks
):
    from django.utils import timezone

    from annotate.revision.services.sessions import session_assign, session_finish
    from tests.annotate.revision.conftest import make_live_study

    study = make_live_study(tmp_path, settings)  # 2 questions with papers x alpha, beta
    ana, ben = (UserFactory(username=name, roles=[ANNOTATOR]) for name in ("ana", "ben"))
    with django_capture_on_commit_callbacks(execute=True):
        done = session_assign(study=study, user=ana, now=timezone.now())
        session_assign(study=study, user=ben, now=timezone.now())  # still in progress
    session_finish(session_id=done.pk, user=ana, now=timezone.now())
    kiwi = tmp_path / "kiwi.jsonl"
    kiwi.write_text(json.dumps({
        "original_question": "What limits long-context models?", "model_name": "alpha",
        "initial_answer": "a0", "interaction": [{"instruction": "Shorter.", "answer_1": "a1",
        "answer_2": "", "rating": "good", "comment": "ok"}],
    }) + "\n")  # fmt: skip
    sessions_import(path=str(kiwi), study_name=study.name)
    client.force_login(researcher)
    page = client.get(reverse("revision-reports:report", args=[study.pk]))
    collection = page.context["collection"]
    assert (collection.wanted, collection.finished, collection.active) == (4, 1, 1)
    html = page.content.decode()
    assert "1 of 4 sessions finished by annotators" in html
    assert "1 in progress, 2 not started." in html
    assert "2 questions × 2 systems" in html and "with the 1 imported\nsession" in html
    assert "every question\nneeds 2 different annotators" in html
    assert reverse("revision:home") in html and reverse("annotators:list") in html


def test_a_one_system_study_asks_for_one_annotator_per_question(client, researcher, tmp_path):
    from annotate.revision.services.imports import study_upload
    from tests.annotate.revision.conftest import QUESTIONS

    path = tmp_path / "study.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    study_upload(path=str(path), study_name="solo", systems=["alpha"])
    client.force_login(researcher)
    study = Study.objects.get(name="solo")
    html = client.get(reverse("revision-reports:report", args=[study.pk])).content.decode()
    assert "2 questions × 1 system." in html
    assert "every question needs one annotator" in html
    assert "different annotator" not in html  # "needs 1 different annotator" read as a riddle


def test_a_study_of_imported_sessions_only_shows_no_collection(client, researcher, tmp_path):
    study = sample_study(tmp_path)  # imported sessions: no question with papers
    client.force_login(researcher)
    html = client.get(reverse("revision-reports:report", args=[study.pk])).content.decode()
    assert 'id="collection"' not in html and "Table 2: sessions per system" in html


def test_empty_tables_say_what_fills_them(client, researcher, tmp_path, settings):
    from tests.annotate.revision.conftest import make_live_study

    study = make_live_study(tmp_path, settings)  # questions and systems, no session yet
    client.force_login(researcher)
    html = client.get(reverse("revision-reports:report", args=[study.pk])).content.decode()
    table5 = html.split('id="empty-table5">')[1].split("</p>")[0]
    assert "A rating-judge run fills it" in table5 and "re-rated turns give the Human row" in table5
    assert reverse("revision-reports:judge-new", args=[study.pk, "rating-judge"]) in table5
    assert reverse("revision:rerate", args=[study.pk]) in table5
    positions = html.split('id="t-figure2_positions"')[1].split("</section>")[0]
    assert "No data: no rated turn of a finished session yet." in positions


def test_figures_are_drawn_once_until_a_rated_turn_changes_them(
    client, researcher, tmp_path, monkeypatch
):
    """The page and the API share one drawing per state of the rated turns; a script asking
    again costs no render, and a new rated turn draws a new figure."""
    from annotate.revision.models import RevisionSession, SessionStatus, Turn
    from evaluation.revision import figures

    study = sample_study(tmp_path)
    client.force_login(researcher)
    drawn = []
    render = figures.render_revision_figure

    def counted(report, name, fmt):
        drawn.append((name, fmt))
        return render(report, name, fmt)

    page = reverse("revision-reports:figure", args=[study.pk, "ratings", "svg"])
    api = reverse("api-revision-figure", args=[study.pk, "ratings", "svg"])
    monkeypatch.setattr(figures, "render_revision_figure", counted)
    first, again = client.get(page), client.get(api)
    assert first.status_code == again.status_code == 200
    assert again.content == first.content and drawn == [("ratings", "svg")]
    session = RevisionSession.objects.get(
        study=study, status=SessionStatus.FINISHED, system__name="llama"
    )
    Turn.objects.create(
        session=session, position=4, instruction="One more.",
        instruction_type="stylistic", rating="good",
    )  # fmt: skip
    redrawn = client.get(page)
    assert redrawn.status_code == 200 and redrawn.content != first.content
    assert drawn == [("ratings", "svg"), ("ratings", "svg")]


def test_the_sessions_download_counts_with_the_exports(client, researcher, tmp_path, worker_rates):
    worker_rates(exports="2/hour")
    study = sample_study(tmp_path)
    client.force_login(researcher)
    urls = [
        reverse("revision-reports:sessions-download", args=[study.pk, fmt])
        for fmt in ("jsonl", "csv")
    ]
    assert [client.get(url).status_code for url in urls] == [200, 200]
    refused = client.get(urls[0])
    assert refused.status_code == 429 and refused["Retry-After"] == "3600"
    html = refused.content.decode()
    assert "Too many report exports and label downloads from your account (at most 2/hour)" in html
    assert reverse("revision-reports:report", args=[study.pk]) in html


def test_the_report_page_rounds_as_its_markdown_and_latex_do(client, researcher, tmp_path):
    """The page showed 32.0 % and 3.506 turns per session where the Markdown and LaTeX tables
    (the paper's, which researchers copy) read 32 and 3.51; JSON and CSV keep every digit."""
    from evaluation.revision.formats import revision_csv, revision_latex, revision_markdown
    from evaluation.revision.reports import revision_report_build

    study = sample_study(tmp_path)
    client.force_login(researcher)
    tables = client.get(reverse("revision-reports:report", args=[study.pk])).context["tables"]
    report = revision_report_build(study=study)
    markdown, latex = revision_markdown(report), revision_latex(report)
    for table in tables[:2]:
        for row in table["rows"]:
            cells = [cell["text"] for cell in row]
            assert "| " + " | ".join(cells) + " |" in markdown, cells
            assert " & ".join(cells) + " \\\\" in latex, cells
    assert ",0.6666" in revision_csv(report)


def _imported_sessions(tmp_path, count: int, name: str) -> Study:
    """A study of `count` imported sessions of one system, each on its own question."""
    path = tmp_path / f"{name}.jsonl"
    sessions = [
        {
            "original_question": f"Q{n}?",
            "model_name": "gpt-4",
            "initial_answer": f"a{n}",
            "interaction": [turn(f"Shorten {n}.", "stylistic", "good")],
        }
        for n in range(count)
    ]
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions))
    sessions_import(path=str(path), study_name=name)
    return Study.objects.get(name=name)


def test_the_report_lists_sessions_fifty_a_page_in_as_many_queries_for_any_study(
    client, researcher, tmp_path
):
    """The Sessions list rendered every session of the study, a page growing without end: it
    shows the 50 most recent, the rest a page further (the whole list is the download), and
    the page's queries do not grow with the sessions."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    small, large = (
        _imported_sessions(tmp_path, 3, "small"),
        _imported_sessions(tmp_path, 60, "large"),
    )
    client.force_login(researcher)
    queries = {}
    for study in (small, large):
        url = reverse("revision-reports:report", args=[study.pk])
        client.get(url)  # figures and caches warmed
        with CaptureQueriesContext(connection) as captured:
            page = client.get(url).content.decode()
        queries[study.name] = len(captured)

    assert queries["small"] == queries["large"]
    rows = page.split('id="table-sessions"')[1].split("</table>")[0]
    newest = large.sessions.order_by("-id")
    assert rows.count('id="read-') == 50 and f'id="read-{newest[0].pk}"' in rows
    assert f'id="read-{newest[50].pk}"' not in rows
    assert "Every session of the study (60)" in page and "?sessions_page=2#sessions" in page
    second = client.get(url, {"sessions_page": 2}).content.decode()
    rows = second.split('id="table-sessions"')[1].split("</table>")[0]
    assert rows.count('id="read-') == 10 and f'id="read-{newest[59].pk}"' in rows


def test_figure2_has_a_section_of_its_own_after_table5(client, researcher, tmp_path):
    """The figures followed Table 5's notes with no heading, so they read as part of Table 5."""
    study = sample_study(tmp_path)
    client.force_login(researcher)
    html = client.get(reverse("revision-reports:report", args=[study.pk])).content.decode()
    table5 = html.split('id="t-table5"')[1].split("</section>")[0]
    assert "<figure" not in table5
    figures = html.split('<h2 id="t-figures">')[1].split("</section>")[0]
    assert 'id="figure-ratings"' in figures and 'id="figure-positions"' in figures
