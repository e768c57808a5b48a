"""Template tags of the annotator's task page.

The page asks responses x questions (75 for InFoBench's 5 x 15) answers of three radio buttons
each. Rendered by the template language, that loop was most of the CPU time of a task page
view. Here each question is one `str.format` of a constant HTML template with every text
escaped once beforehand (`html.escape`, which is what Django's `escape` does; numbers need
none), then the lot is joined: the same markup as format_html_join gave, for a third of its CPU
(format_html escapes each of the 8 values of each question through Django's lazy-aware
wrappers). The responses around them (their texts, score fieldsets and rubric choices) are
made the same way, in one tag for the page.
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


def _question_items(response: ResponseItem, disabled: str, texts: dict[str, str]) -> str:
    """Return the <li> of every decomposed question about one response, answers checked.

    `texts` keeps each question's escaped text for the next responses (they ask the same).
    """
    label = escape(str(response.label))
    fill = _QUESTION_ITEM.format
    parts = []
    for question in response.questions:
        yes, no, unknown = _CHECKS.get(question.value, _NONE)
        text = texts.get(question.text)
        if text is None:
            text = texts[question.text] = escape(str(question.text))
        parts.append(
            fill(
                name=escape(str(question.name)),
                label=label,
                position=int(question.position),
                text=text,
                disabled=disabled,
                yes=yes,
                no=no,
                unknown=unknown,
            )
        )
    return "".join(parts)


# One response of the page, with its score fieldset or its question list. The loop over the
# responses (and over the rubric's five scores for each) in the template language came to some
# hundred template nodes per page; this is the markup those nodes gave, byte for byte.
_SECTION = (
    "\n"
    '  <section class="response" aria-labelledby="r{position}-title">\n'
    '    <h2 id="r{position}-title">{label}</h2>\n'
    '    <pre class="text response-text">{text}</pre>\n'
    "    {score}\n"
    "    {questions}\n"
    "  </section>\n"
    "  "
)
_SCORE_FIELDSET = (
    "\n"
    '    <fieldset class="answer score" id="f-{name}" data-title="{label}: direct score">\n'
    "      <legend>Direct score for {label}</legend>\n"
    "      {choices}\n"
    "    </fieldset>\n"
    "    "
)
_SCORE_CHOICE = (
    "\n"
    '      <label class="choice"><input type="radio" name="{name}" value="{score}"{checked}'
    '{disabled}> {score} <span class="tags">{title}</span></label>\n'
    "      "
)
_SCORE_GIVEN = '\n    <p class="tags">Your direct score: {score} / 5</p>\n    '
_QUESTION_LIST = '\n    <ol class="questions">\n      {items}\n    </ol>\n    '


@register.simple_tag
def response_sections(page) -> SafeString:
    """Return the <section> of every response of a task page (a TaskPage), in its order."""
    disabled = "" if page.is_open else " disabled"
    asks_scores, asks_questions = page.asks_scores, page.asks_questions
    rubric = [(str(score), escape(str(text[0]))) for score, text in page.rubric.items()]
    texts: dict[str, str] = {}
    parts = []
    for response in page.responses:
        label = escape(str(response.label))
        score = ""
        if asks_scores:
            name = escape(str(response.score_name))
            given = response.score
            choices = "".join(
                _SCORE_CHOICE.format(
                    name=name,
                    score=value,
                    checked=_CHECKED if given == value else "",
                    disabled=disabled,
                    title=title,
                )
                for value, title in rubric
            )
            score = _SCORE_FIELDSET.format(name=name, label=label, choices=choices)
        elif response.score:
            score = _SCORE_GIVEN.format(score=escape(str(response.score)))
        questions = ""
        if asks_questions:
            questions = _QUESTION_LIST.format(items=_question_items(response, disabled, texts))
        parts.append(
            _SECTION.format(
                position=int(response.position),
                label=label,
                text=escape(str(response.text)),
                score=score,
                questions=questions,
            )
        )
    return SafeString("".join(parts))
