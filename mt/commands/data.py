"""`mt data`: public corpora (Multi30k task 1 in en, de, fr, cs, downloaded or copied from a local
directory), and the audit of a corpus (`mt data check`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from mt.audit import AUDIT_RATIO, Audit, audit, held_out
from mt.config import load_config
from mt.corpus_formats import CorpusSource
from mt.data import corpus_sources
from mt.download import DownloadError, download
from mt.errors import DataError, UsageError
from mt.log import info
from mt.textio import atomic_write, iter_lines

MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
# Task 1 splits: line count, and the languages each is published in.
MULTI30K = {
    "train": (29000, ("en", "de", "fr", "cs")),
    "val": (1014, ("en", "de", "fr", "cs")),
    "test_2016_flickr": (1000, ("en", "de", "fr", "cs")),
    "test_2017_flickr": (1000, ("en", "de", "fr")),
    "test_2017_mscoco": (461, ("en", "de", "fr")),
    "test_2018_flickr": (1071, ("en", "de", "fr", "cs")),
}


def multi30k_files(splits: list[str], langs: list[str]) -> list[tuple[str, str, int]]:
    """(split, lang, expected lines) for each file asked for; `all` splits: every split
    published in all of langs. Unknown or unpublished combinations: DataError."""
    every = MULTI30K["train"][1]
    for lang in langs:
        if lang not in every:
            raise DataError(f"--langs {lang}: Multi30k task 1 has {', '.join(every)}")
    if splits == ["all"]:
        splits = [s for s, (_, have) in MULTI30K.items() if set(langs) <= set(have)]
    files = []
    for split in splits:
        if split not in MULTI30K:
            raise DataError(f"--splits {split}: unknown; Multi30k task 1 has "
                            f"{', '.join(MULTI30K)} (or all)")
        n, have = MULTI30K[split]
        missing = [lang for lang in langs if lang not in have]
        if missing:
            raise DataError(f"--splits {split}: not published in {', '.join(missing)} "
                            f"(only {', '.join(have)})")
        files += [(split, lang, n) for lang in langs]
    return files


def multi30k(dest: Path, source: Path | None, splits: list[str], langs: list[str]
             ) -> list[Path]:
    """Put Multi30k task 1 into dest as {split}.{lang}.gz and check every line count."""
    files = multi30k_files(splits, langs)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for split, lang, expected in files:
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
    try:
        download(url, target)
    except DownloadError as e:
        raise DataError(f"{url}: download failed ({e}); if you have the files, "
                        "use --from DIR") from None


def check_command(config: Path | None, overrides: list[str], files: dict[str, Path | None]
                  ) -> Audit:
    """`mt data check` as the command line gives it: a CONFIG, or files by their option's name
    ("src", "val-tgt", ...) in pairs; a UsageError for any other combination."""
    def refuse(option: str, problem: str) -> UsageError:
        return UsageError("data check", option, problem)

    if config is not None and any(files.values()):
        raise refuse("CONFIG", "give CONFIG or --src/--tgt files, not both")
    if config is None and (files["src"] is None or files["tgt"] is None):
        raise refuse("CONFIG", "give a CONFIG, or both --src and --tgt")
    for a, b in (("src", "tgt"), ("val-src", "val-tgt"), ("test-src", "test-tgt")):
        if (files[a] is None) != (files[b] is None):
            raise refuse(f"'--{a if files[a] else b}'", f"needs --{b if files[a] else a} too")
    held = {name: (files[f"{name}-src"], files[f"{name}-tgt"]) for name in ("val", "test")
            if files[f"{name}-src"] is not None}
    train = None if config else (files["src"], files["tgt"])
    return check(config, overrides, train, held)


def check(config: Path | None, overrides: list[str], train: tuple[Path, Path] | None,
          held: dict[str, tuple[Path, Path]]) -> Audit:
    """`mt data check`: the config's training corpora against its val and test sets, or the
    files given (train, and the held-out sets by name). max_len and the ratio come from the
    config (or the defaults, with --set applied)."""
    d = load_config(config, overrides).data
    if train is None:
        corpora, against = corpus_sources(d), held_out(d)
    else:
        corpora = [CorpusSource("train", "plain", tuple(train))]
        against = [CorpusSource(name, "plain", tuple(paths)) for name, paths in held.items()]
    return audit(corpora, against, d.max_len, d.filter.max_ratio or AUDIT_RATIO)
