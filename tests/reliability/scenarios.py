"""Fault scenarios against a live stack (stack.py), shared by the tests (test_faults.py) and
benchmarks/faults.py, which prints their figures. Each posts a trace through the API, does
its harm mid-batch, lifts it, and measures: lines expected, stored and duplicated, and the
seconds from the harm's end until every line was stored (recovery). They read the database
directly (psycopg), so that they work on the test database and on a PostgreSQL of their own."""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from typing import Any

import psycopg

from tests.reliability.stack import Stack, wait_for

RUNS = 6000  # 30,000 lines: several seconds of work, long enough to be hit mid-way


@dataclass
class Outcome:
    scenario: str
    expected: int
    stored: int
    duplicated: int
    recovery_seconds: float
    state: str
    attempts: int

    @property
    def lost(self) -> int:
        return self.expected - self.stored

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "lost": self.lost}


def trace_body(runs: int, prefix: str = "run") -> bytes:
    lines = []
    for number in range(runs):
        run = f"{prefix}-{number}"
        lines.append({"runId": run, "type": "run_started", "agent": "bulk-agent", "subject": {}})
        for index, (source, status) in enumerate(
            (("ledger", "paid"), ("refunds", "refunded" if number % 3 else "paid"))
        ):
            call = f"{run}-c{index}"
            lines.append(
                {
                    "runId": run,
                    "type": "tool_call",
                    "toolCallId": call,
                    "tool": "lookup",
                    "arguments": {"orderId": run},
                }
            )
            lines.append(
                {
                    "runId": run,
                    "type": "tool_observation",
                    "observationId": f"{run}-o{index}",
                    "toolCallId": call,
                    "source": source,
                    "entity": f"order:{run}",
                    "data": {"status": status},
                    "sourceRevision": index + 1,
                    "revisionDomain": source,
                }
            )
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def post(stack: Stack, body: bytes, token: str) -> str:
    response = stack.request(
        "/api/v1/traces",
        data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"},
    )
    assert response.status == 202, response.status
    return json.loads(response.read())["id"]


