"""Translations without a model, for the tests of mt.document: each input's words kept, or
reversed, or some dropped, with the word alignment that says so."""

from mt.records import Translation


def identity(inputs):
    out = []
    for x in inputs:
        words = x.split()
        out.append(Translation(" ".join(words), 0.0,
                               " ".join(f"{j}-{j}" for j in range(len(words)))))
    return out


def reversed_words(inputs):
    """Each sentence's words backwards, upper-cased (so nothing is the source's by accident)."""
    out = []
    for x in inputs:
        words = x.upper().split()
        n = len(words)
        out.append(Translation(" ".join(reversed(words)), 0.0,
                               " ".join(f"{n - 1 - j}-{j}" for j in range(n))))
    return out


def every_other(inputs):
    """Every other word dropped: source words 1, 3, 5, ... have no target word."""
    out = []
    for x in inputs:
        words = x.split()[::2]
        out.append(Translation(" ".join(words), 0.0,
                               " ".join(f"{2 * j}-{j}" for j in range(len(words)))))
    return out


def unaligned(inputs):
    """As an engine without alignments gives them: the words, no alignment."""
    return [Translation(" ".join(x.split()), 0.0) for x in inputs]
