"""The `tmx` format: a TMX translation memory (plain or .gz), each unit's segments in the
corpus's two languages a pair.

A `<tuv>`'s language matches the corpus's code as mt.l10n.languages says (`de-DE` is `de`). A
unit without both languages is left out, counted for `mt data check`; a file in which one of
them is nowhere is a DataError naming the languages it has. A pair is plain text, the inline
codes taken out (mt.l10n.inline).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from mt.corpus_formats import OneFile, Pairs
from mt.errors import DataError
from mt.l10n import tmx
from mt.l10n.languages import best
from mt.textio import open_binary


def iter_tmx(path: Path, langs: tuple[str, ...], left_out: Counter) -> Iterator[tuple[str, str]]:
    seen: set[str] = set()  # every language tag of the file
    pairs = 0
    with open_binary(path) as f:
        for unit in tmx.units(f, str(path)):
            seen.update(unit)
            tags = [best(lang, unit) for lang in langs]
            if None in tags or not all(unit[t] for t in tags):
                left_out[f"lacking {' or '.join(langs)}"] += 1
                continue
            pairs += 1
            yield unit[tags[0]], unit[tags[1]]
    missing = [lang for lang in langs if best(lang, seen) is None]
    if missing and not pairs:
        raise DataError(f"{path}: no segment in {' or '.join(missing)} (its languages: "
                        f"{', '.join(sorted(seen)) or 'none'}); give a TMX with both of the "
                        "corpus's languages")


class TmxFormat(OneFile):
    name, suffixes = "tmx", (".tmx", ".tmx.gz")

    def pairs(self, paths: tuple[Path, ...], langs: tuple[str, ...]) -> Pairs:
        left_out: Counter = Counter()
        return Pairs(iter_tmx(paths[0], langs, left_out), left_out)


FORMAT = TmxFormat()
