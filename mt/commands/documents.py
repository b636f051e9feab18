"""`mt translate --split-sentences`, `--keep`, `--doc-format` and `--format html`: text that is
not one sentence a line, through mt.document. Plain text stays a line in, a line out (each line
a paragraph, split into sentences); a document (HTML, Markdown, subtitles, a text file) is read
whole and written whole in its format, only when complete."""

from __future__ import annotations

import collections
import itertools
import json
import sys
from collections.abc import Callable, Iterator

from mt.commands import jsonl_input
from mt.commands.options import TranslateOptions
from mt.commands.output import (
    check_binary_output,
    check_input_path,
    check_output_path,
    write_binary_output,
    write_output,
)
from mt.document import (
    DocumentTranslation,
    decode_text,
    document_format,
    format_of_path,
    translate_document,
    translate_lines,
)
from mt.document.formats import extensions
from mt.errors import UsageError
from mt.glossary import Glossary
from mt.log import warn
from mt.runs import Paths
from mt.textio import iter_lines, read_error


def input_format(options: TranslateOptions, src: str) -> str | None:
    """The document format (mt.document.FORMATS) the input is read in whole, or None: line by
    line. `--format html` is `--doc-format html` by another name."""
    if options.doc_format == "auto":
        format = None if src == "-" else format_of_path(src)
        if format is None:
            known = ", ".join(extensions())
            raise UsageError("translate", "'--doc-format'", f"auto: {src} has no extension "
                             f"of a document format ({known}); name the format")
        return format
    if options.doc_format:
        return document_format(options.doc_format).name
    return "html" if options.output_format == "html" else None


def translate_documents(runs: Paths, src: str, out: str, options: TranslateOptions,
                        prompted: Callable[[Iterator[str]], Iterator[str]]) -> int:
    """Translate src to out ('-': stdin/stdout): HTML whole, else line by line (typed at a
    terminal: each line as it is entered, asked for by prompted). Returns the lines (HTML:
    documents) written."""
    check_input_path(src)
    check_output_path(out)
    format = input_format(options, src)
    glossary = options.load_glossary()  # a bad file is an error before any work
    if format is not None:
        if document_format(format).binary:
            check_binary_output(out, f"a .{format}")
        text = read_document(src, format)
        document_format(format).parse(text, src)  # what cannot be read: before the model
        translator = options.load(runs)
        translator.matcher(glossary)  # refused now (greedy, CTranslate2), before any work
        done = translate_document(translator, text, format, options.keep, name=src,
                                  glossary=glossary)
        translator.report()
        for note in dict.fromkeys(done.notes):
            warn(f"{src}: malformed HTML, translated best-effort: {note}")
        report_cut(done.cut)
        if done.data is not None:
            write_binary_output(out, done.data)
        else:
            write_output(out, lambda f: f.write(done.text))
        return 1
    interactive = src == "-" and sys.stdin.isatty()
    jsonl = options.input_format == "jsonl"
    own = jsonl and jsonl_input.check(src, False)  # a bad record: an error before the model
    translator = options.load(runs, chunk_lines=1 if interactive else None)
    translator.matcher(glossary or (Glossary(()) if own else None))  # refused now
    count, cut = 0, 0
    sources: collections.deque[str] = collections.deque()  # read, not yet written
    glossaries: collections.deque[Glossary | None] = collections.deque()  # jsonl records'

    def read() -> Iterator[str]:
        lines = prompted(iter_lines(src)) if interactive else iter_lines(src)
        if not jsonl:
            yield from (sources.append(line) or line for line in lines)
            return
        for r in jsonl_input.records(lines, "stdin" if src == "-" else src, False):
            sources.append(r.src)
            glossaries.append(r.glossary)
            yield r.src

    def write_all(handle) -> None:
        nonlocal count, cut
        for done in translate_lines(translator, read(), options.keep, glossary=glossary,
                                    glossaries=(glossaries.popleft() for _ in itertools.count())
                                    if jsonl else None):
            line = sources.popleft()
            handle.write(record(line, done) if options.output_format == "jsonl"
                         else done.text + "\n")
            count, cut = count + 1, cut + done.cut

    write_output(out, write_all)
    translator.report()
    report_cut(cut)
    return count


def record(line: str, done: DocumentTranslation) -> str:
    """One JSON line: {"src", "text", "sentences": [{"src", "text"}], "cut": N}, N the
    sentences cut to fit the model (0: none)."""
    return json.dumps({"src": line, "text": done.text,
                       "sentences": [{"src": s, "text": t.text} for s, t in done.sentences],
                       "cut": done.cut}) + "\n"


def report_cut(cut: int) -> None:
    if cut:
        warn(f"{cut} sentence piece(s) come from sentences longer than model.max_positions, "
             "cut at a clause boundary (docs/documents.md)")


def read_document(src: str, format: str = "text") -> str | bytes:
    """A whole document: as text (UTF-8, not binary; a DataError in one line otherwise), or
    a binary format's bytes."""
    try:
        data = sys.stdin.buffer.read() if src == "-" else open(src, "rb").read()
    except OSError as e:
        raise read_error(e, src) from None
    return data if document_format(format).binary else decode_text(data, src)
