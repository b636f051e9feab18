"""Gettext PO and POT files: entries that know their place in the file's text.

polib reads them, not translate-toolkit: polib is one pure-Python module made for PO alone,
and it records the line each entry begins on, which is what splicing needs; translate-toolkit
reads PO, XLIFF, TMX and thirty more formats, a larger dependency whose PO units carry no
position. An Entry is polib's entry with its place in the text: where it begins, where its
msgstr lines are and where the next entry begins. A writer changes an entry by splicing new
msgstr lines (and a comment and a flag) into those places; every other byte of the file comes
back as it was (`rewrite`, `with_header`). polib is the `l10n` extra, imported when a PO file
is read (a .mo file is refused without it).

Plural forms: a file's own `Plural-Forms` header, else the target language's from Babel
(`for_language`; babel is the `l10n` extra), evaluated by Python's gettext.
"""

from __future__ import annotations

import gettext
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from mt.errors import ConfigError, DataError

if TYPE_CHECKING:
    import polib

# A compiled catalog's first four bytes, either byte order (GNU gettext's MO format)
MO_MAGIC = (b"\xde\x12\x04\x95", b"\x95\x04\x12\xde")
CHARSET = re.compile(rb"charset=([\w.:-]+)", re.I)
SYNTAX = re.compile(r"\(line (\d+)\)(?::\s*(.*))?")
NUMBERS = range(1001)  # the counts a plural form is sampled on


def is_mo(data: bytes) -> bool:
    return data[:4] in MO_MAGIC


def refuse_mo(data: bytes, name: str) -> None:
    """A DataError for a compiled .mo file where a PO file is expected."""
    if is_mo(data):
        raise DataError(f"{name}: a compiled gettext catalog (.mo), not a PO file; turn it back "
                        f"into one with `msgunfmt {name} -o FILE.po`")


@dataclass
class Entry:
    """One entry of a PO file: what polib read (`po`: msgctxt, msgid, msgid_plural, msgstr,
    msgstr_plural, flags, obsolete) and where it is in the text, in characters: [start,
    msgstr) its comments, flags, msgctxt and msgid lines; [msgstr, after) its msgstr lines;
    [after, end) what follows them up to the next entry (blank lines)."""

    po: polib.POEntry
    line: int  # the line it begins on, from 1
    start: int
    msgstr: int
    after: int
    end: int

    @property
    def translated(self) -> bool:
        """Whether it has a translation (fuzzy or not): some msgstr not empty."""
        return any(self.po.msgstr_plural.values()) if self.po.msgid_plural \
            else bool(self.po.msgstr)


@dataclass
class Catalog:
    """A PO file read: its text, its header entry (msgid "", None if it has none) and its
    other entries in order, obsolete ones too."""

    text: str
    name: str
    header: Entry | None
    entries: list[Entry]
    metadata: dict[str, str] = field(default_factory=dict)

    @cached_property
    def newline(self) -> str:
        """The line ending its lines have ("\\r\\n" or "\\n"), for lines written into it."""
        first = self.text.split("\n", 1)[0]
        return "\r\n" if first.endswith("\r") else "\n"


@cache
def _polib():
    """polib (the `l10n` extra), and its file that keeps the header entry polib takes out of
    the entries; a ConfigError without it."""
    try:
        import polib
    except ImportError:
        raise ConfigError("PO files need polib: pip install 'mt[l10n]'") from None

    class File(polib.POFile):
        header_entry: polib.POEntry | None = None

        def remove(self, entry):
            self.header_entry = entry
            super().remove(entry)

    return polib, File


def decode(data: bytes, name: str) -> str:
    """A PO file's bytes as text, in the charset its header names (UTF-8 if none); a .mo file
    or bytes not in that charset are a DataError."""
    refuse_mo(data, name)
    found = CHARSET.search(data[:4096])
    charset = found.group(1).decode("ascii") if found else "utf-8"
    if charset.upper() == "CHARSET":  # a POT's placeholder: its text is ASCII or UTF-8
        charset = "utf-8"
    try:
        return data.decode(charset).removeprefix("\ufeff")
    except LookupError:
        raise DataError(f"{name}: charset {charset!r} in its header is not one Python knows; "
                        "convert it with `msgconv --to-code=UTF-8`") from None
    except UnicodeDecodeError as e:
        raise DataError(f"{name}: not {charset}, as its header says (byte {e.start}); convert "
                        "it with `msgconv --to-code=UTF-8`") from None


