"""Reading parallel text (plain or .gz), encoding it, and length-bucketed token-budget batches."""

from __future__ import annotations

import gzip
import io
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from mt.errors import DataError
from mt.log import warn
from mt.tokenizer import Tokenizer
from mt.vocab import BOS, EOS, PAD, Vocab


def open_text(path: str | Path) -> io.TextIOBase:
    """Open a UTF-8 text file, gzipped or not. Undecodable bytes become U+FFFD (counted by callers).

    '-' is standard input. Lines end at '\\n' only, so line numbers match `wc -l` and other tools.
    """
    if str(path) == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace", newline="\n")
    path = Path(path)
    try:
        if path.suffix == ".gz":
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace",
                                    newline="\n")
        return open(path, encoding="utf-8", errors="replace", newline="\n")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found; check the path") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, expected a text file; give a file") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e}); check the "
                        "permissions") from None


def iter_lines(path: str | Path) -> Iterator[str]:
    """Lines without their line ending; warns once with the count of lines that were not UTF-8."""
    bad = 0
    first_bad = 0
    with open_text(path) as f:
        try:
            for n, line in enumerate(f, 1):
                line = line.rstrip("\n").removesuffix("\r")
                if "\ufffd" in line:
                    bad += 1
                    first_bad = first_bad or n
                yield line
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            raise DataError(f"{path}: cannot read ({e}); is the file complete? Copy it "
                            "again") from None
    if bad:
        warn(f"{path}: {bad} line(s) had invalid UTF-8 (first at line {first_bad}); "
             "bad bytes were replaced with U+FFFD")


def read_lines(path: str | Path) -> list[str]:
    return list(iter_lines(path))


def split_path(directory: str | Path, split: str, lang: str) -> Path:
    """`{dir}/{split}.{lang}`, or its `.gz` twin when only that exists."""
    plain = Path(directory) / f"{split}.{lang}"
    gz = plain.with_name(plain.name + ".gz")
    return gz if gz.exists() and not plain.exists() else plain


def read_parallel(src_path: Path, tgt_path: Path) -> tuple[list[str], list[str]]:
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(
            f"parallel files differ in length: {src_path} has {len(src)} lines, "
            f"{tgt_path} has {len(tgt)}; line i of one must translate line i of the other"
        )
    if not src:
        raise DataError(f"{src_path}: file is empty; give a file with one sentence a line")
    return src, tgt


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) source ids, PAD-padded
    tgt_in: torch.Tensor  # (B, T) <bos> y1 .. yn
    tgt_out: torch.Tensor  # (B, T) y1 .. yn <eos>
    n_tgt_tokens: int  # non-pad target tokens: the loss normalizer

    def to(self, device: torch.device) -> Batch:
        move = lambda t: t.to(device, non_blocking=True)  # noqa: E731
        return Batch(move(self.src), move(self.tgt_in), move(self.tgt_out), self.n_tgt_tokens)


def pad(seqs: list[list[int]], value: int = PAD) -> torch.Tensor:
    width = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), max(width, 1)), value, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out


class ParallelData:
    """Encoded sentence pairs (source ids; target ids without <bos>/<eos>)."""

    def __init__(self, src: list[list[int]], tgt: list[list[int]]):
        self.src, self.tgt = src, tgt

    @classmethod
    def from_text(cls, src_lines: list[str], tgt_lines: list[str], src_tok: Tokenizer,
                  tgt_tok: Tokenizer, src_vocab: Vocab, tgt_vocab: Vocab) -> ParallelData:
        src = [src_vocab.encode(t) for t in src_tok.tokenize_many(src_lines)]
        tgt = [tgt_vocab.encode(t) for t in tgt_tok.tokenize_many(tgt_lines)]
        return cls(src, tgt)

    def __len__(self) -> int:
        return len(self.src)

    def filter_length(self, max_len: int) -> int:
        """Drop empty pairs and pairs longer than max_len tokens on either side; return how many."""
        keep = [i for i, (s, t) in enumerate(zip(self.src, self.tgt))
                if 0 < len(s) <= max_len and 0 < len(t) <= max_len]
        dropped = len(self.src) - len(keep)
        self.src = [self.src[i] for i in keep]
        self.tgt = [self.tgt[i] for i in keep]
        return dropped

    def batches(self, max_tokens: int, seed: int | None = None) -> list[Batch]:
        """Token-budget batches of similar-length pairs; shuffled when a seed is given.

        A batch holds as many pairs as fit `max_tokens` padded (source + target) tokens.
        Pairs are sorted by length inside pools of ~100 batches, so padding is small while
        the order still varies from epoch to epoch.
        """
        order = list(range(len(self.src)))
        rng = random.Random(seed)
        if seed is not None:
            rng.shuffle(order)
        pool = max(1, 100 * max_tokens // 40)
        groups: list[list[int]] = []
        for start in range(0, len(order), pool):
            chunk = sorted(order[start:start + pool],
                           key=lambda i: (len(self.src[i]), len(self.tgt[i])))
            groups.extend(_fill(chunk, lambda i: (len(self.src[i]), len(self.tgt[i]) + 1),
                                max_tokens))
        if seed is not None:
            rng.shuffle(groups)
        return [self._collate(g) for g in groups]

    def _collate(self, idx: list[int]) -> Batch:
        src = pad([self.src[i] for i in idx])
        tgt_in = pad([[BOS] + self.tgt[i] for i in idx])
        tgt_out = pad([self.tgt[i] + [EOS] for i in idx])
        return Batch(src, tgt_in, tgt_out, sum(len(self.tgt[i]) + 1 for i in idx))


def _fill(sorted_idx: list[int], sizes, max_tokens: int) -> list[list[int]]:
    """Greedily cut a length-sorted list into groups whose padded size fits the budget."""
    groups, cur, max_s, max_t = [], [], 0, 0
    for i in sorted_idx:
        s, t = sizes(i)
        ms, mt_ = max(max_s, s), max(max_t, t)
        if cur and (len(cur) + 1) * (ms + mt_) > max_tokens:
            groups.append(cur)
            cur, ms, mt_ = [], s, t
        cur.append(i)
        max_s, max_t = ms, mt_
    if cur:
        groups.append(cur)
    return groups
