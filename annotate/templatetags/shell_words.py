"""Template filters for the shell commands the pages print to be copied."""

from __future__ import annotations

import shlex

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString

register = template.Library()

# Characters a POSIX shell still reads inside double quotes (`!`: bash's history expansion).
_LIVE_IN_DOUBLE_QUOTES = frozenset('"$`\\!')


@register.filter
def shell_arg(value) -> SafeString:
    """Quote a value as one shell word that a copied command passes on unchanged.

    Double quotes while the value has nothing a shell reads in them (`"my set"`), single quotes
    otherwise: a name with a quote or a `$` in double quotes broke the command or changed the name.
    Escaped for the page, the quotes themselves left as they are.
    """
    text = str(value)
    if _LIVE_IN_DOUBLE_QUOTES.isdisjoint(text):
        return format_html('"{}"', text)
    return escape(shlex.quote(text))
