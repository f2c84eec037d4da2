"""A long path is told by its end: the file's own name, not the folders it lies under."""

from django import template

register = template.Library()


@register.filter
def last_chars(text: object, length: int) -> str:
    """At most `length` characters: the text's last ones after an ellipsis when it is longer."""
    text = str(text)
    return text if len(text) <= length else "…" + text[-(length - 1) :]
