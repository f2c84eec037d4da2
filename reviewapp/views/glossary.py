"""The glossary (docs/glossary.md) as a page, for the pages that link a word they keep.

The file is the one source: `## Term` headings and plain paragraphs, `code` in backticks
and *emphasis* in stars. Everything in it is escaped; nothing else of Markdown is read."""

from __future__ import annotations

import re
from functools import cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import slugify
from django.views.decorators.http import require_GET

GLOSSARY_FILE = settings.BASE_DIR / "docs" / "glossary.md"


def _inline(text: str) -> SafeString:
    """One paragraph's text, escaped, with its `code` and *emphasis* marked up."""
    html = re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text)))
    return mark_safe(re.sub(r"\*([^*]+)\*", r"<em>\1</em>", html))  # noqa: S308 (escaped above)


def term_anchor(term: str) -> str:
    """The fragment a page links to: the term's first words, before any parenthesis."""
    return slugify(term.split("(", 1)[0])


@cache
def glossary_entries(text: str) -> tuple[list[SafeString], list[dict]]:
    """The introduction's paragraphs and the entries (term, anchor, paragraphs) of the file."""
    intro: list[SafeString] = []
    entries: list[dict] = []
    for block in re.split(r"\n\s*\n", text):
        block = " ".join(line.strip() for line in block.strip().splitlines())
        if not block or block.startswith("# "):
            continue
        if block.startswith("## "):
            term = block[3:].strip()
            entries.append({"term": term, "anchor": term_anchor(term), "paragraphs": []})
        elif entries:
            entries[-1]["paragraphs"].append(_inline(block))
        else:
            intro.append(_inline(block))
    return intro, entries


@require_GET
def glossary(request: HttpRequest) -> HttpResponse:
    intro, entries = glossary_entries(GLOSSARY_FILE.read_text(encoding="utf-8"))
    return render(request, "glossary.html", {"intro": intro, "entries": entries})
