"""Building one corpus's entry: its pairs streamed in chunks through worker processes, their
tokens counted and their ids written as flat arrays; and replacing the entry of an older
version of its files."""

from __future__ import annotations

import collections
import itertools
import json
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mt import log
from mt.config import TAG, DataConfig
from mt.corpus_formats import CorpusSource
from mt.errors import DataError
from mt.filters import PairFilter
from mt.textio import file_identity
from mt.token_cache.entry import META, SIDES, CacheEntry, array_name, load_entry
from mt.token_cache.keys import cache_root, short_hash
from mt.token_cache.locked_build import locked_build
from mt.token_cache.tokenizer_entries import make_tokenizers
from mt.tokenizers import Tokenizer, samples
from mt.vocab import UNK, Vocab

CHUNK_PAIRS = 5000  # pairs per worker task: big enough to amortize the hand-over
STEM_CHARS = 40  # of the corpus's name in its entry's name
MAX_ANGLE_TOKENS = 10000  # distinct <...> strings an entry records (to refuse clashing tags)


def open_entry(d: DataConfig, corpus: CorpusSource, tok_dir: Path | None, settings: dict,
               workers: int = 0) -> CacheEntry:
    """The entry of one corpus, built when missing, stale or damaged."""
    files = [file_identity(p) for p in corpus.paths]
    # The name only helps a reader find the entry: cut, so that no name is too long for a file
    # system's 255 bytes (the hashes tell entries apart).
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in corpus.name)[:STEM_CHARS]
    # The paths' hash keeps apart corpora of one name (two dirs' "train"); the files' hash
    # tells versions of one corpus apart, and a new version replaces the old (_siblings).
    where = short_hash([str(p.resolve()) for p in corpus.paths])
    entry = (cache_root() / "tokens" / f"{stem}.{d.src_lang}-{d.tgt_lang}.{short_hash(settings)}"
                                       f".{where}.{short_hash(files)}")
    cache = load_entry(entry)
    if cache is not None:
        return cache

    def write(tmp: Path) -> None:
        _say_what_changed(entry, corpus.paths, files)
        meta = build_entry(tmp, d, settings, corpus, tok_dir, files, workers)
        if [file_identity(p) for p in corpus.paths] != files:
            raise DataError(f"{corpus} changed while its token cache was being built; run again")
        log.info(f"data: token cache {entry}: {meta['pairs']} pairs, "
                 f"{meta['bytes'] / 2**20:.1f} MiB, built in {meta['build_seconds']} s "
                 f"({meta['pairs'] / max(meta['build_seconds'], 1e-9):.0f} pairs/s)")

    cache = locked_build(entry, write, lambda: load_entry(entry, rebuilding=True))
    _remove_outdated(entry)
    return cache


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


def build_entry(tmp: Path, d: DataConfig, settings: dict, corpus: CorpusSource,
                tok_dir: Path | None, files: list, workers: int) -> dict:
    """Tokenize the corpus into the directory tmp (to become its entry); return its meta."""
    started = time.perf_counter()
    toks = make_tokenizers(d, tok_dir or Path("."))
    workers = workers or len(os.sched_getaffinity(0))
    variants = samples(toks[0]) or 1
    sides = [_Side(tmp, array_name(side, v, variants)) for v in range(variants) for side in SIDES]
    angle: set[str] = set()
    bar = tqdm(desc=f"tokenize {corpus.name}", unit=" pairs", unit_scale=True, disable=None,
               file=sys.stderr, dynamic_ncols=True)
    pair_filter = PairFilter(d.filter)
    chunks = enumerate(c for c in kept_chunks(corpus, pair_filter) if c)  # none emptied
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


def kept_chunks(corpus: CorpusSource, pair_filter: PairFilter
                ) -> Iterator[list[tuple[str, str]]]:
    """The corpus's pairs in chunks of CHUNK_PAIRS, each as data.filter keeps it: what an entry
    is built of, in its order (mt.token_cache.matches reads an entry's pair i through it)."""
    for chunk in _chunks(corpus.pairs(), CHUNK_PAIRS):
        yield [p for p, keep in zip(chunk, pair_filter.keep(chunk)) if keep]


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
