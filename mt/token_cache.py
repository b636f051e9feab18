"""The token cache: each training corpus tokenized once, on every core, into memory-mapped arrays.

The first run on a corpus streams it in chunks through worker processes, counts its tokens and
writes the ids as flat arrays; later runs and resumes map those arrays and start at once.
docs/data.md is the user's side of this.

One entry per corpus, $MT_CACHE_DIR/tokens/<name>.<src>-<tgt>.<settings>.<paths>.<files>/ (hashes):
  meta.json                  what it was built from, counts, dtypes (written last)
  src.ids, tgt.ids           every pair's token ids back to back, in the entry's own
                             vocabulary: uint16, or uint32 beyond 65,536 entries
  src.offsets, tgt.offsets   int64: pair i is ids[offsets[i]:offsets[i + 1]]
  vocab.src.txt, vocab.tgt.txt, counts.src.npy, counts.tgt.npy
                             every token of the corpus, most frequent first, and its count
A Sampling tokenizer's `samples` sampled segmentations (SentencePiece's alpha > 0): src.K.ids,
src.K.offsets, ...
The settings hash covers everything that changes the ids (tokenizer settings and files,
lowercasing); the files hash covers the corpus's paths, sizes and modification times. A run's
vocabulary is counted from its corpora's counts, and each entry's ids are looked up in it as
batches are made, so one corpus's entry serves every mix and vocabulary it is used in.

Trained tokenizers (SentencePiece) are entries too, $MT_CACHE_DIR/tokenizers/<hash>/, trained
on all of a config's corpora. An entry is built in a hidden directory beside it under a lock
(<entry>.lock) and renamed into place when complete, so an interrupted build is never used.
"""

from __future__ import annotations

import collections
import fcntl
import functools
import hashlib
import itertools
import json
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
from tqdm import tqdm

from mt import log
from mt.config import TAG, DataConfig
from mt.corpus_formats import CorpusSource
from mt.data import ParallelData, TokenArray, corpus_sources
from mt.errors import DataError, FileSystemError, MTError, RunError, os_error_message
from mt.filters import PairFilter
from mt.mixing import MixedData, Part
from mt.textio import file_identity
from mt.tokenizers import (
    FLAT_KEYS,
    Tokenizer,
    TokenizerSettings,
    build_tokenizers,
    load_tokenizers,
    samples,
    tokenizer_files,
    tokenizer_kind,
)
from mt.vocab import UNK, Vocab

FORMAT = 2  # bump when the layout or the way ids are made changes: old entries are then unused
CHUNK_PAIRS = 5000  # pairs per worker task: big enough to amortize the hand-over
META = "meta.json"
MAX_ANGLE_TOKENS = 10000  # distinct <...> strings an entry records (to refuse clashing tags)
SIDES = ("src", "tgt")
T = TypeVar("T")


