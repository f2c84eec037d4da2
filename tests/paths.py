"""Where tests find the project and their fixtures."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SPEC = FIXTURES / "spec"
OTEL = FIXTURES / "otel"
