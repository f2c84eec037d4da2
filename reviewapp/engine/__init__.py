"""The verdict engine: pure Python, the standard library plus msgspec.

Frozen records in, verdicts out. msgspec decodes lines and checks records (records.py);
it does no I/O. Nothing here imports Django, any other third-party package, any other part
of reviewapp, or does I/O; tests/engine/test_purity.py fails the build if it does.
Everything else in Crosscheck is plumbing around this oracle.
"""

from .findings import Finding
from .judge import RunJudgement, Verdict, judge_run, judge_runs, partial_result_errors
from .normalize import Normalizer, canonical
from .policy import Policy, PolicyError, load_policy
from .records import (
    ABSENT,
    UTF8_BOM,
    AgentAction,
    Observation,
    ObservationError,
    Record,
    RecordError,
    Resolution,
    RunPositions,
    RunStarted,
    ToolCall,
    decode_line,
    line_payload,
    parse_line,
    parse_record,
    seq_taken_reason,
)

__all__ = [
    "ABSENT",
    "UTF8_BOM",
    "AgentAction",
    "Finding",
    "Normalizer",
    "Observation",
    "ObservationError",
    "Policy",
    "PolicyError",
    "Record",
    "RecordError",
    "Resolution",
    "RunJudgement",
    "RunPositions",
    "RunStarted",
    "ToolCall",
    "Verdict",
    "canonical",
    "line_payload",
    "decode_line",
    "judge_run",
    "judge_runs",
    "load_policy",
    "parse_line",
    "parse_record",
    "partial_result_errors",
    "seq_taken_reason",
]