def cache_root() -> Path:
    """$MT_CACHE_DIR, else $XDG_CACHE_HOME/mt, else ~/.cache/mt."""
    if os.environ.get("MT_CACHE_DIR"):
        return Path(os.environ["MT_CACHE_DIR"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mt"


def _settings(d: DataConfig, tok_files: Mapping[str, bytes]) -> dict:
    """Everything that changes a corpus's ids: every data setting but the files (the files hash
    covers those), max_len (applied when the arrays are loaded) and the vocabulary's size
    (applied to the counts), and the tokenizer's files."""
    kept = {}
    for k, v in asdict(d).items():
        if k == "tokenizer":
            kept.update(_tokenizer_key(d.tokenizer))
        elif k not in ("dir", "train", "val", "test", "max_len", "min_freq", "max_size"):
            kept[k] = v
    # The tokenizer library's version too: its rules (or its trainer) may change the tokens.
    return {"format": FORMAT, "data": kept, **tokenizer_kind(d.tokenizer.kind).cache_settings(),
            "tokenizer_files": dict(_digests(tok_files))}


def _tokenizer_key(s: TokenizerSettings) -> dict:
    """The tokenizer settings as the key spelled them before they moved into data.tokenizer:
    the kind's name, then the old flat keys (FLAT_KEYS), another kind's at their old defaults;
    so the entries built before stay valid. A kind without flat keys adds its settings."""
    fields = asdict(s)
    key = {"tokenizer": fields.pop("kind")}
    for flat, (kind, name, default) in FLAT_KEYS.items():
        key[flat] = fields.pop(name) if kind == s.kind else default
    return {**key, "tokenizer_settings": fields} if fields else key


# --- Tokenizers: the one place the cache makes them -----------------------------------------
def make_tokenizers(d: DataConfig, directory: Path) -> tuple[Tokenizer, Tokenizer]:
    """The source and target tokenizers of `d`, their files (if any) in `directory`; worker
    processes call this for themselves."""
    return load_tokenizers(d, directory)


def tokenizer_dir(d: DataConfig, corpora: list[CorpusSource],
                  tok_files: Mapping[str, bytes] | None = None) -> Path | None:
    """Where the tokenizers' files are: None for a kind without files (spaCy); else an entry
    holding `tok_files` (a run's own, on --resume or --init-from), or the files trained on all
    the corpora, trained first when missing."""
    names = tokenizer_files(d)
    if not names:
        return None
    if tok_files is not None:
        entry = cache_root() / "tokenizers" / f"files.{_hash(sorted(_digests(tok_files)))}"

        def write(tmp: Path) -> None:
            for name in names:
                (tmp / name).write_bytes(tok_files[name])
    else:
        files = [file_identity(p) for c in corpora for p in c.paths]
        settings = _settings(d, {})
        trained_on = settings["data"]  # not the filter, nor how the cache samples segmentations
        trained_on.pop("filter")
        for flat, (kind, name, _) in FLAT_KEYS.items():
            if kind == d.tokenizer.kind and name in d.tokenizer.SAMPLING:
                trained_on.pop(flat)
        for name in d.tokenizer.SAMPLING:
            trained_on.get("tokenizer_settings", {}).pop(name, None)
        entry = cache_root() / "tokenizers" / f"trained.{_hash(settings)}.{_hash(files)}"

        def write(tmp: Path) -> None:
            build_tokenizers(d, tmp, *(_Text(corpora, k) for k in (0, 1)))
    return _locked_build(entry, write, lambda: entry if _complete(entry, names) else None)


def _digests(files: Mapping[str, bytes]) -> list[tuple[str, str]]:
    return [(n, hashlib.sha256(b).hexdigest()) for n, b in files.items()]


def _complete(entry: Path, names: list[str]) -> bool:
    return all((entry / n).is_file() for n in names)


class _Text:
    """Side k of every corpus, as one text to train a tokenizer on."""

    def __init__(self, corpora: list[CorpusSource], k: int):
        self.corpora, self.k = corpora, k

    def __iter__(self) -> Iterator[str]:
        return itertools.chain.from_iterable(c.side(self.k) for c in self.corpora)

    def __str__(self) -> str:
        return " and ".join(str(c.paths[min(self.k, len(c.paths) - 1)]) for c in self.corpora)


# --- Finding an entry ------------------------------------------------------------------------
@dataclass
class TokenCache:
    """A complete entry of one corpus: its directory, meta data and vocabularies."""

    path: Path
    meta: dict
    src_vocab: Vocab
    tgt_vocab: Vocab

    @classmethod
    def open(cls, path: Path) -> TokenCache:
        """The entry at `path` as it was written: meta data and vocabularies read, nothing
        mapped or checked yet (check() does that). OSError, ValueError or KeyError when
        meta.json or a vocabulary is missing or unreadable."""
        meta = json.loads((path / META).read_text(encoding="utf-8"))
        return cls(path, meta, *(Vocab.load(path / f"vocab.{s}.txt") for s in SIDES))

    @property
    def vocabs(self) -> tuple[Vocab, Vocab]:
        return self.src_vocab, self.tgt_vocab

    @property
    def variants(self) -> int:
        """Segmentations of the corpus (a Sampling tokenizer's `samples`, else 1)."""
        return self.meta.get("variants", 1)

    def counts(self, side: str) -> collections.Counter:
        """How often each token of the side's vocabulary occurs in the corpus."""
        vocab = self.src_vocab if side == "src" else self.tgt_vocab
        counts = np.load(self.path / f"counts.{side}.npy")
        return collections.Counter(dict(zip(vocab.itos, counts.tolist())))

    def check(self) -> None:
        """ValueError unless each side's arrays match meta.json and can be trained on.

        Ids a damaged file holds would index past the vocabulary, and offsets out of order would
        cut pairs of negative length: both are found here, on every load. A maximum rather than
        a checksum: it is what the lookup needs, and a single pass at memory speed over pages
        the first epoch reads anyway (see benchmarks/bench_cache_load.py)."""
        for v in range(self.variants):
            for side, vocab in zip(SIDES, self.vocabs):
                array = self._array(side, v)
                ids, offsets = array.ids, array.offsets
                if len(ids) and int(ids.max()) >= len(vocab):
                    raise ValueError(f"{side}.ids holds ids beyond its vocabulary of "
                                     f"{len(vocab)}")
                if (offsets[0] != 0 or offsets[-1] != len(ids)
                        or not (offsets[1:] >= offsets[:-1]).all()):
                    raise ValueError(f"{side}.offsets do not run in order from 0 to its token "
                                     "count")

    def data(self, variant: int = 0) -> ParallelData:
        """All pairs (of one segmentation), memory-mapped: pages are read when a batch needs
        them. Ids are the entry's own vocabulary's."""
        return ParallelData(*(self._array(side, variant) for side in SIDES))

    def _array(self, side: str, variant: int = 0) -> TokenArray:
        name = _name(side, variant, self.variants)
        n_pairs, n_tokens = self.meta["pairs"], self.meta["tokens"][name]
        dtype = np.dtype(self.meta["dtype"][side])
        if ((self.path / f"{name}.ids").stat().st_size != n_tokens * dtype.itemsize
                or (self.path / f"{name}.offsets").stat().st_size != (n_pairs + 1) * 8):
            raise ValueError(f"{name} arrays do not match {META}")
        ids = (np.memmap(self.path / f"{name}.ids", dtype, mode="r", shape=(n_tokens,))
               if n_tokens else np.zeros(0, dtype))  # mmap refuses an empty file
        offsets = np.memmap(self.path / f"{name}.offsets", np.int64, mode="r",
                            shape=(n_pairs + 1,))
        return TokenArray(ids, offsets)


def _name(side: str, variant: int, variants: int) -> str:
    return side if variants == 1 else f"{side}.{variant}"


@dataclass
class Corpora:
    """The entries of a config's corpora, in its order, and their tokenizers."""

    corpora: list[CorpusSource]
    entries: list[TokenCache]
    tok_dir: Path | None  # None: the kind has no files (spaCy)
    tok_files: dict[str, bytes]  # what checkpoints carry of the tokenizers (read once)
    data_cfg: DataConfig

    @functools.cached_property
    def _tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        return make_tokenizers(self.data_cfg, self.tok_dir or Path("."))

    def tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        """Made once: vocabs() and training both ask."""
        return self._tokenizers

    def vocabs(self) -> tuple[Vocab, Vocab]:
        """A new run's vocabularies: a tokenizer's fixed ones, else counted over all corpora
        (data.min_freq, max_size, shared_vocab); the corpora's tags added to the source's (and
        the target's when shared) after the counted tokens."""
        d = self.data_cfg
        fixed = [tok.fixed_vocab for tok in self.tokenizers()]
        if all(f is not None for f in fixed):
            src, tgt = Vocab(fixed[0]), Vocab(fixed[1])
        else:
            counts = [sum((e.counts(side) for e in self.entries), collections.Counter())
                      for side in SIDES]
            if d.shared_vocab:
                src = tgt = Vocab.from_counts(counts[0] + counts[1], d.min_freq, d.max_size)
            else:
                src, tgt = (Vocab.from_counts(c, d.min_freq, d.max_size) for c in counts)
        tags = [c.tag for c in self.corpora if c.tag]
        self.check_tags(tags)
        src = with_tags(src, tags)
        return (src, src) if d.shared_vocab else (src, tgt)

    def data(self, src_vocab: Vocab, tgt_vocab: Vocab, buckets: bool = False) -> MixedData:
        """The training pairs of every corpus, their ids looked up in these vocabularies (a
        run's), each corpus's tag first in its sources; buckets: see MixedData."""
        return MixedData([Part(c.name, [e.data(v) for v in range(e.variants)], c.weight,
                               src_vocab.stoi[c.tag] if c.tag else None,
                               (_remap(e.src_vocab, src_vocab), _remap(e.tgt_vocab, tgt_vocab)))
                          for c, e in zip(self.corpora, self.entries)], buckets)

    def check_tags(self, tags: list[str]) -> None:
        """A tag that the data itself holds would be two things at once: DataError."""
        for c, e in zip(self.corpora, self.entries):
            if clash := sorted(set(tags) & set(e.meta["angle_tokens"])):
                raise DataError(f"{c}: the text holds {clash[0]!r}, which is also a corpus "
                                "tag; choose a tag that the data never contains")


def _remap(entry: Vocab, run: Vocab) -> np.ndarray | None:
    """Entry ids -> run ids (<unk> for the entry's tokens the run lacks); None: the same."""
    if entry.itos == run.itos[:len(entry)]:
        return None
    return np.array([run.stoi.get(t, UNK) for t in entry.itos], dtype=np.int64)


def with_tags(vocab: Vocab, tags: list[str]) -> Vocab:
    """vocab with the tags it lacks appended."""
    return Vocab(vocab.itos + [t for t in dict.fromkeys(tags) if t not in vocab.stoi])


def open_corpora(d: DataConfig, tok_files: Mapping[str, bytes] | None = None,
                 workers: int = 0) -> Corpora:
    """The token cache of each of d's training corpora, built first when missing or stale.

    tok_files: a run's own tokenizer files (--resume, --init-from), used instead of training.
    workers: tokenizer processes when building (0: one per available core).
    """
    corpora = corpus_sources(d)
    tok_dir = tokenizer_dir(d, corpora, tok_files)
    files = {n: (tok_dir / n).read_bytes() for n in tokenizer_files(d)} if tok_dir else {}
    settings = _settings(d, files)
    entries = [open_entry(d, c, tok_dir, settings, workers) for c in corpora]
    return Corpora(corpora, entries, tok_dir, files, d)


def open_entry(d: DataConfig, corpus: CorpusSource, tok_dir: Path | None, settings: dict,
               workers: int = 0) -> TokenCache:
    """The entry of one corpus, built when missing, stale or damaged."""
    files = [file_identity(p) for p in corpus.paths]
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in corpus.name)
    # The paths' hash keeps apart corpora of one name (two dirs' "train"); the files' hash
    # tells versions of one corpus apart, and a new version replaces the old (_siblings).
    where = _hash([str(p.resolve()) for p in corpus.paths])
    entry = (cache_root() / "tokens" / f"{stem}.{d.src_lang}-{d.tgt_lang}.{_hash(settings)}"
                                       f".{where}.{_hash(files)}")
    cache = _load(entry)
    if cache is not None:
        return cache

    def write(tmp: Path) -> None:
        _say_what_changed(entry, corpus.paths, files)
        meta = _write(tmp, d, settings, corpus, tok_dir, files, workers)
        if [file_identity(p) for p in corpus.paths] != files:
            raise DataError(f"{corpus} changed while its token cache was being built; run again")
        log.info(f"data: token cache {entry}: {meta['pairs']} pairs, "
                 f"{meta['bytes'] / 2**20:.1f} MiB, built in {meta['build_seconds']} s "
                 f"({meta['pairs'] / max(meta['build_seconds'], 1e-9):.0f} pairs/s)")

    cache = _locked_build(entry, write, lambda: _load(entry, rebuilding=True))
    _remove_outdated(entry)
    return cache


def _hash(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def _load(entry: Path, rebuilding: bool = False) -> TokenCache | None:
    """The entry if it is complete and intact; None if it is missing or damaged.

    rebuilding: warn that a damaged entry is about to be rebuilt. Only the builder, under the
    entry's lock, passes it: one rebuild is one warning, and a cache location that is no
    directory is only the builder's error (open_entry's first look is silent).
    """
    try:
        cache = TokenCache.open(entry)
        cache.check()
    except (OSError, ValueError, KeyError, TypeError, MTError) as e:
        if rebuilding and entry.exists():
            what = "incomplete" if isinstance(e, FileNotFoundError) else f"damaged ({e})"
            log.warn(f"{entry}: token cache entry is {what}; rebuilding it")
        return None
    return cache


# --- Building one ----------------------------------------------------------------------------
def _locked_build(entry: Path, write: Callable[[Path], None], load: Callable[[], T | None]
                  ) -> T:
    """What load() finds at `entry`, after write(tmp) has made it when it finds nothing: under
    the entry's lock (another process may have built it meanwhile), in a hidden directory
    renamed into place when complete."""
    root = entry.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / f"{entry.name}.lock", "a")
    except OSError as e:
        raise FileSystemError(f"{root}: cannot write the token cache there ({e.strerror or e}); "
                              "set MT_CACHE_DIR to a writable directory") from None
    with lock:
        # One builder per entry; the flock dies with its process, so a killed one frees it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = load()
        if found is not None:  # built by another process while this one waited
            return found
        _remove_abandoned(root, entry)
        shutil.rmtree(entry, ignore_errors=True)  # damaged, if there at all
        tmp = root / f".{entry.name}.tmp{os.getpid()}"
        try:
            tmp.mkdir()
            write(tmp)
            os.rename(tmp, entry)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise FileSystemError(os_error_message(e)) from None
        except BrokenProcessPool:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RunError("a tokenizer process died while building the token cache (out of "
                           "memory?); nothing was kept; run again") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    found = load()
    assert found is not None, entry
    return found


def _siblings(entry: Path) -> list[Path]:
    """Entries of the same split and settings built from other versions of the files."""
    prefix = entry.name.rsplit(".", 1)[0] + "."
    return [p for p in entry.parent.glob(prefix + "*")
            if p.is_dir() and p != entry and not p.name.startswith(".")]


def _say_what_changed(entry: Path, paths: tuple[Path, ...], files: list) -> None:
    for old in _siblings(entry):
        try:
            before = json.loads((old / META).read_text(encoding="utf-8"))["files"]
        except (OSError, ValueError, KeyError):
            continue
        changed = [str(p) for p, a, b in zip(paths, before, files) if a != b] or [str(paths[0])]
        log.info(f"data: {' and '.join(changed)} changed since its token cache was built; "
                 "rebuilding the cache")
        return
    log.info(f"data: building the token cache of {' and '.join(map(str, paths))} in {entry} "
             "(once for this data; later runs map it)")


def _remove_outdated(entry: Path) -> None:
    """Entries of older versions of the files: never used again. (Processes that still map
    them keep reading their pages after removal.)"""
    for old in _siblings(entry):
        shutil.rmtree(old, ignore_errors=True)


def _remove_abandoned(root: Path, entry: Path) -> None:
    """Temporary directories left by killed builders: no process holds their entry's lock."""
    for tmp in root.glob(".*.tmp*"):
        name = tmp.name[1:].rsplit(".tmp", 1)[0]
        if name == entry.name:  # this process holds that lock
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        with open(root / f"{name}.lock", "a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # still being built
            shutil.rmtree(tmp, ignore_errors=True)


def _write(tmp: Path, d: DataConfig, settings: dict, corpus: CorpusSource,
           tok_dir: Path | None, files: list, workers: int) -> dict:
    started = time.perf_counter()
    toks = make_tokenizers(d, tok_dir or Path("."))
    workers = workers or len(os.sched_getaffinity(0))
    variants = samples(toks[0]) or 1
    sides = [_Side(tmp, _name(side, v, variants)) for v in range(variants) for side in SIDES]
    angle: set[str] = set()
    bar = tqdm(desc=f"tokenize {corpus.name}", unit=" pairs", unit_scale=True, disable=None,
               file=sys.stderr, dynamic_ncols=True)
    pair_filter = PairFilter(d.filter)
    chunks = ([p for p, keep in zip(c, pair_filter.keep(c)) if keep]
              for c in _chunks(corpus.pairs(), CHUNK_PAIRS))
    chunks = enumerate(c for c in chunks if c)  # not a chunk the filter emptied
    for encoded, found in _tokenized(chunks, d, tok_dir, toks, workers):
        for side, enc in zip(sides, encoded):
            side.add(*enc)
        if len(angle) < MAX_ANGLE_TOKENS:
            angle |= found
        bar.update(len(encoded[0][3]))
    bar.close()
    if pair_filter.active:
        log.info(f"data: {corpus.name}: {pair_filter.summary()}")
    fixed = [tok.fixed_vocab for tok in toks]
    vocabs = [Vocab(f) if f is not None
              else Vocab.from_counts(sum((s.counts() for s in sides[i::2]), collections.Counter()))
              for i, f in enumerate(fixed)]
    meta = {**settings, "files": files, "corpus": str(corpus), "pairs": sides[0].n_pairs,
            "variants": variants, "tokens": {}, "dtype": {}, "vocab_size": {},
            "angle_tokens": sorted(angle), "filtered": dict(pair_filter.dropped)}
    for i, (name, vocab) in enumerate(zip(SIDES, vocabs)):
        vocab.save(tmp / f"vocab.{name}.txt")
        counts = sum((s.counts() for s in sides[i::2]), collections.Counter())
        np.save(tmp / f"counts.{name}.npy", np.array([counts.get(t, 0) for t in vocab.itos],
                                                      dtype=np.int64))
        meta["vocab_size"][name] = len(vocab)
        for side in sides[i::2]:
            meta["dtype"][name] = side.finish(vocab)
            meta["tokens"][side.name] = side.n_tokens
    meta["bytes"] = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file())
    meta["build_seconds"] = round(time.perf_counter() - started, 2)
    meta["built_by"] = {"host": socket.gethostname(), "pid": os.getpid(),
                        "rank": int(os.environ.get("RANK", 0)), "workers": workers}
    (tmp / META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


def _chunks(pairs: Iterable[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    it = iter(pairs)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def _tokenized(chunks: Iterator[tuple[int, list]], d: DataConfig, tok_dir: Path | None,
               toks: tuple[Tokenizer, Tokenizer], workers: int
               ) -> Iterator[tuple[list[tuple], set[str]]]:
    """_encode_chunk of every (number, chunk), in order: in worker processes when there is
    more than one chunk, with a few chunks in flight so memory stays bounded."""
    first = list(itertools.islice(chunks, 2))
    if workers <= 1 or len(first) < 2:
        yield from (_encode_chunk(*c, toks=toks) for c in itertools.chain(first, chunks))
        return
    # fork: workers start at once and need no re-import; they touch no torch state.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                             initargs=(d, tok_dir)) as pool:
        pending: collections.deque = collections.deque()
        for number, chunk in itertools.chain(first, chunks):
            pending.append(pool.submit(_encode_chunk, number, chunk))
            if len(pending) > 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


_worker: tuple[Tokenizer, Tokenizer] | None = None


def _start_worker(d: DataConfig, tok_dir: Path | None) -> None:
    global _worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process handles Ctrl-C
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _worker = make_tokenizers(d, tok_dir or Path("."))


def _encode_chunk(number: int, pairs: list[tuple[str, str]],
                  toks: tuple[Tokenizer, Tokenizer] | None = None
                  ) -> tuple[list[tuple], set[str]]:
    """Per segmentation and side: (token types in order of first appearance, their counts,
    ids into those types, sentence lengths). Chunk-local ids keep what goes back to the main
    process small. And the strings like tags (<...>) the text holds."""
    toks = toks or _worker
    sides = list(zip(*pairs))
    if n := samples(toks[0]):  # segmentation v of chunk c: seeded by both, whoever encodes it
        sentences = [tok.sample_many(lines, 1 + number * n + v)
                     for v in range(n) for tok, lines in zip(toks, sides)]
    else:
        sentences = [tok.tokenize_many(lines) for tok, lines in zip(toks, sides)]
    out = []
    for sents in sentences:
        local: dict[str, int] = {}
        ids = np.fromiter((local.setdefault(t, len(local)) for s in sents for t in s),
                          dtype=np.int64)
        lens = np.fromiter(map(len, sents), dtype=np.int64, count=len(sents))
        out.append((list(local), np.bincount(ids, minlength=len(local)), ids, lens))
    found = {m for lines in sides for line in lines if "<" in line for m in TAG.findall(line)}
    return out, found


class _Side:
    """One side's ids while building: tokens get provisional ids in order of first appearance
    (written to <side>.raw), mapped to vocabulary ids once the whole corpus is counted."""

    def __init__(self, directory: Path, name: str):
        self.directory, self.name = directory, name
        self.types: dict[str, int] = {}
        self.type_counts = np.zeros(1 << 16, dtype=np.int64)
        self.raw = open(directory / f"{name}.raw", "wb")
        self.offsets = open(directory / f"{name}.offsets", "wb")
        self.offsets.write(np.zeros(1, dtype=np.int64).tobytes())
        self.n_pairs = self.n_tokens = 0

    def add(self, types: list[str], counts: np.ndarray, ids: np.ndarray, lens: np.ndarray
            ) -> None:
        mapping = np.fromiter((self.types.setdefault(t, len(self.types)) for t in types),
                              dtype=np.int64, count=len(types))
        if len(self.types) > len(self.type_counts):
            grown = np.zeros(2 * len(self.types), dtype=np.int64)
            grown[:len(self.type_counts)] = self.type_counts
            self.type_counts = grown
        self.type_counts[mapping] += counts  # types are distinct within a chunk
        self.raw.write(mapping.astype(np.uint32)[ids].tobytes())
        self.offsets.write((self.n_tokens + np.cumsum(lens)).tobytes())
        self.n_pairs += len(lens)
        self.n_tokens += int(lens.sum())

    def counts(self) -> collections.Counter:
        return collections.Counter(dict(zip(self.types, self.type_counts.tolist())))

    def finish(self, vocab: Vocab) -> str:
        """Write <side>.ids in vocabulary ids; return their dtype."""
        self.offsets.close()
        self.raw.close()
        remap = np.array([vocab.stoi.get(t, UNK) for t in self.types], dtype=np.int64)
        dtype = np.uint16 if len(vocab) <= 1 << 16 else np.uint32
        raw = self.directory / f"{self.name}.raw"
        with open(raw, "rb") as f, open(self.directory / f"{self.name}.ids", "wb") as out:
            while len(block := np.fromfile(f, dtype=np.uint32, count=1 << 22)):
                out.write(remap[block].astype(dtype).tobytes())
        raw.unlink()
        return np.dtype(dtype).name
