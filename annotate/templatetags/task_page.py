"""Template tags of the annotator's task page.

The page asks responses x questions (75 for InFoBench's 5 x 15) answers of three radio buttons
each. Rendered by the template language, that loop was most of the CPU time of a task page
view; written here with one format_html per question, every value escaped, it costs a tenth.
The markup is the one the page's script (static/annotate/task.js) and tests rely on.
"""

from __future__ import annotations

from django import template
from django.utils.html import format_html_join
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
_CHECKED = SafeString(" checked")
_DISABLED = SafeString(" disabled")
_NOTHING = SafeString("")


@register.simple_tag
def question_items(response: ResponseItem, *, is_open: bool) -> SafeString:
    """Return the <li> of every decomposed question about one response, answers checked."""
    disabled = _NOTHING if is_open else _DISABLED
    return format_html_join(
        "",
        _QUESTION_ITEM,
        (
            {
                "name": question.name,
                "label": response.label,
                "position": question.position,
                "text": question.text,
                "disabled": disabled,
                "yes": _CHECKED if question.value == "yes" else _NOTHING,
                "no": _CHECKED if question.value == "no" else _NOTHING,
                "unknown": _CHECKED if question.value == "unknown" else _NOTHING,
            }
            for question in response.questions
        ),
    )
