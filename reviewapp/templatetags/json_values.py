"""Values from traces and verdicts (any JSON) as a page shows them: as JSON, never as Python
writes a dict or a list ({'code': ...}), and escaped like every trace value."""

import json
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()


@register.filter
def json_text(value: Any) -> str:
    """A value on one line: a string as itself, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def json_block(value: Any) -> SafeString:
    """A value shown whole: an object or a list pretty-printed in <pre class="json">, anything
    else on one line in <code> (json_text); escaped."""
    if isinstance(value, dict | list):
        pretty = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
        return format_html('<pre class="json">{}</pre>', pretty)
    return format_html("<code>{}</code>", json_text(value))
