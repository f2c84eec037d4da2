"""Rule sentences are written with `backticks` around field, source and action names:
shown on a page, those are code, not literal backticks."""

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from reviewapp.models import policy_name as _policy_name

register = template.Library()

_CODE = re.compile(r"`([^`]+)`")


@register.filter
def code_spans(text: object) -> SafeString:
    """The text escaped, each `quoted` part as <code>."""
    escaped = escape(str(text))
    return mark_safe(_CODE.sub(r"<code>\1</code>", escaped))


@register.filter
def policy_name(policy: object) -> str:
    """The one name of a version (its number; 0 the built-in default) or candidate
    (reviewapp.models.policy_name)."""
    if isinstance(policy, str) and policy.isdecimal():  # a number from a query string
        policy = int(policy)
    return _policy_name(policy)  # type: ignore[arg-type]
