"""How well mt.document.segment splits paragraphs back into their sentences, and what it costs
(docs/documents.md): consecutive lines of a one-sentence-a-line file joined 3 to 6 at a time
with a space, then split.

    python scripts/measure_split.py ../shared/data/news-de-en/test.de.gz ...

The language is the file name's second-last part (test.de.gz: de)."""

import gzip
import random
import sys
import time

from mt.document.segment import split

for path, lang in [(p, p.split(".")[-2]) for p in sys.argv[1:]]:
    lines = [x.strip() for x in gzip.open(path, "rt", encoding="utf-8") if x.strip()]
    r, i, paras = random.Random(0), 0, []
    while i < len(lines):
        n = r.randrange(3, 7)
        paras.append(lines[i:i + n])
        i += n
    exact = sents = tp = fp = fn = 0
    start = time.perf_counter()
    for p in paras:
        text = " ".join(p)
        found = split(text, lang)
        got = [text[s.start:s.end] for s in found]
        exact += got == p
        sents += len(p)
        want, o = set(), 0
        for x in p[:-1]:
            o += len(x) + 1
            want.add(o)
        have = {s.start for s in found[1:]}
        tp, fp, fn = tp + len(want & have), fp + len(have - want), fn + len(want - have)
    t = time.perf_counter() - start
    name = "/".join(path.split("/")[-2:])
    print(f"{name}: {len(paras)} paragraphs ({sents} sentences): {exact / len(paras):.1%} "
          f"split exactly; boundaries: precision {tp / (tp + fp):.1%}, recall "
          f"{tp / (tp + fn):.1%}; {1e6 * t / sents:.0f} µs a sentence")
