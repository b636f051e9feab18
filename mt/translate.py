"""Translating lines, lists and streams: tokenize, length-sorted token-budget batches, decode,
detokenize, restore the input order."""

from __future__ import annotations

import io
import itertools
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch
from tqdm import tqdm

from mt.checkpoint import Run, atomic_write, load_run
from mt.config import DecodeConfig
from mt.data import _fill, iter_lines, pad
from mt.decode import greedy
from mt.errors import DataError
from mt.log import warn
from mt.tokenizer import Tokenizer

CHUNK_LINES = 2000  # lines read, sorted and translated together: bounds memory on any input


class Translator:
    def __init__(self, run: Run, decode: DecodeConfig | None = None,
                 device: torch.device | str = "cpu"):
        self.run, self.device = run, torch.device(device)
        self.decode_cfg = decode or run.cfg.decode
        d = run.cfg.data
        self.src_tok = Tokenizer(d.src_lang, d.lowercase)
        self.tgt_tok = Tokenizer(d.tgt_lang, d.lowercase)
        self.max_src = run.cfg.model.max_positions
        self.truncated = 0  # source lines cut to the model's positions

    def translate(self, lines: list[str]) -> list[str]:
        """One output per input, in order; empty (or all-whitespace) input gives empty output."""
        ids = []
        for toks in self.src_tok.tokenize_many(lines):
            if len(toks) > self.max_src:
                self.truncated += 1
                toks = toks[: self.max_src]
            ids.append(self.run.src_vocab.encode(toks))
        out = [""] * len(lines)
        order = sorted((i for i in range(len(ids)) if ids[i]), key=lambda i: len(ids[i]))
        for group in _fill(order, lambda i: (len(ids[i]), 0), self.decode_cfg.batch_tokens):
            src = pad([ids[i] for i in group]).to(self.device)
            for i, hyp in zip(group, self._search(src)):
                text = self.tgt_tok.detokenize(self.run.tgt_vocab.decode(hyp))
                # Only plain spaces inside a line, so no reader splits it into two.
                out[i] = " ".join(text.split())
        return out

    def _search(self, src: torch.Tensor) -> list[list[int]]:
        c = self.decode_cfg
        self.run.model.eval()
        return greedy(self.run.model, src, c.max_len_a, c.max_len_b)

    def translate_stream(self, lines: Iterable[str]) -> Iterator[str]:
        """Translate an iterable of lines chunk by chunk, yielding outputs in input order."""
        it = iter(lines)
        while chunk := list(itertools.islice(it, CHUNK_LINES)):
            yield from self.translate(chunk)
        if self.truncated:
            warn(f"{self.truncated} source line(s) longer than model.max_positions "
                 f"({self.max_src} tokens) were truncated")
            self.truncated = 0


def translate_file(run_path: Path, src: str, out: str, decode: DecodeConfig | None = None,
                   device: str = "cpu") -> int:
    """`mt translate`: '-' means stdin/stdout. A file output appears only when complete."""
    run = load_run(run_path, device)
    translator = Translator(run, decode, device)
    if src != "-" and not Path(src).is_file():
        raise DataError(f"{src}: input file not found")
    lines = iter_lines(src)
    bar = tqdm(desc="translate", unit=" lines", disable=None, file=sys.stderr)
    count = 0

    def write_all(handle) -> None:
        nonlocal count
        for hyp in translator.translate_stream(lines):
            handle.write(hyp + "\n")
            count += 1
            bar.update()

    if out == "-":
        stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n",
                                  line_buffering=True)
        write_all(stdout)
        stdout.detach()  # flush, but leave sys.stdout open
    else:
        out_path = Path(out)
        if not out_path.parent.is_dir():
            raise DataError(f"{out}: output directory does not exist")

        def write(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8", newline="\n") as f:
                write_all(f)

        atomic_write(out_path, write)
    bar.close()
    return count
