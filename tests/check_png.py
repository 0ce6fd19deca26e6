#!/usr/bin/env python3
"""Checks a PNG that inferscale's plot writer made: the signature, every
chunk's CRC, IHDR (W x H, 8-bit RGB, no interlace), the zlib stream
inflating to H scanlines of filter type 0, and for each RRGGBB:N argument
at least N pixels of that colour.

usage: check_png.py FILE W H [RRGGBB:N ...]"""
import struct
import sys
import zlib


def main(path, w, h, wants):
    b = open(path, "rb").read()
    assert b[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
    at, chunks = 8, []
    while at < len(b):
        n, kind = struct.unpack(">I4s", b[at:at + 8])
        data = b[at + 8:at + 8 + n]
        (crc,) = struct.unpack(">I", b[at + 8 + n:at + 12 + n])
        assert crc == zlib.crc32(kind + data), f"bad CRC in {kind!r}"
        chunks.append((kind, data))
        at += 12 + n
    assert at == len(b), "bytes after the last chunk"
    assert [c[0] for c in chunks][0] == b"IHDR" and chunks[-1] == (b"IEND", b""), [c[0] for c in chunks]
    assert struct.unpack(">IIBBBBB", chunks[0][1]) == (w, h, 8, 2, 0, 0, 0), struct.unpack(">IIBBBBB", chunks[0][1])
    raw = zlib.decompress(b"".join(d for k, d in chunks if k == b"IDAT"))
    row = 1 + 3 * w
    assert len(raw) == h * row, f"{len(raw)} bytes of scanlines, not {h * row}"
    counts = {}
    for y in range(h):
        line = raw[y * row:(y + 1) * row]
        assert line[0] == 0, f"row {y}: filter {line[0]}"
        for x in range(1, row, 3):
            counts[line[x:x + 3]] = counts.get(line[x:x + 3], 0) + 1
    for want in wants:
        color, n = want.split(":")
        got = counts.get(bytes.fromhex(color), 0)
        assert got >= int(n), f"{got} pixels of {color}, not at least {n}"


if __name__ == "__main__":
    try:
        main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
    except AssertionError as e:
        sys.exit(f"{sys.argv[1]}: {e}")
