"""The templates stay readable: no line over 120 characters, no template is a copy of
another (a fragment that two pages need is included by both, not copied), and no comment
is shown to the reader (Django's {# #} ends on its own line)."""

from collections import defaultdict
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
MAX_LINE = 120


def template_files(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file())


def long_lines(root: Path) -> list[str]:
    """ "file:line: N characters" for each line of a template under `root` over MAX_LINE."""
    found = []
    for path in template_files(root):
        lines = path.read_text(encoding="utf-8").split("\n")
        for number, line in enumerate(lines, start=1):
            length = len(line.removesuffix("\r"))
            if length > MAX_LINE:
                found.append(f"{path.relative_to(root)}:{number}: {length} characters")
    return found


def identical_templates(root: Path) -> list[list[str]]:
    """Each group of templates under `root` that are the same bytes."""
    by_content: dict[bytes, list[str]] = defaultdict(list)
    for path in template_files(root):
        by_content[path.read_bytes()].append(str(path.relative_to(root)))
    return [names for names in by_content.values() if len(names) > 1]


def test_no_template_line_is_over_120_characters():
    assert template_files(TEMPLATES), f"no template found under {TEMPLATES}"
    found = long_lines(TEMPLATES)
    assert not found, f"template lines over {MAX_LINE} characters:\n" + "\n".join(found)


def test_no_two_templates_are_the_same():
    copies = identical_templates(TEMPLATES)
    assert not copies, "identical templates (include one instead):\n" + "\n".join(
        " = ".join(names) for names in copies
    )


def test_the_checks_find_long_lines_and_copies(tmp_path):
    (tmp_path / "review").mkdir()
    fragment = "{% if page %}\n<nav>…</nav>\n{% endif %}\n"
    (tmp_path / "_fragment.html").write_text(fragment, encoding="utf-8")
    (tmp_path / "review" / "_fragment.html").write_text(fragment, encoding="utf-8")
    (tmp_path / "page.html").write_text(
        "x" * MAX_LINE + "\n" + "é" * MAX_LINE + "\r\n" + "<p>" + "y" * MAX_LINE + "</p>\n",
        encoding="utf-8",
    )
    assert long_lines(tmp_path) == [f"page.html:3: {MAX_LINE + 7} characters"]
    assert identical_templates(tmp_path) == [["_fragment.html", "review/_fragment.html"]]


def unclosed_comments(root: Path) -> list[str]:
    """ "file:line" of each {# whose #} is not on the same line: Django prints it as text."""
    found = []
    for path in template_files(root):
        for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
            opened = line.rfind("{#")
            if opened != -1 and "#}" not in line[opened:]:
                found.append(f"{path.relative_to(root)}:{number}")
    return found


def test_no_comment_runs_over_a_line_break(tmp_path):
    (tmp_path / "shown.html").write_text("{# a comment\n   over two lines #}\n")
    assert unclosed_comments(tmp_path) == ["shown.html:1"]
    found = unclosed_comments(TEMPLATES)
    assert not found, "{# #} over several lines (use {% comment %}):\n" + "\n".join(found)
