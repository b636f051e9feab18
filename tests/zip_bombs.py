"""A .docx zip bomb, built small: python-docx's empty document with a word/document.xml that
inflates to hundreds of MB of one repeated byte, for the tests of mt's bounds on what a .docx
may inflate to (mt/document/docx.py).

The zip is written here byte by byte (PKWARE's APPNOTE.TXT: a local header and the data per
member, a central directory, its end record), so that a member's Deflate stream can be one
block compressed once and repeated (each ends in a full flush, so each inflates alone, as a
bomb's do) and its declared size can differ from what it holds. Nothing here holds the
inflated bytes.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

BLOCK = b"a" * (1 << 20)


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw Deflate, as a zip holds it
    return c.compress(data) + c.flush()


def _repeated(size: int) -> tuple[bytes, int]:
    """A Deflate stream of `size` bytes (a multiple of BLOCK) of BLOCK's byte, and its CRC-32."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = c.compress(BLOCK) + c.flush(zlib.Z_FULL_FLUSH)  # the state is fresh after it
    crc = 0
    for _ in range(size // len(BLOCK)):
        crc = zlib.crc32(BLOCK, crc)
    return chunk * (size // len(BLOCK)) + c.flush(), crc


def zip_of(members: list[tuple[str, bytes, int, int]]) -> bytes:
    """A zip of (name, Deflate stream, CRC-32, declared inflated size) members."""
    out, central = bytearray(), bytearray()
    for name, data, crc, size in members:
        n = name.encode()
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc,
                               len(data), size, len(n), 0, 0, 0, 0, 0, len(out)) + n
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(data), size,
                           len(n), 0) + n + data
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central),
                      len(out), 0)
    return bytes(out + central + end)


def bomb_docx(size: int = 200 << 20, declared: int | None = None) -> bytes:
    """A .docx whose word/document.xml inflates to `size` bytes (its headers declaring
    `declared` (at most len(BLOCK)), default the truth): about size / 1,000 bytes on disk."""
    import docx

    empty = io.BytesIO()
    docx.Document().save(empty)
    members = []
    with zipfile.ZipFile(empty) as z:
        for info in z.infolist():
            data = z.read(info)
            if info.filename == "word/document.xml":
                stream, crc = _repeated(size)
                if declared is not None:  # and the CRC of what ends there: zipfile's read()
                    crc = zlib.crc32(BLOCK[:declared])  # finds nothing wrong
                members.append((info.filename, stream, crc, declared or size))
            else:
                members.append((info.filename, _deflate(data), zlib.crc32(data), len(data)))
    return zip_of(members)
