"""How many times each line's bytes have been seen so far in one file: exact, linear, and
in bounded memory (past a number of distinct lines, the counts move to a temporary SQLite
file). A line's identity names its occurrence, so identical lines of one run are all kept
and a re-delivery of the file matches them one for one."""

from __future__ import annotations

import sqlite3


class OccurrenceCounter:
    def __init__(self, *, in_memory: int = 200_000):
        self._limit = in_memory
        self._counts: dict[bytes, int] = {}
        self._spilled: sqlite3.Connection | None = None

    def number(self, keys: list[bytes]) -> list[int]:
        """The occurrence (1, 2, …) of each key in order, counting every earlier call."""
        if self._spilled is not None:
            self._load([key for key in dict.fromkeys(keys) if key not in self._counts])
        counts, numbers = self._counts, []
        for key in keys:
            counts[key] = n = counts.get(key, 0) + 1
            numbers.append(n)
        if len(counts) > self._limit:
            self._spill()
        return numbers

    def _load(self, keys: list[bytes]) -> None:
        assert self._spilled is not None
        for start in range(0, len(keys), 5000):
            part = keys[start : start + 5000]
            rows = self._spilled.execute(
                f"SELECT key, n FROM seen WHERE key IN ({', '.join('?' * len(part))})", part
            )
            self._counts.update(rows)

    def _spill(self) -> None:
        if self._spilled is None:
            # Deleted when closed (SQLite's "" file name): nothing is left on disk.
            self._spilled = sqlite3.connect("")
            # A scratch file: nothing to recover after a crash, so no journal; a cache of
            # 64 MiB (its default is 2 MiB) halves the time of moving counts out.
            self._spilled.executescript(
                "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; "
                "PRAGMA cache_size = -65536; "
                "CREATE TABLE seen (key BLOB PRIMARY KEY, n INTEGER) WITHOUT ROWID"
            )
        self._spilled.executemany("INSERT OR REPLACE INTO seen VALUES (?, ?)", self._counts.items())
        self._counts.clear()

    def close(self) -> None:
        if self._spilled is not None:
            self._spilled.close()
            self._spilled = None
