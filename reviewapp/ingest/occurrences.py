"""How many times each line's bytes have been seen so far in one file: exact, linear, and
in bounded memory (past a number of distinct lines, the counts move to a hash table in a
temporary file, read through mmap: the page cache holds it, not the process). A line's
identity names its occurrence, so identical lines of one run are all kept and a
re-delivery of the file matches them one for one."""

from __future__ import annotations

import mmap
import tempfile
from typing import IO

# A key is at most 16 bytes (the callers' are 128-bit digests of a line's owner and hash).
KEY_BYTES = 16
# A slot: the key's length plus one (0: an empty slot), the key padded with zeros, then its
# count (8 bytes, little-endian) at COUNT_AT.
SLOT_BYTES = 32
TAG_BYTES = 1 + KEY_BYTES
COUNT_AT = 24


class OccurrenceCounter:
    def __init__(self, *, in_memory: int = 200_000):
        self._limit = in_memory
        self._counts: dict[bytes, int] = {}
        self._spilled: _CountsOnDisk | None = None

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
        counts, stored = self._counts, self._spilled.get
        for key in keys:
            if n := stored(key):
                counts[key] = n

    def _spill(self) -> None:
        if self._spilled is None:
            self._spilled = _CountsOnDisk(len(self._counts))
        self._spilled.put_all(self._counts)
        self._counts.clear()

    def close(self) -> None:
        if self._spilled is not None:
            self._spilled.close()
            self._spilled = None


class _CountsOnDisk:
    """An open-addressing hash table (linear probing, at most half full) of key → count in
    a temporary file, deleted when closed: nothing is left on disk."""

    def __init__(self, expected: int):
        self._stored = 0
        self._slots = 1 << max(10, (2 * expected).bit_length())
        self._file, self._map = _mapped(self._slots)

    def get(self, key: bytes) -> int:
        offset = self._find(_tag(key))
        return int.from_bytes(self._map[offset + COUNT_AT : offset + SLOT_BYTES], "little")

    def put_all(self, counts: dict[bytes, int]) -> None:
        if 2 * (self._stored + len(counts)) > self._slots:
            self._grow(2 * (self._stored + len(counts)))
        view, find = self._map, self._find
        for key, n in counts.items():
            tag = _tag(key)
            offset = find(tag)
            if view[offset] == 0:
                view[offset : offset + TAG_BYTES] = tag
                self._stored += 1
            view[offset + COUNT_AT : offset + SLOT_BYTES] = n.to_bytes(8, "little")

    def _find(self, tag: bytes) -> int:
        """The offset of the slot holding `tag`, or of the empty slot where it would go."""
        view, mask = self._map, self._slots - 1
        index = hash(tag) & mask
        while True:
            offset = index * SLOT_BYTES
            found = view[offset : offset + TAG_BYTES]
            if found == tag or found[0] == 0:
                return offset
            index = (index + 1) & mask

    def _grow(self, at_least: int) -> None:
        old_file, old_map = self._file, self._map
        self._slots = 1 << at_least.bit_length()
        self._file, self._map = _mapped(self._slots)
        view, find = self._map, self._find
        for offset in range(0, len(old_map), SLOT_BYTES):
            if old_map[offset]:
                slot = old_map[offset : offset + SLOT_BYTES]
                target = find(slot[:TAG_BYTES])
                view[target : target + SLOT_BYTES] = slot
        old_map.close()
        old_file.close()

    def close(self) -> None:
        self._map.close()
        self._file.close()


def _tag(key: bytes) -> bytes:
    if len(key) > KEY_BYTES:
        raise ValueError(f"an occurrence key is at most {KEY_BYTES} bytes, not {len(key)}")
    return bytes((len(key) + 1,)) + key.ljust(KEY_BYTES, b"\0")


def _mapped(slots: int) -> tuple[IO[bytes], mmap.mmap]:
    scratch = tempfile.TemporaryFile()  # noqa: SIM115 (open as long as the table: close())
    scratch.truncate(slots * SLOT_BYTES)
    return scratch, mmap.mmap(scratch.fileno(), slots * SLOT_BYTES)
