"""`mt memory`: a translation memory filled from files, searched, exported, described
(mt.memory; docs/memory.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from tqdm import tqdm

from mt.commands.output import check_output_path, write_output
from mt.log import info
from mt.memory import open_memory
from mt.memory.files import file_pairs, write_tmx, write_tsv

EXPORTS = ("tmx", "tsv")  # --to, checked by the CLI


def add(memory: str, files: list[Path], src: str, tgt: str) -> dict:
    """Add each file's pairs (the memory created as src-tgt if missing); what was added."""
    langs = (src, tgt)
    # Every file read once before any pair is added: a damaged one (a bad line, a TMX of
    # other languages) adds nothing, and the bar knows its total.
    total = sum(sum(1 for _ in file_pairs(f, langs)) for f in files)
    added = duplicates = 0
    with open_memory(memory, langs) as m, tqdm(desc="memory", unit=" pairs", unit_scale=True,
                                               total=total, disable=None, file=sys.stderr,
                                               dynamic_ncols=True) as bar:
        for f in files:
            pairs = file_pairs(f, langs)
            a, d = m.add(pairs, bar.update)
            added, duplicates = added + a, duplicates + d
            for why, n in sorted(pairs.left_out.items()):
                info(f"memory: {f}: {n:,} left out ({why})")
        total = m.info()["pairs"]
    return {"memory": str(memory), "added": added, "duplicates": duplicates, "pairs": total}


def search(memory: str, text: str, k: int, threshold: float, src: str | None,
           tgt: str | None) -> list[dict]:
    """The k best matches for text, best first, as JSON objects."""
    with open_memory(memory) as m:
        m.check_langs(src, tgt, "the languages asked for")
        return [match.to_json() for match in m.search(text, k, threshold)]


def format_matches(matches: list[dict]) -> str:
    return "\n".join(f"{m['score']:6.2f}%  {m['source']}\n         {m['target']}"
                     for m in matches) or "no match"


def export(memory: str, to: str, out: str) -> dict:
    """Every pair as TMX or TSV, to out ('-': stdout)."""
    check_output_path(out)
    left_out = 0
    with open_memory(memory) as m:
        def write(f) -> None:
            nonlocal left_out
            left_out = write_tmx(m.pairs(), f, m.langs) if to == "tmx" else \
                write_tsv(m.pairs(), f)

        write_output(out, write)
        pairs = m.info()["pairs"]
    if left_out:
        info(f"memory: {left_out:,} pairs left out: {to.upper()} cannot hold a character of "
             "theirs" + (" (a tab or line break: export as tmx)" if to == "tsv" else ""))
    return {"memory": str(memory), "to": to, "output": out, "pairs": pairs - left_out,
            "left_out": left_out}


def describe(memory: str) -> dict:
    """`mt memory info`: pairs, languages, size, when created."""
    with open_memory(memory) as m:
        return m.info()


def format_info(about: dict) -> str:
    return "\n".join([f"memory   {about['memory']} ({about['store']})",
                      f"pairs    {about['pairs']:,}",
                      f"langs    {about['src']}-{about['tgt']}",
                      f"size     {about['bytes'] / 2**20:,.1f} MiB",
                      f"created  {about['created']}"])
