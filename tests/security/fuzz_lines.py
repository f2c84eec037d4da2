"""atheris harness for the line parser: `python tests/security/fuzz_lines.py -atheris_runs=N`.
Any exception but a RecordError (a line refused with its reason) is a finding."""

import io
import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django  # noqa: E402

django.setup()

# Coverage is followed in the app's own code (the standard library's json is C anyway).
with atheris.instrument_imports(include=["reviewapp"]):
    from reviewapp.engine import RecordError
    from reviewapp.ingest.files import iter_raw_lines
    from reviewapp.ingest.formats import decode_unit


def one_input(data: bytes) -> None:
    for raw_line in iter_raw_lines(io.BytesIO(data), "fuzz"):
        if raw_line.error is not None:
            assert raw_line.error
            continue
        try:
            decode_unit(raw_line.payload)
        except RecordError as exc:
            assert str(exc)


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
