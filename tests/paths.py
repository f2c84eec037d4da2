"""Where tests find the project and their fixtures."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SPEC = FIXTURES / "spec"
OTEL = FIXTURES / "otel"
# Real exports from public repositories, read where they lie (never copied in here): their
# README gives each file's origin and the tool calls it holds.
EXTERNAL = ROOT.parent / "shared" / "fixtures" / "external"
