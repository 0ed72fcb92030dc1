"""``worker.binlog.compressed.inflate`` on stored values of MariaDB's compressed columns: the
round trip, and corrupt or truncated input is a ``CompressedValueError``, never another error."""
from __future__ import annotations

import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from worker.binlog.compressed import CompressedValueError, inflate


def _stored(data: bytes, lenlen: int = 0) -> bytes:
    c = zlib.compressobj(wbits=-15)
    raw = c.compress(data) + c.flush()
    n = lenlen or max(1, (len(data).bit_length() + 7) // 8)
    return bytes([0x88 | n]) + len(data).to_bytes(n, "big") + raw


@given(st.binary(max_size=3000))
def test_round_trip(data):
    assert inflate(_stored(data)) == data
    assert inflate(b"\x00" + data) == data


@settings(max_examples=300)
@given(st.binary(min_size=1, max_size=200), st.data())
def test_corrupt_or_truncated_values_are_a_typed_error(data, draw):
    stored = bytearray(_stored(data * 3))
    cut = draw.draw(st.integers(1, len(stored)))
    flip = draw.draw(st.integers(1, len(stored) - 1)) if len(stored) > 1 else 0
    for bad in (bytes(stored[:cut]), bytes(stored[:flip]) + bytes([stored[flip] ^ 0xFF]) + bytes(stored[flip + 1:])):
        try:
            out = inflate(bad)
        except CompressedValueError:
            continue
        assert isinstance(out, bytes)
