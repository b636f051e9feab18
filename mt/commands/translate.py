"""`mt translate`: a file (or stdin) through a Translator, one output line per input line (or
the n-best format)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from mt.checkpoint import load_run
from mt.commands.output import check_input_path, check_output_path, write_output
from mt.config import DecodeConfig, override
from mt.textio import iter_lines
from mt.translator import Translator, format_nbest


def open_run(path: Path, engine: str = "mt", device: str = "cpu"):
    """The run to translate with and the engine's search (None: mt's own decoders).

    For ctranslate2, path is an `mt export` directory, or a run exported on the fly.
    """
    if engine == "mt":
        return load_run(path, device), None
    from mt.ct2.search import open_ctranslate2

    return open_ctranslate2(path, device)


def translate_file(run_path: Path, src: str, out: str, decode: DecodeConfig | None = None,
                   device: str = "cpu", decode_set: Sequence[str] = (), nbest: bool = False,
                   engine: str = "mt") -> int:
    """`mt translate`: '-' means stdin/stdout. A file output appears only when complete.

    decode_set: `decode.key=value` overrides of the run's saved config (command-line options).
    The n-best format (`format_nbest`) is written when `nbest` is set or decode.nbest > 1.
    """
    check_input_path(src)
    check_output_path(out)
    run, search = open_run(run_path, engine, device)
    decode = decode or override(run.cfg, decode_set, "command line").decode
    translator = Translator(run, decode, device, search)
    nbest = nbest or decode.nbest > 1
    lines = iter_lines(src)
    bar = tqdm(desc="translate", unit=" lines", disable=None, file=sys.stderr)
    count = 0

    def write_all(handle) -> None:
        nonlocal count
        if nbest:
            for i, translations in enumerate(translator.translate_nbest_stream(lines)):
                handle.write(format_nbest(i, translations))
                count += 1
                bar.update()
            return
        for hyp in translator.translate_stream(lines):
            handle.write(hyp + "\n")
            count += 1
            bar.update()

    write_output(out, write_all)
    bar.close()
    return count
