"""`mt data`: public corpora written as plain files, line i of one translating line i of the other
(Multi30k task 1 in en, de, fr, cs, downloaded or copied from a local directory; a corpus from
OPUS; a test set sacreBLEU knows, or FLORES-200; the translations of the installed software),
and the audit of a corpus (`mt data check`)."""

from __future__ import annotations

import itertools
import json
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

from mt.audit import AUDIT_RATIO, Audit, audit, held_out
from mt.config import load_config
from mt.corpora import language_pair, opus, software, testsets
from mt.corpus_formats import CorpusSource
from mt.corpus_formats.plain import iter_parallel
from mt.data import corpus_sources
from mt.download import DownloadError, UnsafePath, download, inside
from mt.errors import DataError, UsageError
from mt.log import info
from mt.textio import atomic_write, iter_lines
from mt.token_cache.keys import cache_root

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


def opus_corpus(corpus: str, pair: str, dest: Path, version: str = "latest",
                form: str = "moses", max_pairs: int = 0) -> dict:
    """`mt data opus`: the corpus's file for the pair, found through the OPUS API and fetched
    into $MT_CACHE_DIR/opus/ (resumed if cut, its size checked), its pairs (the first
    max_pairs, 0: all) written to dest as {Corpus}-{version}.{src}-{tgt}.{src} and .{tgt},
    with the corpus's README and LICENSE and what OPUS lists of it (.opus.json) beside them."""
    langs = _pair(pair, "opus")
    release = opus.find(corpus, langs, version, form)
    try:  # the API's answer names the folders and files: none may lead out of its own
        archive = inside(cache_root() / "opus", release.corpus, release.version,
                         release.file_name)
        prefix = inside(Path(dest), f"{_file_stem(release.corpus)}-{release.version}.{pair}")
    except UnsafePath as e:
        raise DataError(f"{opus.api()}: the OPUS API's record of {corpus} {version} names "
                        f"{e}; not used") from None
    if not archive.is_file():
        info(f"data: downloading {release.url} ({release.size_kib / 1024:,.1f} MiB)")
        try:
            download(release.url, archive)
        except DownloadError as e:
            raise DataError(f"{release.url}: {e}") from None
    try:
        opus.check_size(archive, release)
        pairs = (opus.moses_pairs if form == "moses" else opus.tmx_pairs)(archive, langs)
        total = min(max_pairs or release.pairs, release.pairs) or None
        n = write_pairs(prefix, langs, itertools.islice(pairs, max_pairs or None), total)
        notes = opus.moses_notes(archive) if form == "moses" else {}
    except opus.DamagedArchive as e:  # kept, it would fail the next run too: fetched anew
        archive.unlink(missing_ok=True)
        raise DataError(f"{e}; removed: run again to fetch it again") from None
    for name, text in notes.items():
        atomic_write(Path(f"{prefix}.{name}"), lambda tmp, t=text: Path(tmp).write_bytes(t))
    about = {"corpus": release.corpus, "version": release.version, "form": form,
             "languages": pair, "pairs": n, "url": release.url, "website": "https://opus.nlpl.eu/",
             "license": f"{prefix.name}.LICENSE" if "LICENSE" in notes else
             "that of the corpus's sources (OPUS's corpus page says which)",
             "citation": opus.CITATION, "opus_api": release.record}
    _write_json(Path(f"{prefix}.opus.json"), about)
    return {"files": [f"{prefix}.{lang}" for lang in langs], "pairs": n,
            "notes": [f"{prefix}.{name}" for name in (*notes, "opus.json")],
            "prefix": str(prefix)}


def sacrebleu_test_set(name: str | None, pair: str | None, dest: Path) -> dict:
    """`mt data sacrebleu`: the test set's source and reference for the pair, through
    sacreBLEU's download and cache (mt.corpora.testsets), written to dest as
    {name}.{src}-{tgt}.{src} and .{tgt} ("/" in a name becomes "_"); further references as
    {name}.{src}-{tgt}.ref2.{tgt}, ...; a UsageError without a name or a pair."""
    for option, value in (("'-t'", name), ("'-l'", pair)):
        if value is None:
            raise UsageError("data sacrebleu", option, "needed (or --list)")
    src_lang, tgt_lang = _pair(pair, "sacrebleu")
    source, references = testsets.fetch(name, pair)
    prefix = Path(dest) / f"{_file_stem(name)}.{pair}"
    n = write_pairs(prefix, (src_lang, tgt_lang), iter_parallel(source, references[0]))
    expected = testsets.expected_lines(name)
    if expected is not None and n != expected:
        raise DataError(f"{source}: {n} lines, expected {expected}; sacreBLEU's copy is damaged: "
                        f"remove {source.parent} and run again")
    files = [f"{prefix}.{src_lang}", f"{prefix}.{tgt_lang}"]
    for k, ref in enumerate(references[1:], 2):
        extra = Path(f"{prefix}.ref{k}.{tgt_lang}")
        atomic_write(extra, lambda tmp, r=ref: shutil.copyfile(r, tmp))
        files.append(str(extra))
    return {"test_set": name, "languages": pair, "lines": n, "files": files}


