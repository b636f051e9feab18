"""`mt translate`: a file (or stdin) through a Translator, one output line per input line (or
the n-best format, or one JSON object per input line). Typed at a terminal, each line is
translated as soon as it is entered."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from tqdm import tqdm

from mt.commands import jsonl_input
from mt.commands.formats import Screen, formatted
from mt.commands.heatmap import Pictures, translate_with_attention
from mt.commands.options import TranslateOptions
from mt.commands.output import check_input_path, check_output_path, write_output
from mt.compatibility import first_clash
from mt.errors import ConfigError, DataError, UsageError
from mt.glossary import Glossary
from mt.log import info, warn
from mt.records import lists
from mt.runs import Paths, as_paths, open_runs
from mt.textio import iter_lines

# `mt translate --format`, what is written: html is `--doc-format html` by another name
OUTPUT_FORMATS = ("text", "jsonl", "html")
INPUT_FORMATS = ("text", "jsonl")  # `mt translate --input-format`; jsonl: records (jsonl_input)
PROMPT = "> "  # on stderr, before each line typed at a terminal


def translate(runs: Paths, src: str, out: str, options: TranslateOptions,
              pictures: Pictures | None = None) -> int:
    """`mt translate`: translate_file, or with pictures translate_with_attention; the options
    that cannot go together are a UsageError first. Returns the lines written."""
    nbest = options.given("decode.nbest")
    runs = as_paths(runs)
    whole = options.doc_format is not None or options.output_format == "html"
    if options.decode.get("confidence") and (options.output_format != "jsonl"
                                             or options.documents):
        # decoding still records it (a damaged calibration is still refused), for nothing
        warn("--confidence: only --format jsonl of lines shows it; this output leaves it out "
             "(docs/confidence.md)")
    if options.input_format == "jsonl":
        refuse("jsonl_input", "--input-format jsonl", {
            "prefix": ("--prefix (give each record its \"prefix\")", options.prefix is not None),
            "attention": ("--attention", pictures is not None),
            "document": ("a whole document (--doc-format, --format html)", whole)})
    if options.min_confidence is not None:
        refuse("min_confidence", "--min-confidence", {
            "nbest": ("--nbest", nbest), "workers": ("--workers", options.workers > 1),
            "ensemble": ("an ensemble", len(runs) > 1),
            "align": ("--align", options.given("decode.align")),
            "attention": ("--attention", pictures is not None),
            "document": ("a document option (--split-sentences, --keep, --doc-format, "
                         "--format html)", options.documents)})
    if pictures is not None:
        refuse("attention", "--attention", {
            "nbest": ("--nbest", nbest),
            "output_format": (f"--format {options.output_format}",
                              options.output_format != "text"),
            "ensemble": ("an ensemble", len(runs) > 1),
            "prefix": ("--prefix", options.prefix is not None),
            "glossary": ("--glossary", options.glossary is not None),
            "split": ("--split-sentences", options.split), "keep": ("--keep", bool(options.keep)),
            "doc_format": ("--doc-format", options.doc_format is not None),
            "engine": (f"--engine {options.engine}", options.engine != "mt")})
        return translate_with_attention(runs[0], src, out, pictures, options)
    if options.documents:
        from mt.commands.documents import translate_documents
        from mt.document.placeholders import compile_keep

        what = ("--format html" if options.output_format == "html" else "--doc-format"
                if options.doc_format else "--split-sentences")
        refuse("documents", what, {"nbest": ("--nbest", nbest),
                                   "prefix": ("--prefix", options.prefix is not None),
                                   "workers": ("--workers", options.workers > 1)})
        compile_keep(options.keep)  # a bad pattern: a UsageError before any work
        return translate_documents(runs, src, out, options, prompted)
    refuse("workers", "--workers", {"engine": (f"--engine {options.engine}",
                                               options.workers > 1 and options.engine != "mt")})
    if src != "-" and options.input_format == "text":
        from mt.document import format_of_path

        if (found := format_of_path(src)) not in (None, "text"):  # a file with markup
            warn(f"{src}: translated line by line, markup and all; --doc-format auto "
                 f"translates it as a {found} document (docs/documents.md)")
    return translate_file(runs, src, out, options, nbest)


def translate_file(run_path: Paths, src: str, out: str,
                   options: TranslateOptions = TranslateOptions(),
                   nbest: bool = False) -> int:
    """Translate src to out ('-': stdin/stdout; a file output appears only when complete) with
    a Translator made by options; run_path: one run, or several: an ensemble (mt.ensemble).

    In the text format, the n-best format (`mt.records.format_nbest`) is written when nbest is
    set or decode.nbest or decode.samples is > 1 (mt.records.lists). With options.workers > 1
    processes translate chunks of the input (mt.commands.parallel); input typed at a terminal
    is translated here, a line at a time. With --input-format jsonl each line is a record, its
    own glossary and prefix beside its text (mt.commands.jsonl_input).
    """
    check_input_path(src)
    check_output_path(out)
    glossary = options.load_glossary()
    prefixes = None
    if options.prefix is not None:
        check_prefix_file(options.prefix, src)
        prefixes = iter_lines(options.prefix)
    screen = None
    interactive = src == "-" and sys.stdin.isatty()
    lines = prompted(iter_lines(src)) if interactive else iter_lines(src)
    glossaries, own = None, False  # with jsonl input: each line's glossary
    if options.input_format == "jsonl":
        own = jsonl_input.check(src)  # a bad record is an error before the model loads
        lines, prefixes, glossaries = jsonl_input.columns(
            jsonl_input.records(lines, "stdin" if src == "-" else src))
    if options.workers > 1 and not interactive:
        from mt.commands.parallel import parallel_formatted

        # The workers load the model; this process only checks the run and reads its config.
        decode = options.decoding(open_runs(run_path, options.overrides)[0].cfg.decode)
        chunks = parallel_formatted(run_path, options, lines, lists(decode, nbest), prefixes,
                                    glossary, glossaries)
    else:
        # someone typing: answer each line, not each chunk of them
        more = {} if options.min_confidence is None else {"confidence": True}
        translator = options.load(run_path, chunk_lines=1 if interactive else None, **more)
        if more:
            screen = Screen(options.min_confidence)
            if translator.calibration is None:
                raise ConfigError(f"--min-confidence: {translator.run.checkpoint} has no "
                                  "calibration; run mt calibrate RUN --src FILE --ref FILE "
                                  "(a held-out set) first")
        if own:  # records' glossaries refused now (beam 1, CTranslate2), before any work
            translator.matcher(glossary or Glossary(()))
        chunks = ([text] for text in formatted(translator, lines, options.output_format,
                                               lists(translator.decoding, nbest),
                                               prefixes=prefixes, glossary=glossary,
                                               glossaries=glossaries, screen=screen))
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
    if screen is not None:
        info(f"--min-confidence {screen.threshold:g}: {screen.rejected} of {count} line(s) "
             "below it, written empty")
    return count


def refuse(subject: str, option: str, given: dict[str, tuple[str, bool]]) -> None:
    """A UsageError naming the first of what option (mt.compatibility.NOT_WITH's subject)
    cannot go with that is given: given maps each name to its words here and whether it is."""
    clash = first_clash(subject, {name: on for name, (_, on) in given.items()})
    if clash is not None:
        raise UsageError("translate", f"'{option}'", f"not with {given[clash][0]}")


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
