"""The methods documentation (docs/*.md) as pages of the site: how each number is computed,
file formats, conventions. A researcher using a deployed app has no checkout to read them in.

Rendered with markdown-it-py (CommonMark and tables) with raw HTML off: any HTML written in a
document is shown as text. Headings get ids (so a page can link to a section), and text or a
code span naming another of these documents (docs/engine.md) links to its page. Each file is rendered
once per process and again when it changes on disk.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe
from markdown_it import MarkdownIt
from markdown_it.token import Token

from annotate.errors import NotFoundError


@dataclass(frozen=True)
class HelpPage:
    slug: str
    title: str
    file: str  # under docs/


# The documents written for the people using the app (the others are for its developers).
HELP_PAGES = (
    HelpPage("reports", "InFoBench reports: how each number is computed", "reports.md"),
    HelpPage("report-exports", "Report exports and their files", "report-exports.md"),
    HelpPage("revision", "Revision sessions (KIWI): studies, files and tables", "revision.md"),
    HelpPage(
        "verbalizer", "Verbalizer manipulation: datasets, prompts and accuracy", "verbalizer.md"
    ),
    HelpPage("crowd", "Crowd platforms: publishing, what counts, review and pay", "crowd.md"),
    HelpPage("engine", "The model engine: endpoints, runs, retries and cost", "engine.md"),
)
_BY_SLUG = {page.slug: page for page in HELP_PAGES}
_BY_FILE = {f"docs/{page.file}": page for page in HELP_PAGES}
_NOT_WORD = re.compile(r"[^\w\s-]")


def docs_dir() -> Path:
    return Path(settings.BASE_DIR) / "docs"


def help_page_get(slug: str) -> HelpPage:
    try:
        return _BY_SLUG[slug]
    except KeyError:
        raise NotFoundError(f"No help page '{slug}'.") from None


def heading_id(text: str) -> str:
    """A heading's id: lower case, punctuation dropped, spaces as hyphens ("Table 4" -> table-4)."""
    return "-".join(_NOT_WORD.sub("", text.lower()).split()) or "section"


_DOC_NAME = re.compile(r"docs/[a-z-]+\.md")


def _doc_link(match: re.Match) -> str:
    page = _BY_FILE.get(match.group(0))
    if page is None:
        return match.group(0)
    return f'<a href="{reverse("help-page", args=[page.slug])}">{match.group(0)}</a>'


def _renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("table")

    def heading_open(renderer, tokens, idx, options, env):
        inline = tokens[idx + 1]
        base = heading_id(inline.content)
        seen = env.setdefault("ids", {})
        seen[base] = seen.get(base, 0) + 1
        tokens[idx].attrSet("id", base if seen[base] == 1 else f"{base}-{seen[base]}")
        return renderer.renderToken(tokens, idx, options, env)

    def code_inline(renderer, tokens, idx, options, env):
        content = tokens[idx].content
        code = f"<code>{escape(content)}</code>"
        page = _BY_FILE.get(content)
        if page is None:
            return code
        return f'<a href="{reverse("help-page", args=[page.slug])}">{code}</a>'

    def text(renderer, tokens, idx, options, env):
        return _DOC_NAME.sub(_doc_link, escape(tokens[idx].content))

    md.add_render_rule("heading_open", heading_open)
    md.add_render_rule("text", text)
    md.add_render_rule("code_inline", code_inline)
    return md


_WORDS = ("text", "code_inline")


def _heading_text(inline: Token) -> str:
    """A heading's words as a reader sees them: its text and code spans, without the Markdown
    around them (the backticks of `parsing.py`, the stars of *emphasis*)."""
    words = (child.content for child in inline.children or () if child.type in _WORDS)
    return "".join(words) or inline.content


@functools.lru_cache(maxsize=len(HELP_PAGES))
def _rendered(path: Path, mtime_ns: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    text = path.read_text(encoding="utf-8")
    md = _renderer()
    env: dict = {}
    tokens = md.parse(text, env)
    # Our own documents, rendered with raw HTML off: every "<" they hold is escaped.
    html = mark_safe(md.renderer.render(tokens, md.options, env))  # noqa: S308
    sections = tuple(
        (tokens[i].attrGet("id"), _heading_text(tokens[i + 1]))
        for i, token in enumerate(tokens)
        if token.type == "heading_open" and token.tag == "h2"
    )
    return html, sections


def help_page_html(page: HelpPage) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The page's HTML (raw HTML of the document escaped) and its sections (id, title)."""
    path = docs_dir() / page.file
    try:
        mtime = path.stat().st_mtime_ns
    except FileNotFoundError:
        raise NotFoundError(f"The help page '{page.slug}' is missing from this install.") from None
    return _rendered(path, mtime)
