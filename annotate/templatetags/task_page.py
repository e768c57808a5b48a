"""Template tags of the annotator's task page.

The page asks responses x questions (75 for InFoBench's 5 x 15) answers of three radio buttons
each. Rendered by the template language, that loop was most of the CPU time of a task page
view. Here each question is one `str.format` of a constant HTML template with every value
escaped once beforehand (`html.escape`, which is what Django's `escape` does), then the lot is
joined: the same markup as format_html_join gave, for a third of its CPU (format_html escapes
each of the 8 values of each question through Django's lazy-aware wrappers).
The markup is the one the page's script (static/annotate/task.js) and tests rely on.
"""

from __future__ import annotations

from html import escape

from django import template
from django.utils.safestring import SafeString

from annotate.selectors.work import ResponseItem

register = template.Library()

_CHOICE = (
    '          <label class="choice"><input type="radio" name="{name}" value="%s"{%s}{disabled}>'
    " %s</label>\n"
)
# One format string per question: the fieldset and its YES / NO / UNKNOWN radio buttons.
_QUESTION_ITEM = (
    "      <li>\n"
    '        <fieldset class="answer question" id="f-{name}" '
    'data-title="{label}, question {position}">\n'
    "          <legend>{text}</legend>\n"
    + _CHOICE % ("yes", "yes", "YES")
    + _CHOICE % ("no", "no", "NO")
    + _CHOICE % ("unknown", "unknown", "UNKNOWN")
    + "        </fieldset>\n"
    "      </li>\n"
)
_CHECKED = " checked"
# The three "checked" slots for each stored answer; anything else checks nothing.
_CHECKS = {
    "yes": (_CHECKED, "", ""),
    "no": ("", _CHECKED, ""),
    "unknown": ("", "", _CHECKED),
}
_NONE = ("", "", "")


@register.simple_tag
def question_items(response: ResponseItem, *, is_open: bool) -> SafeString:
    """Return the <li> of every decomposed question about one response, answers checked."""
    disabled = "" if is_open else " disabled"
    label = escape(str(response.label))
    fill = _QUESTION_ITEM.format
    parts = []
    for question in response.questions:
        yes, no, unknown = _CHECKS.get(question.value, _NONE)
        parts.append(
            fill(
                name=escape(str(question.name)),
                label=label,
                position=escape(str(question.position)),
                text=escape(str(question.text)),
                disabled=disabled,
                yes=yes,
                no=no,
                unknown=unknown,
            )
        )
    return SafeString("".join(parts))