def gettext_corpus(src: str, tgt: str, locale_dir: Path, dest: Path) -> dict:
    """`mt data gettext`: the installed software's catalogues for tgt
    ({locale_dir}/{tgt}/LC_MESSAGES/*.mo) as a corpus split by whole package
    (mt.corpora.software): dest/{split}.{src} and .{tgt} (a pair a line, escaped), each
    package's PO text as dest/{split}/{package}.po, and dest/manifest.json. Everything is read
    first: a file that cannot be read leaves nothing written."""
    for option, code in (("--src", src), ("--tgt", tgt)):
        if not code or _file_stem(code) != code:
            raise UsageError("data gettext", option, f"{code!r}: give a language code (de, pt_BR)")
    found = list(software.catalogues(locale_dir, tgt))
    split = software.split_pairs(found)
    dest = Path(dest)
    for name, pairs in split.items():
        escaped = ((software.escape(s), software.escape(t)) for s, t in pairs)
        write_pairs(dest / name, (src, tgt), escaped, len(pairs))
    for cat in found:
        po = dest / cat.split / f"{cat.name}.po"
        po.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(po, lambda tmp, text=cat.po: Path(tmp).write_text(
            text, encoding="utf-8", newline="\n"))
    about = software.manifest(found, split)
    _write_json(dest / "manifest.json", {"from": str(Path(locale_dir) / tgt / "LC_MESSAGES"),
                                         "src": src, "tgt": tgt, **about})
    return {"dir": str(dest), "packages": len(found),
            "splits": {name: {"packages": len(s["packages"]), "pairs": s["pairs"]}
                       for name, s in about["splits"].items()}}


def list_test_sets(pair: str | None) -> str:
    """`mt data sacrebleu --list`: each test set (with the pair, if given) and what it is."""
    rows = []
    for name in testsets.names():
        about, pairs = testsets.describe(name)
        if pair is None or testsets.has_pair(name, pair):
            listed = ", ".join(pairs) if len(pairs) <= 6 else \
                f"{', '.join(pairs[:6])}, ... ({len(pairs)} pairs)"
            rows.append(f"{name}: {about}" + (f" [{listed}]" if listed else ""))
    return "\n".join(rows) if rows else f"no test set has {pair}"


def list_opus(pair: str, form: str = "moses") -> str:
    """`mt data opus --list`: the latest release of each corpus with the pair, largest first."""
    records = sorted(opus.releases(_pair(pair, "opus"), form),
                     key=lambda r: -int(r.get("alignment_pairs") or 0))
    return "\n".join(f"{r['corpus']:<24} {r.get('version', ''):<8} "
                     f"{int(r.get('alignment_pairs') or 0):>13,} pairs "
                     f"{int(r.get('size') or 0) / 1024:>10,.1f} MiB" for r in records) or \
        f"OPUS has no corpus for {pair} in {form} form"


def write_pairs(prefix: Path, langs: tuple[str, str], pairs: Iterable[tuple[str, str]],
                total: int | None = None) -> int:
    """The pairs as {prefix}.{src} and {prefix}.{tgt}, both whole or neither, streamed with a
    progress bar; their count. No pair at all is a DataError."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    count = 0

    def write(src_tmp: str, tgt_tmp: str) -> None:
        nonlocal count
        opened = [open(p, "w", encoding="utf-8", errors="surrogateescape", newline="\n",
                       buffering=1 << 20) for p in (src_tmp, tgt_tmp)]
        with opened[0] as a, opened[1] as b:
            for s, t in tqdm(pairs, total=total, desc=prefix.name, unit=" pairs",
                             unit_scale=True, disable=None, file=sys.stderr, dynamic_ncols=True):
                a.write(s + "\n")
                b.write(t + "\n")
                count += 1
        if not count:
            raise DataError(f"{prefix}: no pairs to write")

    targets = [Path(f"{prefix}.{lang}") for lang in langs]
    atomic_write(targets[0], lambda src_tmp: atomic_write(
        targets[1], lambda tgt_tmp: write(src_tmp, tgt_tmp)))
    info(f"data: {count:,} pairs in {targets[0]} and {targets[1]}")
    return count


def _pair(pair: str, command: str) -> tuple[str, str]:
    """The pair's two codes; it is part of file names, so it holds no `/` (mt.download)."""
    try:
        inside(Path(), pair)
        return language_pair(pair)
    except ValueError:  # UnsafePath included
        raise UsageError(f"data {command}", "'-l'", f"{pair!r}: give SRC-TGT, like de-en"
                         ) from None


def _file_stem(name: str) -> str:
    """A corpus's or test set's name as part of a file name ("wmt21/dev" -> "wmt21_dev")."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _write_json(path: Path, value: dict) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(value, indent=1) + "\n",
                                                       encoding="utf-8"))


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