def read_file(path: Path) -> Catalog:
    """The PO file at path, read (decode, read)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})") from None
    return read(decode(data, str(path)), str(path))


def read(text: str, name: str) -> Catalog:
    """text, a PO file's, as a Catalog; a syntax error is a DataError naming name and line."""
    # polib opens its argument as a path when a file of that name exists: a document's text
    # must never be read as one (a server's request holding "/etc/passwd"). No file's name
    # ends in a line break, and polib skips blank lines.
    polib, klass = _polib()
    try:
        po = polib.pofile(text + "\n", klass=klass, wrapwidth=0)
    except (OSError, ValueError, KeyError, IndexError) as e:
        found = SYNTAX.search(str(e))
        where = f"{name}:{found.group(1)}" if found else name
        why = (found.group(2) if found else "") or "not a PO entry line"
        raise DataError(f"{where}: PO syntax error ({why}); check the quotes and keywords "
                        "there (`msgfmt --check` says more)") from None
    lines = text.splitlines(keepends=True)  # as polib numbers them
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    found = sorted([*po, *([po.header_entry] if po.header_entry else [])],
                   key=lambda e: e.linenum)
    starts = [max(e.linenum, 1) - 1 for e in found] + [len(lines)]
    placed = [_place(e, lines, offsets, a, b) for e, a, b in zip(found, starts, starts[1:])]
    header = next((p for p in placed if p.po is po.header_entry), None)
    return Catalog(text, name, header, [p for p in placed if p is not header],
                   dict(po.metadata))


def _place(e: polib.POEntry, lines: list[str], offsets: list[int], a: int, b: int) -> Entry:
    """Entry e, whose lines are [a, b): where its msgstr lines are among them."""
    first = next((i for i in range(a, b) if _keyword(lines[i]).startswith("msgstr")), b)
    last = first
    while last < b and (_keyword(lines[last]).startswith(("msgstr", '"'))):
        last += 1
    return Entry(e, a + 1, offsets[a], offsets[first], offsets[last], offsets[b])


def _keyword(line: str) -> str:
    """A line without its leading whitespace and an obsolete entry's `#~` mark."""
    line = line.strip()
    return line[2:].lstrip() if line.startswith("#~") else line


# Writing


def quoted(keyword: str, text: str, newline: str = "\n") -> str:
    """`keyword "text"` as gettext writes it: a text with line breaks inside as `keyword ""`
    and one quoted line per line."""
    pieces = text.splitlines(keepends=True) if "\n" in text.rstrip("\n") else [text]
    head = [f'{keyword} ""'] if len(pieces) > 1 else []
    body = [f'"{_polib()[0].escape(p)}"' for p in pieces]
    body[0] = body[0] if head else f"{keyword} {body[0]}"
    return newline.join([*head, *body]) + newline


def rewrite(catalog: Catalog, entry: Entry, msgstrs: Sequence[str], comment: str = "",
            fuzzy: bool = False) -> str:
    """entry's text with new msgstrs (one: msgstr; several: msgstr[0], msgstr[1], ...), a
    translator comment (`# comment` first; an older one with the same first word replaced)
    and the `fuzzy` flag added. Its other lines come back as they were."""
    nl = catalog.newline
    head = catalog.text[entry.start:entry.msgstr].splitlines(keepends=True)
    if comment:
        mark = "# " + comment.split()[0] + " "
        head = [f"# {comment}{nl}", *(x for x in head if not x.startswith(mark))]
    if fuzzy and "fuzzy" not in entry.po.flags:
        flags = next((i for i, x in enumerate(head) if x.startswith("#,")), None)
        if flags is not None:
            body = head[flags].rstrip("\r\n")
            head[flags] = f"{body}, fuzzy{head[flags][len(body):]}"
        else:
            at = next((i for i, x in enumerate(head) if not x.startswith(("# ", "#.", "#:"))
                       and x.strip() != "#"), len(head))
            head.insert(at, f"#, fuzzy{nl}")
    if entry.po.msgid_plural:
        new = "".join(quoted(f"msgstr[{i}]", s, nl) for i, s in enumerate(msgstrs))
    else:
        new = quoted("msgstr", msgstrs[0], nl)
    return "".join(head) + new + catalog.text[entry.after:entry.end]


