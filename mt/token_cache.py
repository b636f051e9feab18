"""The token cache: a training corpus tokenized once, on every core, into memory-mapped arrays.

The first run on a corpus streams its training split in chunks through worker processes,
counts the vocabulary and writes the ids as flat arrays; later runs and resumes map those
arrays and start at once. docs/data.md is the user's side of this.

One entry, $MT_CACHE_DIR/tokens/<train>.<src>-<tgt>.<settings hash>.<files hash>/:
  meta.json                  what it was built from, counts, dtypes (written last)
  src.ids, tgt.ids           every pair's token ids back to back: uint16, or uint32 when the
                             vocabulary has more than 65,536 entries
  src.offsets, tgt.offsets   int64: pair i is ids[offsets[i]:offsets[i + 1]]
  vocab.src.txt, vocab.tgt.txt
  tok/                       files the tokenizers need (none for spaCy): trained on the split,
                             or given (another run's: open_cache's tok_files)
The settings hash covers everything that changes the ids (tokenizer settings, lowercasing,
vocabulary settings); the files hash covers the training files' paths, sizes and modification
times. An entry is built in a hidden directory beside it under a lock (<entry>.lock) and
renamed into place when complete, so an interrupted or failed build is never used.
"""

from __future__ import annotations

import collections
import fcntl
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
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mt import log
from mt.config import DataConfig
from mt.data import ParallelData, TokenArray, iter_parallel, split_path
from mt.errors import DataError, FileSystemError, MTError, RunError, os_error_message
from mt.textio import file_identity
from mt.tokenizers import Tokenizer, build_tokenizers, load_tokenizers, tokenizer_kind
from mt.vocab import UNK, Vocab

FORMAT = 1  # bump when the layout or the way ids are made changes: old entries are then unused
CHUNK_PAIRS = 5000  # pairs per worker task: big enough to amortize the hand-over
META = "meta.json"
SIDES = ("src", "tgt")


