"""`mt translate`: a file (or stdin) through a Translator, one output line per input line (or
the n-best format, or one JSON object per input line). Typed at a terminal, each line is
translated as soon as it is entered."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

from tqdm import tqdm

from mt.commands.formats import formatted
from mt.commands.output import check_input_path, check_output_path, write_output
from mt.errors import DataError
from mt.textio import iter_lines
from mt.threads import translation_streams
from mt.translator import Paths, Translator, open_runs

FORMATS = ("text", "jsonl")  # `mt translate --format`
PROMPT = "> "  # on stderr, before each line typed at a terminal


def translate_file(run_path: Paths, src: str, out: str, device: str = "cpu",
                   overrides: Sequence[str] = (), nbest: bool = False, search: str = "mt",
                   output_format: str = "text", workers: int = 1, prefix: str | None = None,
                   threads: int = 0) -> int:
    """`mt translate`: '-' means stdin/stdout. A file output appears only when complete.
    run_path: one run, or several: an ensemble (mt.ensemble).

    overrides: `key=value` items over the run's saved config (`--set` and the decoding
    options). search: mt or ctranslate2 (mt.translator.SEARCHES). output_format: text, where
    the n-best format (`format_nbest`) is written when `nbest` is set or decode.nbest or
    decode.samples is > 1; or jsonl (mt.commands.formats). workers: processes translating
    chunks of the input (mt.commands.parallel); 1 translates here, as does a terminal's input.
    prefix: a file of target prefixes, one per input line (empty: none). threads: torch
    threads of each process (0: mt.threads.translation_streams; with workers, the cores shared
    out).
    """
    check_input_path(src)
    check_output_path(out)
    prefixes = None
    if prefix is not None:
        check_prefix_file(prefix, src)
        prefixes = iter_lines(prefix)
    lines = iter_lines(src)
    interactive = src == "-" and sys.stdin.isatty()
    if workers > 1 and not interactive:
        from mt.commands.parallel import parallel_formatted

        # The workers load the model; this process only checks the run and reads its config.
        decode = open_runs(run_path, overrides)[0].cfg.decode
        nbest = nbest or decode.nbest > 1 or decode.samples > 1
        chunks = parallel_formatted(run_path, device, search, overrides, lines, output_format,
                                    nbest, workers, prefixes, threads)
    else:
        streams = translation_streams(threads, device, search)
        translator = Translator.load(run_path, device, search, overrides)
        translator.streams = streams
        nbest = nbest or translator.decode_cfg.nbest > 1 or translator.decode_cfg.samples > 1
        if interactive:  # someone typing: answer each line, not each chunk of them
            translator.chunk_lines = 1
            lines = prompted(lines)
        chunks = ([text] for text in formatted(translator, lines, output_format, nbest,
                                               prefixes=prefixes))
    bar = tqdm(desc="translate", unit=" lines", disable=interactive or None, file=sys.stderr)
    count = 0

    def write_all(handle) -> None:
        nonlocal count
        for texts in chunks:
            handle.writelines(texts)  # stdout is flushed line by line (write_output)
            count += len(texts)
            bar.update(len(texts))

    write_output(out, write_all)
    bar.close()
    return count


def check_prefix_file(prefix: str, src: str) -> None:
    """A missing prefix file, or one whose line count is not the input file's, is a DataError
    before any work; from stdin, the counts are compared as the lines come (Translator)."""
    check_input_path(prefix)
    if prefix == "-" or src == "-":
        if prefix == src:
            raise DataError("--prefix -: the input is read from stdin; give a prefix file")
        return
    counts = [sum(1 for _ in iter_lines(p, warn_invalid=False)) for p in (prefix, src)]
    if counts[0] != counts[1]:
        raise DataError(f"--prefix {prefix}: {counts[0]} line(s), the input {src} {counts[1]}; "
                        "give one prefix line (empty for none) per input line")


def prompted(lines: Iterator[str]) -> Iterator[str]:
    """The lines typed at a terminal, each asked for with PROMPT on stderr."""
    while True:
        print(PROMPT, end="", file=sys.stderr, flush=True)
        line = next(lines, None)
        if line is None:  # Ctrl-D: end the prompt's line, so the shell's starts on its own
            print(file=sys.stderr)
            return
        yield line