def with_header(catalog: Catalog, fields: dict[str, str]) -> str:
    """The header entry's text with fields set (added at its end where missing); the header
    as it was if it has them all. No header: one made of fields, to go first."""
    if catalog.header is None:
        body = "".join(f"{k}: {v}\n" for k, v in fields.items())
        return quoted("msgid", "", catalog.newline) + quoted("msgstr", body, catalog.newline) \
            + catalog.newline
    h = catalog.header
    text = catalog.text[h.start:h.end]
    if all(catalog.metadata.get(k) == v for k, v in fields.items()):
        return text
    lines, missing = [], dict(fields)
    for line in h.po.msgstr.splitlines(keepends=True):
        key = line.split(":", 1)[0]
        lines.append(f"{key}: {missing.pop(key)}\n" if key in missing else line)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    lines += [f"{k}: {v}\n" for k, v in missing.items()]
    return rewrite(catalog, h, ["".join(lines)])


# Plural forms


@dataclass(frozen=True)
class PluralForms:
    """A language's plural forms: how many, and the C expression that picks one for a
    count n (the `Plural-Forms` header's nplurals and plural)."""

    nplurals: int
    plural: str

    def __str__(self) -> str:
        return f"nplurals={self.nplurals}; plural={self.plural};"

    @cached_property
    def counts(self) -> list[list[int]]:
        """Per form, the counts in NUMBERS it is used for."""
        pick = gettext.c2py(self.plural)
        found: list[list[int]] = [[] for _ in range(self.nplurals)]
        for n in NUMBERS:
            k = pick(n)
            if 0 <= k < self.nplurals:
                found[k].append(n)
        return found

    @property
    def singular(self) -> int | None:
        """The form used for n = 1 alone (German's 0), or None (Japanese, Russian: theirs is
        also used for 21, French's for 0)."""
        return next((k for k, ns in enumerate(self.counts) if ns == [1]), None)

    @property
    def one(self) -> int:
        """The form of n = 1."""
        return next(k for k, ns in enumerate(self.counts) if 1 in ns)

    @property
    def other(self) -> int:
        """The form most counts take: the plain plural (German's 1, Russian's 2)."""
        return max(range(self.nplurals), key=lambda k: len(self.counts[k]))


GERMANIC = PluralForms(2, "(n != 1)")  # what gettext assumes of a file without the header


def parse_plural_forms(header: str, name: str = "PO file") -> PluralForms:
    """A `Plural-Forms` header's value; a DataError for one that is not nplurals=N;
    plural=EXPR."""
    found = re.fullmatch(r"\s*nplurals\s*=\s*(\d+)\s*;\s*plural\s*=\s*(.+?)\s*;?\s*", header)
    forms = found and PluralForms(int(found.group(1)), found.group(2))
    try:
        if not forms or forms.nplurals < 1:
            raise ValueError(header)
        forms.counts  # noqa: B018 (a bad expression fails here, once)
    except (ValueError, SyntaxError):
        raise DataError(f"{name}: a Plural-Forms header {header!r} mt cannot read; expected "
                        "nplurals=N; plural=EXPRESSION;") from None
    return forms


def plural_forms(catalog: Catalog) -> PluralForms:
    """The file's Plural-Forms, or gettext's default (two, n != 1) without one."""
    given = catalog.metadata.get("Plural-Forms")
    return parse_plural_forms(given, catalog.name) if given else GERMANIC


def for_language(lang: str) -> PluralForms:
    """A language's plural forms as Babel (CLDR) gives them; a ConfigError without Babel."""
    try:
        from babel.messages.plurals import get_plural
    except ImportError:
        raise ConfigError("PO files for a language need Babel for its plural forms: pip "
                          "install 'mt[l10n]'") from None
    found = get_plural(lang.replace("-", "_"))
    return PluralForms(found.num_plurals, found.plural_expr)
