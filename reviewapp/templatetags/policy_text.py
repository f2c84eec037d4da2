"""Rule sentences are written with `backticks` around field, source and action names:
shown on a page, those are code, not literal backticks."""

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

_CODE = re.compile(r"`([^`]+)`")


@register.filter
def code_spans(text: object) -> SafeString:
    """The text escaped, each `quoted` part as <code>."""
    escaped = escape(str(text))
    return mark_safe(_CODE.sub(r"<code>\1</code>", escaped))
