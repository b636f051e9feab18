"""The translations of installed free software as a corpus: the gettext catalogues under
/usr/share/locale/LANG/LC_MESSAGES/*.mo (git, coreutils, GTK, PostgreSQL, ...), turned back
into PO text by GNU gettext's msgunfmt, read as (msgid, msgstr) pairs and split by whole
package. `mt data gettext` (mt.commands.data) writes them; docs/data.md#software-strings.

The rules, fixed before anything was measured on them:
- **Split.** A package (a .mo file's stem) falls in the split of its family, the stem without
  its digits (gtk20 and gtk30 -> gtk, iso_639-3 and iso_639_3 -> iso, initdb-15 -> initdb), so
  that two versions of one program never straddle splits: the SHA-1 of the family modulo 20,
  0 -> test, 1 -> val, anything else -> train.
- **Entries and plurals:** as the `po` corpus format reads a PO file (mt.corpus_formats.po):
  translated entries only, msgctxt dropped, a plural entry's msgid with the form of n = 1 and
  its msgid_plural with the form most counts take.
- **One pair a line.** A string may hold line breaks and tabs: in the plain files a backslash
  is written `\\\\`, a line feed `\\n`, a carriage return `\\r`, a tab `\\t`, a vertical tab
  `\\v` and a form feed `\\f` (as PO writes them), the other characters Python breaks lines at
  (U+001C-U+001E, U+0085, U+2028, U+2029) `\\uHHHH`; `unescape` restores them.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mt.corpus_formats.po import catalog_pairs
from mt.errors import ConfigError, DataError
from mt.l10n import po
from mt.l10n.format_strings import directives

SPLITS = ("train", "val", "test")
BUCKETS = 20  # the SHA-1's modulus: 1/20 of the families is test, 1/20 val
# A string's line breaks (every character str.splitlines breaks at) and tabs, escaped so that
# it is one line of a plain file; those C has no letter for as \uHHHH.
ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v", "\f": "\\f",
           **{c: f"\\u{ord(c):04x}" for c in "\x1c\x1d\x1e\x85\u2028\u2029"}}
_ESCAPE = re.compile("[" + re.escape("".join(ESCAPES)) + "]")
_UNESCAPE = re.compile(r"\\(?:[\\nrtvf]|u[0-9a-f]{4})")
_UNESCAPED = {v: k for k, v in ESCAPES.items()}
NEEDS_GETTEXT = ("reading .mo files needs GNU gettext's msgunfmt and msgconv: install gettext "
                 "(apt-get install gettext, brew install gettext)")

def placeholders(text: str) -> Counter:
    """The multiset of the format directives of a msgid or msgstr, as an entry with no format
    flag is read (a .mo keeps none): mt.l10n.format_strings."""
    return directives(text, ())


def family(package: str) -> str:
    """What a package's split is decided by: its name without digits, nor the `-`, `_` or `.`
    before them ("gtk30-properties" -> "gtk-properties", "libpq5-15" -> "libpq")."""
    return re.sub(r"[-_.]?\d+", "", package.lower())


def split_of(package: str) -> str:
    """train, val or test: the SHA-1 of the package's family modulo 20 (0 test, 1 val)."""
    bucket = int(hashlib.sha1(family(package).encode("utf-8")).hexdigest(), 16) % BUCKETS
    return SPLITS[2] if bucket == 0 else SPLITS[1] if bucket == 1 else SPLITS[0]


def escape(text: str) -> str:
    """A string as one line of a plain file (its backslashes, line breaks and tabs escaped)."""
    return _ESCAPE.sub(lambda m: ESCAPES[m.group()], text)


def unescape(line: str) -> str:
    """The string a line of a plain file stands for: escape's inverse."""
    return _UNESCAPE.sub(lambda m: _UNESCAPED.get(m.group(), m.group()), line)


@dataclass
class Catalogue:
    """One package's catalogue: its PO text, its pairs and what was left out of them."""

    name: str  # the .mo file's stem
    split: str
    po: str  # msgunfmt's output, written as {split}/{name}.po
    pairs: list[tuple[str, str]] = field(default_factory=list)  # raw strings, not escaped
    left_out: Counter = field(default_factory=Counter)  # fuzzy, untranslated, plural form, ...


