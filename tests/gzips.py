"""Gzip bodies that inflate to hundreds of MiB, built in a second or so rather than by
compressing every byte: after a full flush the compressor starts afresh, so a block
compressed after one always gives the same bytes, which are repeated."""

from __future__ import annotations

import struct
import zlib


def repeated_gzip(block: bytes, times: int, *, head: bytes = b"", tail: bytes = b"") -> bytes:
    """One gzip member inflating to `head`, `block` repeated `times` times, then `tail`."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)

    def alone(data: bytes) -> bytes:
        return compressor.compress(data) + compressor.flush(zlib.Z_FULL_FLUSH)

    start, again, end = alone(head), alone(block), alone(tail)
    crc = zlib.crc32(head)
    for _ in range(times):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(tail, crc)
    size = len(head) + len(block) * times + len(tail)
    # An empty final block (fixed codes), then the trailer: CRC-32 and size modulo 2**32.
    return start + again * times + end + b"\x03\x00" + struct.pack("<II", crc, size & 0xFFFFFFFF)