def cache_root() -> Path:
    """$MT_CACHE_DIR, else $XDG_CACHE_HOME/mt, else ~/.cache/mt."""
    if os.environ.get("MT_CACHE_DIR"):
        return Path(os.environ["MT_CACHE_DIR"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mt"


# --- Tokenizers: the one place the cache makes them -----------------------------------------
def make_tokenizers(d: DataConfig, directory: Path, train: tuple[Path, Path] | None = None
                    ) -> tuple[Tokenizer, Tokenizer]:
    """The source and target tokenizers of `d`; worker processes call this for themselves.

    With `train` (a new cache entry), whatever needs training (SentencePiece) is trained on
    those files and its files written to `directory`; without, they are loaded from there.
    """
    return build_tokenizers(d, directory, *train) if train else load_tokenizers(d, directory)


def _settings(d: DataConfig) -> dict:
    """Everything that changes the ids: every data setting but the file names (the files hash
    covers those) and max_len (applied when the arrays are loaded)."""
    kept = {k: v for k, v in asdict(d).items()
            if k not in ("dir", "train", "val", "test", "max_len")}
    # The tokenizer library's version too: its rules (or its trainer) may change the tokens.
    return {"format": FORMAT, "data": kept, **tokenizer_kind(d.tokenizer).cache_settings()}


# --- Finding an entry ------------------------------------------------------------------------
@dataclass
class TokenCache:
    """A complete cache entry: its directory, meta data and vocabularies."""

    path: Path
    meta: dict
    src_vocab: Vocab
    tgt_vocab: Vocab
    data_cfg: DataConfig

    @classmethod
    def open(cls, path: Path, data_cfg: DataConfig) -> TokenCache:
        """The entry at `path` as it was written: meta data and vocabularies read, nothing
        mapped or checked yet (check() does that). OSError, ValueError or KeyError when
        meta.json or a vocabulary is missing or unreadable."""
        meta = json.loads((path / META).read_text(encoding="utf-8"))
        return cls(path, meta, *(Vocab.load(path / f"vocab.{s}.txt") for s in SIDES), data_cfg)

    @property
    def vocabs(self) -> tuple[Vocab, Vocab]:
        return self.src_vocab, self.tgt_vocab

    def check(self) -> None:
        """ValueError unless each side's arrays match meta.json and can be trained on.

        Ids a damaged file holds would index past the embedding, and offsets out of order would
        cut pairs of negative length: both are found here, on every load. A maximum rather than
        a checksum: it is what the embedding needs, and a single pass at memory speed over pages
        the first epoch reads anyway (see benchmarks/bench_cache_load.py)."""
        for side, vocab in zip(SIDES, self.vocabs):
            array = self._array(side)
            ids, offsets = array.ids, array.offsets
            if len(ids) and int(ids.max()) >= len(vocab):
                raise ValueError(f"{side}.ids holds ids beyond its vocabulary of {len(vocab)}")
            if (offsets[0] != 0 or offsets[-1] != len(ids)
                    or not (offsets[1:] >= offsets[:-1]).all()):
                raise ValueError(f"{side}.offsets do not run in order from 0 to its token count")

    def data(self) -> ParallelData:
        """All pairs, memory-mapped: pages are read when a batch needs them."""
        return ParallelData(*(self._array(side) for side in SIDES))

    def _array(self, side: str) -> TokenArray:
        n_pairs, n_tokens = self.meta["pairs"], self.meta["tokens"][side]
        dtype = np.dtype(self.meta["dtype"][side])
        if ((self.path / f"{side}.ids").stat().st_size != n_tokens * dtype.itemsize
                or (self.path / f"{side}.offsets").stat().st_size != (n_pairs + 1) * 8):
            raise ValueError(f"{side} arrays do not match {META}")
        ids = (np.memmap(self.path / f"{side}.ids", dtype, mode="r", shape=(n_tokens,))
               if n_tokens else np.zeros(0, dtype))  # mmap refuses an empty file
        offsets = np.memmap(self.path / f"{side}.offsets", np.int64, mode="r",
                            shape=(n_pairs + 1,))
        return TokenArray(ids, offsets)

    def tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        return make_tokenizers(self.data_cfg, self.path / "tok")


def open_cache(d: DataConfig, vocabs: tuple[Vocab, Vocab] | None = None, workers: int = 0,
               tok_files: Mapping[str, bytes] | None = None) -> TokenCache:
    """The token cache of d's training split, built first when missing or stale.

    vocabs, tok_files: a resumed run's vocabularies and tokenizer files, or a fine-tuned run's
    parent's. The entry built with the vocabularies counted from the data (and tokenizers
    trained on it) is used when they are the same (the usual case); otherwise an entry encoded
    with these is, its tok/ holding tok_files as given (nothing trained). workers: tokenizer
    processes when building (0: one per available core).
    """
    src_path, tgt_path = (split_path(d.dir, d.train, lang) for lang in (d.src_lang, d.tgt_lang))
    files = [file_identity(src_path), file_identity(tgt_path)]
    settings = _settings(d)
    entry = _entry_path(d, settings, files)
    cache = _load(entry, d)
    if (cache is not None and (vocabs is None or _same(cache.vocabs, vocabs))
            and _holds(cache, tok_files or {})):
        return cache
    if tok_files:
        settings["tok"] = _hash({n: hashlib.sha256(b).hexdigest() for n, b in tok_files.items()})
    if vocabs is not None:
        settings["vocab"] = _hash([v.itos for v in vocabs])
    if tok_files or vocabs is not None:
        entry = _entry_path(d, settings, files)
        if (cache := _load(entry, d)) is not None:
            return cache
    return _build_entry(entry, d, settings, (src_path, tgt_path), files, vocabs, workers,
                        tok_files or {})


def _holds(cache: TokenCache, tok_files: Mapping[str, bytes]) -> bool:
    """Whether the entry's tokenizer files are these."""
    return all((cache.path / "tok" / n).is_file() and (cache.path / "tok" / n).read_bytes() == b
               for n, b in tok_files.items())


def _hash(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def _entry_path(d: DataConfig, settings: dict, files: list) -> Path:
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in Path(d.train).name)
    return (cache_root() / "tokens"
            / f"{stem}.{d.src_lang}-{d.tgt_lang}.{_hash(settings)}.{_hash(files)}")


def _same(a: tuple[Vocab, Vocab], b: tuple[Vocab, Vocab]) -> bool:
    return all(x.itos == y.itos for x, y in zip(a, b))


def _load(entry: Path, d: DataConfig, rebuilding: bool = False) -> TokenCache | None:
    """The entry if it is complete and intact; None if it is missing or damaged.

    rebuilding: warn that a damaged entry is about to be rebuilt. Only the builder, under the
    entry's lock, passes it: one rebuild is one warning, and a cache location that is no
    directory is only the builder's error (open_cache's first look is silent).
    """
    try:
        cache = TokenCache.open(entry, d)
        cache.check()
    except (OSError, ValueError, KeyError, TypeError, MTError) as e:
        if rebuilding and entry.exists():
            what = "incomplete" if isinstance(e, FileNotFoundError) else f"damaged ({e})"
            log.warn(f"{entry}: token cache entry is {what}; rebuilding it")
        return None
    return cache


# --- Building one ----------------------------------------------------------------------------
def _build_entry(entry: Path, d: DataConfig, settings: dict, paths: tuple[Path, Path],
                 files: list, vocabs: tuple[Vocab, Vocab] | None, workers: int,
                 tok_files: Mapping[str, bytes]) -> TokenCache:
    """Tokenize the training split into `entry`, under its lock (another process may have
    built it meanwhile), and open it."""
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
        cache = _load(entry, d, rebuilding=True)
        if cache is not None:  # built by another process while this one waited
            return cache
        _say_what_changed(entry, paths, files)
        _remove_abandoned(root, entry)
        shutil.rmtree(entry, ignore_errors=True)  # damaged, if there at all
        tmp = root / f".{entry.name}.tmp{os.getpid()}"
        try:
            tmp.mkdir()
            meta = _write(tmp, d, settings, paths, files, vocabs, workers, tok_files)
            if [file_identity(p) for p in paths] != files:
                raise DataError(f"{paths[0]} or {paths[1]} changed while its token cache was "
                                "being built; run again")
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
    _remove_outdated(entry)
    log.info(f"data: token cache {entry}: {meta['pairs']} pairs, "
             f"{meta['bytes'] / 2**20:.1f} MiB, built in {meta['build_seconds']} s "
             f"({meta['pairs'] / max(meta['build_seconds'], 1e-9):.0f} pairs/s)")
    cache = _load(entry, d)
    assert cache is not None, entry
    return cache


def _siblings(entry: Path) -> list[Path]:
    """Entries of the same split and settings built from other versions of the files."""
    prefix = entry.name.rsplit(".", 1)[0] + "."
    return [p for p in entry.parent.glob(prefix + "*")
            if p.is_dir() and p != entry and not p.name.startswith(".")]


def _say_what_changed(entry: Path, paths: tuple[Path, Path], files: list) -> None:
    for old in _siblings(entry):
        try:
            before = json.loads((old / META).read_text(encoding="utf-8"))["files"]
        except (OSError, ValueError, KeyError):
            continue
        changed = [str(p) for p, a, b in zip(paths, before, files) if a != b] or [str(paths[0])]
        log.info(f"data: {' and '.join(changed)} changed since its token cache was built; "
                 "rebuilding the cache")
        return
    log.info(f"data: building the token cache of {paths[0]} and {paths[1]} in {entry} "
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


def _write(tmp: Path, d: DataConfig, settings: dict, paths: tuple[Path, Path], files: list,
           vocabs: tuple[Vocab, Vocab] | None, workers: int, tok_files: Mapping[str, bytes]
           ) -> dict:
    started = time.perf_counter()
    (tmp / "tok").mkdir()
    for name, data in tok_files.items():  # given: used as they are, not trained
        (tmp / "tok" / name).write_bytes(data)
    toks = make_tokenizers(d, tmp / "tok", train=None if tok_files else paths)
    workers = workers or len(os.sched_getaffinity(0))
    sides = [_Side(tmp, side) for side in SIDES]
    bar = tqdm(desc="tokenize", unit=" pairs", unit_scale=True, disable=None, file=sys.stderr,
               dynamic_ncols=True)
    chunks = _chunks(iter_parallel(*paths), CHUNK_PAIRS)
    for encoded in _tokenized(chunks, d, tmp / "tok", toks, workers):
        for side, enc in zip(sides, encoded):
            side.add(*enc)
        bar.update(len(encoded[0][3]))
    bar.close()
    vocabs = vocabs or _vocabs(d, toks, sides)
    meta = {**settings, "files": files, "pairs": sides[0].n_pairs, "tokens": {}, "dtype": {},
            "vocab_size": {}}
    for name, side, vocab in zip(SIDES, sides, vocabs):
        vocab.save(tmp / f"vocab.{name}.txt")
        meta["dtype"][name] = side.finish(vocab)
        meta["tokens"][name] = side.n_tokens
        meta["vocab_size"][name] = len(vocab)
    meta["bytes"] = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file())
    meta["build_seconds"] = round(time.perf_counter() - started, 2)
    meta["built_by"] = {"host": socket.gethostname(), "pid": os.getpid(),
                        "rank": int(os.environ.get("RANK", 0)), "workers": workers}
    (tmp / META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


def _vocabs(d: DataConfig, toks: tuple[Tokenizer, Tokenizer], sides: list[_Side]
            ) -> tuple[Vocab, Vocab]:
    """Counted from the training split only, as Vocab.build would (fixed ones kept as they are)."""
    fixed = [getattr(tok, "fixed_vocab", None) for tok in toks]
    if all(f is not None for f in fixed):
        return Vocab(fixed[0]), Vocab(fixed[1])
    counts = [side.counts() for side in sides]
    if d.shared_vocab:
        shared = Vocab.from_counts(counts[0] + counts[1], d.min_freq, d.max_size)
        return shared, shared
    src, tgt = (Vocab.from_counts(c, d.min_freq, d.max_size) for c in counts)
    return src, tgt


def _chunks(pairs: Iterable[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    it = iter(pairs)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def _tokenized(chunks: Iterator[list], d: DataConfig, tok_dir: Path,
               toks: tuple[Tokenizer, Tokenizer], workers: int) -> Iterator[list[tuple]]:
    """_encode_chunk of every chunk, in order: in worker processes when there is more than one
    chunk, with a few chunks in flight so memory stays bounded."""
    first = list(itertools.islice(chunks, 2))
    if workers <= 1 or len(first) < 2:
        yield from (_encode_chunk(c, toks) for c in itertools.chain(first, chunks))
        return
    # fork: workers start at once and need no re-import; they touch no torch state.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                             initargs=(d, tok_dir)) as pool:
        pending: collections.deque = collections.deque()
        for chunk in itertools.chain(first, chunks):
            pending.append(pool.submit(_encode_chunk, chunk))
            if len(pending) > 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


_worker_toks: tuple[Tokenizer, Tokenizer] | None = None


def _start_worker(d: DataConfig, tok_dir: Path) -> None:
    global _worker_toks
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process handles Ctrl-C
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _worker_toks = make_tokenizers(d, tok_dir)


def _encode_chunk(pairs: list[tuple[str, str]], toks: tuple[Tokenizer, Tokenizer] | None = None
                  ) -> list[tuple]:
    """Per side: (token types in order of first appearance, their counts, ids into those
    types, sentence lengths). Chunk-local ids keep what goes back to the main process small."""
    out = []
    for tok, lines in zip(toks or _worker_toks, zip(*pairs)):
        sentences = tok.tokenize_many(lines)
        local: dict[str, int] = {}
        ids = np.fromiter((local.setdefault(t, len(local)) for s in sentences for t in s),
                          dtype=np.int64)
        lens = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))
        out.append((list(local), np.bincount(ids, minlength=len(local)), ids, lens))
    return out


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
