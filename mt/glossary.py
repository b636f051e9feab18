"""A glossary: source terms and the target term each must be translated as, read from a TSV
file (`source term<TAB>target term` a line, `#` comments) or given as pairs; and which of its
entries are active for a line.

An entry is active for a line when its source term occurs in the line as whole tokens of the
run's source tokenizer (optionally ignoring case). Occurrences that overlap are resolved longest
first (in tokens; a tie goes to the one that starts first, then to the entry given first): of
"New York" and "York" in "New York City", only "New York" is active. Each active entry's
target term, in the target tokenizer's tokens, is what the search must hold (mt.decoding.lexical),
in the order the source terms occur.
"""

from __future__ import annotations

import codecs
import copy
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mt.errors import DataError, FileSystemError, os_error_message
from mt.log import info
from mt.tokenizers import Tokenizer
from mt.vocab import UNK, Vocab

MAX_TERM_CHARS = 200  # a term longer than this is a mistake (a sentence in the wrong column)
EXTENDED_CACHE = 64  # glossaries of lines (Matcher.extended) kept tokenized


@dataclass(frozen=True)
class Glossary:
    """Entries (source term, target term), in the order given; no source term twice, but in a
    training lexicon (load(alternatives=True), for data.terminology)."""

    entries: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, pairs: Iterable[Sequence[str]], where: str = "glossary") -> Glossary:
        """The glossary of (source, target) pairs; a DataError naming `where` and the entry
        for an entry that is not two strings, an empty side, a term over MAX_TERM_CHARS
        characters, or a source term given again with another target."""
        if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Iterable):
            raise DataError(f"{where}: {_shown(pairs)} is not a list of pairs; give "
                            "[[source term, target term], ...]")
        entries: dict[str, str] = {}
        for n, pair in enumerate(pairs, 1):
            entries.update([_checked(pair, f"{where}: entry {n}", entries)])
        return cls(tuple(entries.items()))

    @classmethod
    def load(cls, path: str | Path, alternatives: bool = False) -> Glossary:
        """A TSV glossary file: one `source<TAB>target` a line, UTF-8; blank lines and lines
        starting with `#` are skipped. A DataError names the file and line of the first
        problem (a missing file, invalid UTF-8, not one tab, and as for `of`). alternatives:
        a source term may be given several targets (each entry kept once, in file order)."""
        try:
            # a byte-order mark (Windows editors write one) is not part of the first term
            data = Path(path).read_bytes().removeprefix(codecs.BOM_UTF8)
        except FileNotFoundError:
            raise DataError(f"{path}: glossary file not found; check the path") from None
        except IsADirectoryError:
            raise DataError(f"{path}: a directory; give a glossary file (TSV)") from None
        except OSError as e:
            raise FileSystemError(os_error_message(e, path)) from None
        entries: dict[str, str] = {}
        pairs: dict[tuple[str, str], None] = {}
        for n, raw in enumerate(data.split(b"\n"), 1):
            try:
                line = raw.decode("utf-8").rstrip("\r")
            except UnicodeDecodeError:
                raise DataError(f"{path}:{n}: invalid UTF-8; save the glossary as UTF-8"
                                ) from None
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            pair = line.split("\t")
            if len(pair) != 2:
                raise DataError(f"{path}:{n}: {len(pair) - 1} tabs; give `source term<TAB>"
                                "target term`, one tab a line")
            src, tgt = _checked(pair, f"{path}:{n}", {} if alternatives else entries)
            entries[src] = tgt
            pairs[src, tgt] = None
        return cls(tuple(pairs))

    def __len__(self) -> int:
        return len(self.entries)


def _checked(pair: Sequence[str], at: str, seen: dict[str, str]) -> tuple[str, str]:
    """One entry, its sides stripped, or the DataError of its first problem."""
    # null, a number, a string: from JSON (a request, a jsonl record) or the Python API
    if (isinstance(pair, str) or not isinstance(pair, Sequence) or len(pair) != 2
            or not all(isinstance(s, str) for s in pair)):
        raise DataError(f"{at}: an entry is two strings, [source term, target term], not "
                        f"{_shown(pair)}")
    src, tgt = (s.strip() for s in pair)
    for side, term in (("source", src), ("target", tgt)):
        if not term:
            raise DataError(f"{at}: empty {side} term")
        if len(term) > MAX_TERM_CHARS:
            raise DataError(f"{at}: {side} term of {len(term)} characters; at most "
                            f"{MAX_TERM_CHARS}")
    if seen.get(src, tgt) != tgt:
        raise DataError(f"{at}: {src!r} again, as {tgt!r} (before: {seen[src]!r}); give one "
                        "target per source term")
    return src, tgt


