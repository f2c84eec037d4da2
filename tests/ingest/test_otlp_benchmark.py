"""benchmarks/otlp.py runs on its own and says what it measured (no timing is asserted:
speed is the benchmark's to report, not a test's)."""

import json
import os
import subprocess
import sys

from tests.paths import ROOT


def test_the_otlp_benchmark_stores_every_call_both_ways_and_ends_with_its_figures():
    result = subprocess.run(
        [sys.executable, "benchmarks/otlp.py", "--n", "1100"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": os.environ["MIGRATE_DATABASE_URL"]},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    # 220 traces of five spans in three requests of up to 512 spans; two tool calls a trace.
    assert (figures["requests"], figures["tool_calls"]) == (3, 440)
    assert figures["stored"] == {"batches": 3, "tool_observations": 440, "tickets": 55}
    assert figures["goal"] == 0.5
    assert figures["ratio"] > 0 and figures["met"] == (figures["ratio"] >= 0.5)
    assert figures["native_one_file_calls_per_s"] > 0