def _query(stack: Stack, sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    try:
        with psycopg.connect(stack.database_url, connect_timeout=3) as db:
            return db.execute(sql, params).fetchone()
    except psycopg.OperationalError:
        return None  # the server is down: ask again later


def batch_row(stack: Stack, public_id: str) -> dict[str, Any] | None:
    row = _query(
        stack,
        "SELECT state, bytes_done, lines, accepted, duplicates, rejected, attempts "
        "FROM reviewapp_ingestbatch WHERE public_id = %s",
        [public_id],
    )
    if row is None:
        return None
    names = ("state", "bytes_done", "lines", "accepted", "duplicates", "rejected", "attempts")
    return dict(zip(names, row, strict=True))


def started(stack: Stack, public_id: str) -> bool:
    row = batch_row(stack, public_id)
    return bool(row and row["bytes_done"] > 0 and row["state"] == "running")


def finished(stack: Stack, public_id: str, states=("done",)) -> dict[str, Any] | None:
    row = batch_row(stack, public_id)
    return row if row and row["state"] in states else None


def outcome(
    stack: Stack,
    scenario: str,
    public_id: str,
    expected: int,
    since: float,
    timeout: float = 120,
    token: str | None = None,
) -> Outcome:
    """Wait for the batch hit by the fault; with `token`, recovered means also that a new
    batch, sent through the broker after the fault, was stored."""
    row = wait_for(lambda: finished(stack, public_id), timeout, f"{scenario}: the batch to finish")
    if token is not None:
        after = post(stack, trace_body(2, f"after-{public_id[:8]}"), token)
        wait_for(lambda: finished(stack, after), timeout, f"{scenario}: a batch sent after it")
    recovery = time.monotonic() - since
    stored_rows, distinct = _query(
        stack,
        "SELECT count(*), count(DISTINCT line_number) FROM reviewapp_traceline l "
        "JOIN reviewapp_ingestbatch b ON b.id = l.batch_id WHERE b.public_id = %s",
        [public_id],
    )
    return Outcome(
        scenario=scenario,
        expected=expected,
        stored=distinct,
        duplicated=stored_rows - distinct + row["duplicates"],
        recovery_seconds=round(recovery, 1),
        state=row["state"],
        attempts=row["attempts"],
    )


def _begin(stack: Stack, token: str, prefix: str, runs: int = RUNS) -> tuple[str, int]:
    body = trace_body(runs, prefix)
    public_id = post(stack, body, token)
    wait_for(lambda: started(stack, public_id), 90, "the worker to start on the batch")
    return public_id, body.count(b"\n")


def pool_process_killed(stack: Stack, token: str, prefix: str = "pool") -> Outcome:
    """SIGKILL of the pool process running the batch: the worker makes a new one, the broker
    gives the task again (acks late, rejected on worker lost), it resumes."""
    public_id, lines = _begin(stack, token, prefix)
    pool = stack.pool()
    assert pool, "no pool process"
    for pid in pool:
        os.kill(pid, signal.SIGKILL)
    return outcome(stack, "SIGKILL a pool process", public_id, lines, time.monotonic(), token=token)


def worker_killed(stack: Stack, token: str, prefix: str = "worker") -> Outcome:
    """SIGKILL of the whole worker, started again at once: the batch's heartbeat stops and
    beat's reconciler sends it again."""
    public_id, lines = _begin(stack, token, prefix)
    stack.processes["worker"].kill(signal.SIGKILL)
    stack.start_worker()
    return outcome(
        stack, "SIGKILL the worker, restart", public_id, lines, time.monotonic(), token=token
    )


def postgres_killed(
    stack: Stack, token: str, postgres, prefix: str = "pg", down: float = 3
) -> Outcome:
    """SIGKILL of PostgreSQL (every backend) mid-batch, started again `down` seconds later."""
    public_id, lines = _begin(stack, token, prefix)
    postgres.kill()
    time.sleep(down)
    postgres.start()
    return outcome(
        stack,
        f"SIGKILL PostgreSQL, {down:g} s down",
        public_id,
        lines,
        time.monotonic(),
        token=token,
    )


def redis_killed(stack: Stack, token: str, prefix: str = "redis", down: float = 3) -> Outcome:
    """SIGKILL of Redis (broker and cache) mid-batch, started again `down` seconds later."""
    public_id, lines = _begin(stack, token, prefix)
    stack.processes["redis"].kill()
    time.sleep(down)
    stack.start_redis()
    return outcome(
        stack, f"SIGKILL Redis, {down:g} s down", public_id, lines, time.monotonic(), token=token
    )


def redis_frozen(
    stack: Stack,
    token: str,
    prefix: str = "frozen",
    frozen: float = 10,
    pages: list[str] | None = None,
) -> tuple[Outcome, list[int]]:
    """SIGSTOP of Redis mid-batch (it holds every connection, answers nothing) for `frozen`
    seconds, then SIGCONT. Returns the outcome and the statuses of `pages` asked meanwhile."""
    public_id, lines = _begin(stack, token, prefix)
    redis = stack.processes["redis"]
    _signal_group(redis, signal.SIGSTOP)
    statuses = []
    stopped = time.monotonic()
    try:
        for path in pages or []:
            statuses.append(stack.status(path))
        time.sleep(max(0.0, frozen - (time.monotonic() - stopped)))
    finally:
        _signal_group(redis, signal.SIGCONT)
    result = outcome(
        stack, f"SIGSTOP Redis for {frozen:g} s", public_id, lines, time.monotonic(), token=token
    )
    return result, statuses


def _signal_group(process, sig: int) -> None:
    os.killpg(process.popen.pid, sig)


def poison(stack: Stack, token: str, max_attempts: int) -> Outcome:
    """A batch that kills its worker each time (test_poison's worker dies on a file named
    poison-*): failed after INGEST_MAX_ATTEMPTS tries, not delivered for ever."""
    body = trace_body(2, "poison")
    public_id = stack_post_named(stack, body, token, "poison-1.jsonl")
    since = time.monotonic()
    row = wait_for(
        lambda: finished(stack, public_id, ("failed",)), 180, "the poison batch to be failed"
    )
    assert row["attempts"] == max_attempts, row
    return Outcome(
        "a poison batch", 0, 0, 0, round(time.monotonic() - since, 1), row["state"], row["attempts"]
    )


def stack_post_named(stack: Stack, body: bytes, token: str, name: str) -> str:
    response = stack.request(
        "/api/v1/traces",
        data=body,
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/x-ndjson",
            "X-File-Name": name,
        },
    )
    assert response.status == 202
    return json.loads(response.read())["id"]
