"""`mt tokenize`: lines to space-separated tokens, or back (--detok); one line out per line in."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from tqdm import tqdm

from mt.checkpoint import open_run
from mt.commands.output import check_input_path, check_output_path, write_output
from mt.errors import UsageError
from mt.textio import iter_lines
from mt.tokenizers import Tokenizer
from mt.tokenizers.spacy_words import SpacyTokenizer

CHUNK_LINES = 2000  # lines tokenized together: bounds memory on any input
SIDES = ("src", "tgt")  # `mt tokenize --side`


def tokenize(run: Path | None, side: str, lang: str | None, lowercase: bool, src: str, out: str,
             detok: bool = False) -> int:
    """`mt tokenize`: a run or a language (a UsageError for both or neither), the paths
    checked before the tokenizer is loaded, then tokenize_file."""
    if (run is None) == (lang is None):
        raise UsageError("tokenize", "RUN", "give either a run directory or --lang")
    check_input_path(src)
    check_output_path(out)
    return tokenize_file(pick_tokenizer(run, side, lang, lowercase), src, out, detok)


def pick_tokenizer(run: Path | None, side: str = "src", lang: str | None = None,
                   lowercase: bool = False) -> Tokenizer:
    """spaCy's tokenizer for `lang`, or the `side` (src or tgt) tokenizer of a run directory
    or checkpoint file (mt.checkpoint.open_run)."""
    if run is None:
        return SpacyTokenizer(lang, lowercase)
    opened = open_run(Path(run))
    return opened.src_tok if side == "src" else opened.tgt_tok


def tokenize_file(tok: Tokenizer, src: str, out: str, detok: bool = False) -> int:
    """Tokenize (or detokenize) `src` into `out` ('-': stdin/stdout); returns the line count.

    Empty lines stay empty lines. A file output appears only when complete."""
    lines = iter_lines(src)
    bar = tqdm(desc="detokenize" if detok else "tokenize", unit=" lines", disable=None,
               file=sys.stderr)
    count = 0

    def write_all(handle) -> None:
        nonlocal count
        while chunk := list(itertools.islice(lines, CHUNK_LINES)):
            if detok:  # any text: whitespace separates tokens
                done = [tok.detokenize(line.split()) for line in chunk]
            else:
                done = [" ".join(tokens) for tokens in tok.tokenize_many(chunk)]
            handle.write("".join(line + "\n" for line in done))
            count += len(done)
            bar.update(len(done))

    write_output(out, write_all)
    bar.close()
    return count
