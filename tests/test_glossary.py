"""The glossary (docs/glossary.md at /glossary/): every entry a page links exists, and the
file's text is escaped on the page."""

import re

import pytest
from django.urls import reverse

from reviewapp.views.glossary import GLOSSARY_FILE, glossary_entries
from tests.paths import ROOT

TEMPLATES = ROOT / "templates"


def linked_anchors() -> set[str]:
    found = set()
    for template in TEMPLATES.rglob("*.html"):
        text = template.read_text(encoding="utf-8")
        found |= set(re.findall(r"""_glossary_link\.html" with anchor="([^"]+)\"""", text))
        found |= set(re.findall(r"""{% url 'glossary' %}#([\w-]+)""", text))
    return found


def test_every_entry_a_page_links_is_in_the_glossary():
    _, entries = glossary_entries(GLOSSARY_FILE.read_text(encoding="utf-8"))
    anchors = {entry["anchor"] for entry in entries}
    linked = linked_anchors()
    assert {"what-if", "fixture-set"} <= linked
    assert linked - anchors == set()


def test_the_glossary_escapes_its_text_and_marks_up_code():
    intro, entries = glossary_entries("# G\n\nIntro `a<b>`.\n\n## One (two)\n\n*x* <script>\n")
    assert intro == ["Intro <code>a&lt;b&gt;</code>."]
    assert entries == [
        {"term": "One (two)", "anchor": "one", "paragraphs": ["<em>x</em> &lt;script&gt;"]}
    ]


@pytest.mark.django_db
def test_the_glossary_page_shows_every_entry_to_a_signed_in_person(client, viewer):
    assert client.get(reverse("glossary")).status_code == 302
    client.force_login(viewer)
    page = client.get(reverse("glossary")).content.decode()
    assert '<dt id="what-if">What-if (would settle, would block)</dt>' in page
    assert '<dt id="fixture-set">Fixture set</dt>' in page
