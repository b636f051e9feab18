"""The `po` format: gettext PO files (mt.l10n.po), `path` a file, a directory (its .po files,
searched below it) or a glob of them; each translated entry's msgid -> msgstr.

A plural entry gives two pairs: msgid -> the form of n = 1, msgid_plural -> the form most
counts take (German's msgstr[0] and msgstr[1]; Russian's msgstr[0] and msgstr[2], its
"5 files"), by the file's Plural-Forms; one pair, msgid_plural's, where those are one form
(Japanese). msgctxt is dropped: it tells two identical msgids apart for a translator, free
text in no fixed set, so a tag made of it would be a token no translation request carries.
The header, fuzzy, obsolete and untranslated entries are left out, counted (Pairs.left_out)
for `mt data check`.
"""

from __future__ import annotations

import glob
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from mt.corpus_formats import CorpusConfig, OneFile, Pairs
from mt.errors import DataError
from mt.l10n import po


def why_left_out(entry: po.Entry) -> str | None:
    """Why an entry gives no pair: "obsolete", "fuzzy", "untranslated"; None if it gives."""
    if entry.po.obsolete:
        return "obsolete"
    if not entry.translated:
        return "untranslated"
    return "fuzzy" if "fuzzy" in entry.po.flags else None


def entry_pairs(entry: po.Entry, forms: po.PluralForms) -> list[tuple[str, str]]:
    """The pairs an entry gives (it is translated, not fuzzy); an empty form gives none."""
    e = entry.po
    if not e.msgid_plural:
        return [(e.msgid, e.msgstr)]
    sides = [(e.msgid_plural, forms.other)]
    if forms.one != forms.other:
        sides.insert(0, (e.msgid, forms.one))
    return [(msgid, e.msgstr_plural[k]) for msgid, k in sides if e.msgstr_plural.get(k)]


def catalog_pairs(catalog: po.Catalog, left_out: Counter) -> Iterator[tuple[str, str]]:
    """A catalog's pairs; what gives none counted into left_out by why."""
    forms = po.plural_forms(catalog)
    left_out["header"] += catalog.header is not None
    for entry in catalog.entries:
        why = why_left_out(entry)
        if why is None:
            yield from entry_pairs(entry, forms)
        else:
            left_out[why] += 1


class PoFormat(OneFile):
    name, suffixes = "po", (".po",)

    def paths(self, c: CorpusConfig, data_dir: str, langs: tuple[str, str]) -> tuple[Path, ...]:
        """The file, a directory's .po files (below it too) or a glob's files, sorted."""
        path = Path(c.path)
        if path.is_dir():
            found = sorted(path.rglob("*.po"))
        elif glob.has_magic(c.path):
            found = sorted(Path(p) for p in glob.glob(c.path, recursive=True))
        else:
            return (path,)
        if not found:
            raise DataError(f"{c.path}: no .po files there; give a PO file, a directory of "
                            "them or a glob")
        return tuple(found)

    def pairs(self, paths: tuple[Path, ...], langs: tuple[str, ...]) -> Pairs:
        left_out: Counter[str] = Counter()
        return Pairs(self._pairs(paths, left_out), left_out)

    def _pairs(self, paths: tuple[Path, ...], left_out: Counter) -> Iterator[tuple[str, str]]:
        for path in paths:  # one file in memory at a time
            yield from catalog_pairs(po.read_file(path), left_out)


FORMAT = PoFormat()
