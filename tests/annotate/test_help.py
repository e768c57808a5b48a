"""The methods documentation as pages of the site (annotate/help.py)."""

import pytest
from django.urls import reverse

from annotate import help as help_pages

pytestmark = pytest.mark.django_db


def test_every_help_page_shows_its_document_with_linked_sections(client, researcher):
    client.force_login(researcher)
    index = client.get(reverse("help")).text
    for page in help_pages.HELP_PAGES:
        url = reverse("help-page", args=[page.slug])
        assert url in index
        answer = client.get(url)
        assert answer.status_code == 200
        first = next(
            line[3:].strip()
            for line in (help_pages.docs_dir() / page.file).read_text().splitlines()
            if line.startswith("## ")
        )
        section = help_pages.heading_id(first)
        # The document's first section is there, with an id the page's own list links to.
        assert f'<h2 id="{section}">' in answer.text
        assert f'href="#{section}"' in answer.text


def test_a_document_naming_another_links_to_its_page(client, researcher):
    client.force_login(researcher)
    text = client.get(reverse("help-page", args=["revision"])).text
    assert "the engine (docs/engine.md)" in (help_pages.docs_dir() / "revision.md").read_text()
    link = reverse("help-page", args=["engine"])
    assert f'the engine (<a href="{link}">docs/engine.md</a>)' in text


def test_html_written_in_a_document_is_shown_as_text(client, researcher, settings, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "reports.md").write_text(
        "# Reports\n\n## A <b>bold</b> claim\n\n<script>alert(1)</script>\n\n`<img src=x>`\n\n"
        "See `docs/engine.md`, and docs/deploy.md for operators.\n"
    )
    settings.BASE_DIR = tmp_path
    client.force_login(researcher)
    text = client.get(reverse("help-page", args=["reports"])).text
    assert (
        "<script>alert(1)</script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    )
    assert "<b>bold</b>" not in text and "<img src=x>" not in text
    assert '<h2 id="a-bbold-b-claim">' not in text  # the id drops the markup's punctuation
    assert '<h2 id="a-bboldb-claim">' in text
    # A code span naming a help page's document links to it; another document stays text.
    link = reverse("help-page", args=["engine"])
    assert f'<a href="{link}"><code>docs/engine.md</code></a>' in text
    assert "and docs/deploy.md for operators" in text


def test_the_list_of_sections_shows_headings_without_their_markdown(
    client, researcher, settings, tmp_path
):
    """The list "On this page" showed a heading as written in the file, backticks and stars
    included ("Parsing (`evaluation/verbalizer/parsing.py`)"), while the heading showed code."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "verbalizer.md").write_text(
        "# Verbalizer\n\n## Parsing (`parsing.py`)\n\nText.\n\n## Numbers, *roughly*\n\nMore.\n"
    )
    settings.BASE_DIR = tmp_path
    client.force_login(researcher)
    text = client.get(reverse("help-page", args=["verbalizer"])).text
    assert '<li><a href="#parsing-parsingpy">Parsing (parsing.py)</a></li>' in text
    assert '<li><a href="#numbers-roughly">Numbers, roughly</a></li>' in text
    assert "`" not in text.split('class="help-sections"')[1].split("</nav>")[0]


def test_help_pages_need_a_login_and_an_unknown_one_is_a_404(client, annotator_user):
    assert client.get(reverse("help-page", args=["reports"])).status_code == 302
    client.force_login(annotator_user)
    assert client.get(reverse("help-page", args=["reports"])).status_code == 200
    assert client.get(reverse("help-page", args=["deploy"])).status_code == 404


def test_the_reports_list_links_to_how_its_numbers_are_computed(client, researcher):
    client.force_login(researcher)
    text = client.get(reverse("reports:list")).text
    assert reverse("help-page", args=["reports"]) in text
    assert "docs/reports.md" not in text