def _shown(given: object) -> str:
    """An entry as an error shows it: as JSON (null, 1, ["a"]) where it is JSON, cut short."""
    try:
        text = json.dumps(given, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(given)
    return text if len(text) <= 60 else text[:57] + "..."


# what the Python API and the server take as a glossary
GlossaryLike = Glossary | str | Path | Iterable[Sequence[str]] | None


def as_glossary(given: GlossaryLike, where: str = "glossary") -> Glossary | None:
    """What the Python API and the server take as a glossary: a Glossary, a TSV file's path,
    or (source, target) pairs (where: how an error names them)."""
    if given is None or isinstance(given, Glossary):
        return given
    if isinstance(given, (str, Path)):
        return Glossary.load(given)
    return Glossary.of(given, where)


class TermIndex:
    """Terms (token sequences, of strings or ids) indexed by their first token, to find their
    occurrences in a line."""

    def __init__(self, terms: Sequence[Sequence]):
        self.by_first: dict = {}  # first token -> [(term's index, term)]
        for e, term in enumerate(terms):
            if term:
                self.by_first.setdefault(term[0], []).append((e, tuple(term)))

    def find(self, line: Sequence) -> list[tuple[int, int, int]]:
        """The occurrences kept in a line, as (start, stop, term's index), in line order:
        of overlapping ones the longest (in tokens), then the first to start, then the term
        given first."""
        found = [(-len(term), at, e) for at, tok in enumerate(line)
                 for e, term in self.by_first.get(tok, ())
                 if tuple(line[at:at + len(term)]) == term]
        taken = [False] * len(line)
        kept = []
        for length, at, e in sorted(found):  # longest first
            span = range(at, at - length)
            if not any(taken[i] for i in span):
                for i in span:
                    taken[i] = True
                kept.append((at, at - length, e))
        return sorted(kept)


class Matcher:
    """A glossary in a run's tokens: which entries are active for a tokenized line, and their
    target terms' tokens."""

    def __init__(self, glossary: Glossary, src_tok: Tokenizer, tgt_tok: Tokenizer,
                 tgt_vocab: Vocab, ignore_case: bool = False):
        self.glossary, self.ignore_case = glossary, ignore_case
        self._tools = src_tok, tgt_tok, tgt_vocab
        self._set(*self._tokenized(glossary.entries))
        self._extended: dict[Glossary, Matcher] = {}  # extended's, most recent last

    def _tokenized(self, entries: Sequence[tuple[str, str]]) -> tuple[list, list, list]:
        """The entries' source terms (as matched), target tokens and target ids."""
        src_tok, tgt_tok, tgt_vocab = self._tools
        sources = [self._key(t) for t in src_tok.tokenize_many([s for s, _ in entries])]
        target_tokens = tgt_tok.tokenize_many([t for _, t in entries])
        return sources, target_tokens, [tgt_vocab.encode(toks) for toks in target_tokens]

    def _set(self, sources: list, target_tokens: list, targets: list) -> None:
        self.sources, self.target_tokens, self.targets = sources, target_tokens, targets
        self.index = TermIndex(sources)
        # target terms with a token the vocabulary lacks (known without a search): held through
        # <unk> in its place (mt.unknowns writes the word), or by no output with decode.unk show
        self.unwritable = list(dict.fromkeys(
            t for (_, t), ids in zip(self.glossary.entries, targets) if UNK in ids))

    def extended(self, more: Glossary) -> Matcher:
        """This glossary with more's entries (a line's own): an entry of a source term this
        one has takes that entry's place (more's target wins), the others come after. Only
        more's terms are tokenized; the last EXTENDED_CACHE are kept for lines that repeat
        one."""
        if not more.entries:
            return self
        if more in self._extended:
            self._extended[more] = self._extended.pop(more)  # most recent last
            return self._extended[more]
        at = {s: e for e, (s, _) in enumerate(self.glossary.entries)}
        entries = list(self.glossary.entries)
        parts = [list(x) for x in (self.sources, self.target_tokens, self.targets)]
        for pair, *tokenized in zip(more.entries, *self._tokenized(more.entries)):
            e = at.setdefault(pair[0], len(entries))
            if e == len(entries):
                entries.append(pair)
                for part, x in zip(parts, tokenized):
                    part.append(x)
            else:
                entries[e] = pair
                for part, x in zip(parts, tokenized):
                    part[e] = x
        made = copy.copy(self)
        made.glossary, made._extended = Glossary(tuple(entries)), {}
        made._set(*parts)
        self._extended[more] = made
        if len(self._extended) > EXTENDED_CACHE:
            del self._extended[next(iter(self._extended))]
        return made

    def terms(self, entries: list[int], placeholders: bool = True) -> list[list[int]]:
        """The target terms (ids) a search must hold for these entries, <unk> standing for a
        token the vocabulary lacks (mt.unknowns writes it); without placeholders, not those."""
        return [self.targets[e] for e in entries if placeholders or UNK not in self.targets[e]]

    def missing(self, entries: list[int], output: list[int], placeholders: bool = True
                ) -> list[str]:
        """The target terms of these entries that the output ids do not hold as whole tokens
        (placeholders: <unk> standing for a token the vocabulary lacks; else such a term is
        never held)."""
        return [self.glossary.entries[e][1] for e in entries
                if (UNK in self.targets[e] and not placeholders)
                or not occurrences(output, self.targets[e])]

    def _key(self, tokens: Sequence[str]) -> list[str]:
        return [t.casefold() for t in tokens] if self.ignore_case else list(tokens)

    def spans(self, tokens: Sequence[str]) -> list[tuple[int, int, int]]:
        """The source terms' occurrences in a line of source tokens: (start, stop, entry), in
        line order, overlaps resolved longest first (TermIndex.find)."""
        return self.index.find(self._key(tokens))

    def active(self, tokens: Sequence[str]) -> list[int]:
        """The entries active for a line of source tokens, in the order their source terms
        occur (each once, where it first occurs)."""
        return list(dict.fromkeys(e for _, _, e in self.spans(tokens)))


class Matchers:
    """Matchers in one run's tokens (its tokenizers and target vocabulary). The one of an empty
    glossary is kept (per ignore_case), so that the lines' own glossaries extend one Matcher,
    which keeps what it made of them (Matcher.extended)."""

    def __init__(self, src_tok: Tokenizer, tgt_tok: Tokenizer, tgt_vocab: Vocab):
        self._tools = src_tok, tgt_tok, tgt_vocab
        self._empty: dict[bool, Matcher] = {}  # of an empty glossary, by ignore_case
        self._warned: set[str] = set()  # target terms warn_unwritable named

    def of(self, glossary: Glossary, ignore_case: bool = False) -> Matcher:
        if glossary.entries:
            return self.warn_unwritable(Matcher(glossary, *self._tools, ignore_case))
        if ignore_case not in self._empty:
            self._empty[ignore_case] = Matcher(glossary, *self._tools, ignore_case)
        return self._empty[ignore_case]

    def warn_unwritable(self, matcher: Matcher) -> Matcher:
        """Warn, once per term, of the matcher's target terms that no output can hold, as soon
        as the glossary is read: the vocabulary, not a translation, decides it."""
        if new := [t for t in matcher.unwritable if t not in self._warned]:
            self._warned.update(new)
            info(f"glossary: {len(new)} target term(s) have a word the model's target "
                 f"vocabulary lacks, written where the search puts <unk> for it "
                 f"(decode.unk show: left out): {quoted(new)}")
        return matcher


def quoted(terms: Sequence[str], most: int = 5) -> str:
    """Terms for a message: the first few, quoted, and how many more."""
    shown = ", ".join(repr(t) for t in terms[:most])
    return shown + (f" and {len(terms) - most} more" if len(terms) > most else "")


def own_glossaries(glossaries: Iterable[GlossaryLike], start: int = 0) -> list[Glossary | None]:
    """Each line's own glossary (as_glossary; a bad one is a DataError naming `glossaries[i]`,
    i from start), or None."""
    return [as_glossary(g, f"glossaries[{i}]") for i, g in enumerate(glossaries, start)]


def per_line(matcher: Matcher | None, own: Sequence[Glossary | None]) -> list[Matcher | None]:
    """Each line's Matcher: matcher (the glossary of all lines) extended by the line's own
    glossary where it has entries (then matcher is not None)."""
    return [matcher.extended(g) if g else matcher for g in own]


def occurrences(tokens: Sequence, term: Sequence) -> list[int]:
    """Where term occurs in tokens, as whole tokens: every start."""
    n = len(term)
    return [i for i in range(len(tokens) - n + 1) if tuple(tokens[i:i + n]) == tuple(term)]
