"""Public corpora: Multi30k task 1 (de/en), downloaded or copied from a local directory."""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from pathlib import Path

from mt.errors import DataError
from mt.log import info
from mt.textio import atomic_write, iter_lines

MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
MULTI30K_SPLITS = {"train": 29000, "val": 1014, "test_2016_flickr": 1000}
MULTI30K_LANGS = ("de", "en")


def multi30k(dest: Path, source: Path | None = None) -> list[Path]:
    """Put Multi30k task 1 into dest as {split}.{lang}.gz and check every line count."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for split, expected in MULTI30K_SPLITS.items():
        for lang in MULTI30K_LANGS:
            name = f"{split}.{lang}.gz"
            target = dest / name
            if source is not None:
                origin = Path(source) / name
                if not origin.is_file():
                    raise DataError(f"{origin}: not found; --from needs a directory holding "
                                    "the Multi30k files (train.de.gz, ...)")
                atomic_write(target, lambda tmp, o=origin: shutil.copyfile(o, tmp))
            else:
                _download(MULTI30K_URL + name, target)
            count = sum(1 for _ in iter_lines(target))
            if count != expected:
                raise DataError(f"{target}: {count} lines, expected {expected}; the copy is "
                                "incomplete or not Multi30k: fetch it again")
            written.append(target)
            info(f"{target}: {count} lines")
    return written


def _download(url: str, target: Path) -> None:
    def fetch(tmp: str) -> None:
        try:
            with urllib.request.urlopen(url, timeout=60) as r, open(tmp, "wb") as f:
                shutil.copyfileobj(r, f)
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            raise DataError(f"{url}: download failed ({e}); if you have the files, "
                            "use --from DIR") from None

    atomic_write(target, fetch)
