"""What the commands that translate (`mt translate`, `eval`, `serve`) take from the command
line besides their files: parsed once by mt.cli into one record."""

from __future__ import annotations

from dataclasses import dataclass, field

from mt.config import DecodeConfig, override_keys, with_decode
from mt.glossary import Glossary
from mt.runs import Paths
from mt.translator import Translator


@dataclass(frozen=True, kw_only=True)
class TranslateOptions:
    device: str = "cpu"
    engine: str = "mt"  # mt.decoding.engines.ENGINES
    # `key=value` items over each run's saved config (--set), as mt.config.override reads them
    overrides: tuple[str, ...] = ()
    # the decoding options given (`--beam 5`: {"beam": 5}), DecodeConfig fields over the
    # run's decode section with its overrides
    decode: dict[str, object] = field(default_factory=dict)
    threads: int = 0  # torch threads of each process; 0: mt.threads.translation_streams
    workers: int = 1  # processes translating chunks of the input (mt.commands.parallel)
    output_format: str = "text"  # mt.commands.translate.OUTPUT_FORMATS
    prefix: str | None = None  # a file of target prefixes, one per input line
    glossary: str | None = None  # a glossary file (TSV) whose terms the translations keep
    split: bool = False  # --split-sentences: each line a paragraph (mt.document)
    keep: tuple[str, ...] = ()  # --keep: patterns left untranslated (mt.document.placeholders)
    doc_format: str | None = None  # --doc-format: the input is one document (mt.document)
    min_confidence: float | None = None  # --min-confidence: lines below it written empty
    input_format: str = "text"  # --input-format: text lines, or jsonl records (jsonl_input)

    def load_glossary(self) -> Glossary | None:
        """The glossary file, read and checked (a DataError before any work), or None."""
        return None if self.glossary is None else Glossary.load(self.glossary)

    @property
    def documents(self) -> bool:
        """Whether the input goes through mt.document: split, masked, or a whole document."""
        return (self.split or bool(self.keep) or self.output_format == "html"
                or self.doc_format is not None)

    def given(self, key: str) -> bool:
        """Whether the command line set this config key (`decode.nbest`)."""
        return key in override_keys(self.overrides) or key.removeprefix("decode.") in self.decode

    def decoding(self, run: DecodeConfig) -> DecodeConfig:
        """A run's decode section (with the overrides) with the decoding options given."""
        return with_decode(run, self.decode)

    def load(self, run_path: Paths, chunk_lines: int | None = None, **decode) -> Translator:
        """The Translator these options make, for this process (its threads set); decode:
        more decoding options, over those given."""
        return Translator.load(run_path, self.device, self.engine, self.overrides,
                               threads=self.threads, chunk_lines=chunk_lines,
                               **{**self.decode, **decode})