def catalogues(locale_dir: Path, lang: str) -> Iterator[Catalogue]:
    """The catalogue of every {locale_dir}/{lang}/LC_MESSAGES/*.mo, in name order. No such
    directory, or no .mo in it: DataError."""
    where = Path(locale_dir) / lang / "LC_MESSAGES"
    files = sorted(where.glob("*.mo"))
    if not files:
        raise DataError(f"{where}: no .mo files" if where.is_dir() else
                        f"{where}: not found; give --from the directory holding "
                        f"{lang}/LC_MESSAGES/*.mo (by default /usr/share/locale)")
    for mo in files:
        po = unpack(mo)
        pairs, left_out = read_po_pairs(po, f"{mo} (as msgunfmt writes it)")
        yield Catalogue(mo.stem, split_of(mo.stem), po, pairs, left_out)


def unpack(mo: Path) -> str:
    """A .mo file as PO text in UTF-8: `msgunfmt`, then `msgconv` (a few catalogues are in
    ISO-8859-1 still); not a .mo file (or unreadable): DataError."""
    tools = [shutil.which(tool) for tool in ("msgunfmt", "msgconv")]
    if None in tools:
        raise ConfigError(NEEDS_GETTEXT)
    po = _gettext([tools[0], "--no-wrap", str(mo)], mo)
    return _gettext([tools[1], "--no-wrap", "--to-code=UTF-8", "-"], mo, po).decode("utf-8")


def _gettext(command: list[str], mo: Path, given: bytes | None = None) -> bytes:
    done = subprocess.run(command, input=given, capture_output=True)
    if done.returncode:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        tool = Path(command[0]).name
        raise DataError(f"{mo}: {tool} cannot read it ({said[-1] if said else 'failed'})")
    return done.stdout


def read_po_pairs(text: str, name: str) -> tuple[list[tuple[str, str]], Counter]:
    """The (msgid, msgstr) pairs of PO text as the `po` corpus format reads them
    (mt.corpus_formats.po: plurals, what is left out), and a count of each kind of entry left
    out; a syntax error is a DataError naming `name` and the line."""
    left_out: Counter = Counter()
    pairs = list(catalog_pairs(po.read(text, name), left_out))
    del left_out["header"]  # every catalogue has one: nothing to count
    return pairs, left_out


def split_pairs(found: list[Catalogue]) -> dict[str, list[tuple[str, str]]]:
    """Each split's pairs, package by package in name order. Train's exact duplicates (a pair
    in two packages, or twice in one: gtk20 and gtk30 share most strings) are kept once, so
    that no string weighs more for being in more catalogues; val and test keep every entry, as
    a localizer's file holds them. A split no package falls in is a DataError."""
    split = {name: [] for name in SPLITS}
    for cat in found:
        split[cat.split] += cat.pairs
    split["train"] = list(dict.fromkeys(split["train"]))
    for name, pairs in split.items():
        if not pairs:
            raise DataError(f"no package with translations falls in {name} (by the SHA-1 of "
                            f"its name's family mod {BUCKETS}; packages: "
                            f"{', '.join(c.name for c in found)}): too few packages to split")
    return split


def manifest(found: list[Catalogue], split: dict[str, list[tuple[str, str]]]) -> dict:
    """What a built corpus holds: per split its packages, pairs, entries with placeholders and
    (val, test) the share of entries whose msgid is also a training msgid (what a translation
    memory finds whole); per package its split, family, pairs and what was left out."""
    train_ids = {s for s, _ in split["train"]}
    about = {}
    for name, pairs in split.items():
        about[name] = {
            "packages": [c.name for c in found if c.split == name],
            "pairs": len(pairs),
            "with_placeholders": sum(bool(placeholders(s)) for s, _ in pairs)}
        if name == "train":
            about[name]["duplicates_dropped"] = sum(
                len(c.pairs) for c in found if c.split == name) - len(pairs)
        else:
            about[name]["msgid_in_train"] = round(
                sum(s in train_ids for s, _ in pairs) / len(pairs), 4)
    packages = {c.name: {"split": c.split, "family": family(c.name), "pairs": len(c.pairs),
                         "left_out": dict(c.left_out)} for c in found}
    return {"rule": f"split by sha1(family) % {BUCKETS}: 0 test, 1 val, else train; family: the "
            "package name without digits (mt/corpora/software.py)",
            "escapes": "backslash \\\\, line feed \\n, carriage return \\r, tab \\t",
            "splits": about, "packages": packages}
