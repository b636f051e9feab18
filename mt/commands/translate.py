"""`mt translate`: a file (or stdin) through a Translator, one output line per input line (or
the n-best format)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from mt.commands.output import check_input_path, check_output_path, write_output
from mt.textio import iter_lines
from mt.translator import format_nbest, open_translator


def translate_file(run_path: Path, src: str, out: str, device: str = "cpu",
                   overrides: Sequence[str] = (), nbest: bool = False, search: str = "mt"
                   ) -> int:
    """`mt translate`: '-' means stdin/stdout. A file output appears only when complete.

    overrides: `key=value` items over the run's saved config (`--set` and the decoding
    options). search: mt or ctranslate2 (mt.translator.SEARCHES). The n-best format
    (`format_nbest`) is written when `nbest` is set or decode.nbest or decode.samples is > 1.
    """
    check_input_path(src)
    check_output_path(out)
    translator = open_translator(run_path, search, device, overrides)
    nbest = nbest or translator.decode_cfg.nbest > 1 or translator.decode_cfg.samples > 1
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
