"""Bounds on what a zip archive (a .docx) may inflate to, checked before its parts are read:
a zip bomb (a small file whose parts inflate to gigabytes) is one DataError, not gigabytes of
memory (docs/documents.md#word-documents-docx).

The sizes a zip declares are checked first: its parts together, and each part's ratio (as
Apache POI's ZipSecureFile bounds them: Word's XML parts compress 5-20 times, pictures not at
all). Then each part is inflated once, a block at a time, to see that it holds no more than
it declares: zipfile's read() inflates a part's whole stream at once and only then cuts it to
the declared size, so a part that lies about its size would cost the memory it inflates to.
"""

from __future__ import annotations

import copy
import io
import zipfile

from mt.errors import DataError

INFLATED_MOST = 256 << 20  # bytes, all parts together
RATIO_MOST, RATIO_GRACE = 100, 1 << 20  # a part past RATIO_GRACE bytes: at most this ratio
BLOCK = 1 << 16


def check(data: bytes, name: str) -> None:
    """A DataError (name: the document's) for a zip past the bounds; zipfile's errors (not a
    zip, a damaged part, a failed CRC) pass through, for the caller to word."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        parts = z.infolist()
        total = sum(p.file_size for p in parts)
        if total > INFLATED_MOST:
            raise DataError(f"{name}: its parts inflate to {total:,} bytes, more than the "
                            f"{INFLATED_MOST >> 20} MiB mt reads of a .docx: a zip bomb, or "
                            "a document to split")
        for p in parts:
            if p.file_size > RATIO_GRACE and p.file_size > RATIO_MOST * p.compress_size:
                raise DataError(f"{name}: its part {p.filename} inflates {p.compress_size:,} "
                                f"bytes to {p.file_size:,}, more than {RATIO_MOST} times: a "
                                "zip bomb, not read")
        for p in parts:
            _holds_what_it_declares(z, p, name)


def _holds_what_it_declares(z: zipfile.ZipFile, part: zipfile.ZipInfo, name: str) -> None:
    """Inflate part a block at a time, allowed one byte past its declared size: reaching that
    byte is a lie about its size (zipfile checks the CRC of what ends where it declares)."""
    probe = copy.copy(part)
    probe.file_size = part.file_size + 1
    got = 0
    with z.open(probe) as f:
        while block := f.read(BLOCK):
            got += len(block)
            if got > part.file_size:
                raise DataError(f"{name}: its part {part.filename} inflates to more than the "
                                f"{part.file_size:,} bytes it declares: a zip bomb, not read")
