"""A run's side of its cached corpora (mt.token_cache): the vocabularies a new run counts over
their entries, its corpora's tags (and data.terminology's and data.memory's tokens) in them,
and the entries' pairs as one MixedData (mt.mixing), each entry's ids looked up in the run's
vocabularies as batches are made, with data.memory's matches (mt.token_cache.matches)."""

from __future__ import annotations

import collections

import numpy as np

from mt.errors import DataError
from mt.fuzzy_repair import GAP, MARKER, FuzzyRepair, Repairs, repairs_of
from mt.glossary import Glossary
from mt.mixing import MixedData, Part
from mt.terminology import MARKERS, Terminology, reserved_tokens
from mt.token_cache import CachedCorpora
from mt.token_cache.entry import SIDES
from mt.token_cache.matches import cached_matches
from mt.vocab import UNK, Vocab


def run_vocabs(cached: CachedCorpora) -> tuple[Vocab, Vocab]:
    """A new run's vocabularies: a tokenizer's fixed ones, else counted over all corpora
    (data.min_freq, max_size, shared_vocab); the corpora's tags, and with data.terminology
    its markers and target terms' tokens (mt.terminology), added to the source's (and the
    target's when shared) after the counted tokens."""
    d = cached.data_cfg
    fixed = [tok.fixed_vocab for tok in cached.tokenizers()]
    if all(f is not None for f in fixed):
        src, tgt = Vocab(fixed[0]), Vocab(fixed[1])
    else:
        counts = [sum((e.counts(side) for e in cached.entries), collections.Counter())
                  for side in SIDES]
        if d.shared_vocab:
            src = tgt = Vocab.from_counts(counts[0] + counts[1], d.min_freq, d.max_size)
        else:
            src, tgt = (Vocab.from_counts(c, d.min_freq, d.max_size) for c in counts)
    tags = corpus_tags(cached)
    check_tags(cached, tags)
    src = with_tags(src, tags)
    if d.terminology.glossary:
        lexicon = Glossary.load(d.terminology.glossary, alternatives=True)
        src = with_tags(src, reserved_tokens(lexicon, cached.tokenizers()[1]))
    if d.memory is not None:  # the match's tokens are the target's: shared_vocab (config)
        reserved = [MARKER, GAP] if d.memory.mask else [MARKER]
        check_tags(cached, reserved)
        src = with_tags(src, reserved)
    return (src, src) if d.shared_vocab else (src, tgt)


def mixed_data(cached: CachedCorpora, src_vocab: Vocab, tgt_vocab: Vocab,
               buckets: bool = False) -> MixedData:
    """The training pairs of every corpus, their ids looked up in these vocabularies (a
    run's), each corpus's tag first in its sources, data.terminology's glossary found in
    them (mt.terminology); buckets: see MixedData."""
    terms, repair = terminology(cached, src_vocab), fuzzy_repair(cached, src_vocab)
    parts = []
    for c, e in zip(cached.sources, cached.entries):
        variants = [e.data(v) for v in range(e.variants)]
        parts.append(Part(c.name, variants, c.weight, src_vocab.stoi[c.tag] if c.tag else None,
                          (_remap(e.src_vocab, src_vocab), _remap(e.tgt_vocab, tgt_vocab)),
                          terms and [terms.occurrences(v, *e.vocabs) for v in variants],
                          repair and _repairs(cached, c, e, src_vocab)))
    return MixedData(parts, buckets, terms,
                     counted=not cached.data_cfg.terminology.plain_batches, repair=repair)


def fuzzy_repair(cached: CachedCorpora, src_vocab: Vocab) -> FuzzyRepair | None:
    """data.memory in a run's source ids; None when off. DataError for a vocabulary without
    its marker (a run trained without it, inherited)."""
    m = cached.data_cfg.memory
    if m is None:
        return None
    reserved = [MARKER, GAP] if m.mask else [MARKER]
    check_tags(cached, reserved)
    if missing := [t for t in reserved if t not in src_vocab.stoi]:
        raise DataError(f"data.memory: {missing[0]} is not in the vocabulary this run inherits "
                        "(it was trained without data.memory, or without its mask); train a "
                        "new run")
    return FuzzyRepair(m.prob, src_vocab.stoi[MARKER], src_vocab.stoi[GAP] if m.mask else None)


def _repairs(cached: CachedCorpora, corpus, entry, src_vocab: Vocab) -> Repairs:
    """A corpus's cached memory matches (computed first if missing) in the run's ids."""
    src_tok, tgt_tok = cached.tokenizers()
    return repairs_of(cached_matches(entry, corpus, cached.data_cfg), tgt_tok, src_vocab,
                      src_tok if cached.data_cfg.memory.mask else None)


def terminology(cached: CachedCorpora, src_vocab: Vocab) -> Terminology | None:
    """data.terminology's glossary in a run's source ids; None when off. DataError for a
    vocabulary without its markers (a run trained without it, inherited)."""
    t = cached.data_cfg.terminology
    if not t.glossary:
        return None
    glossary = Glossary.load(t.glossary, alternatives=True)
    check_tags(cached, list(MARKERS))
    if missing := [m for m in MARKERS if m not in src_vocab.stoi]:
        raise DataError(f"data.terminology: {missing[0]} is not in the vocabulary this run "
                        "inherits (it was trained without data.terminology); train a new run")
    return Terminology(glossary, t.prob, *cached.tokenizers(), src_vocab)


def corpus_tags(cached: CachedCorpora) -> list[str]:
    """The corpora's tags, in their order."""
    return [c.tag for c in cached.sources if c.tag]


def check_tags(cached: CachedCorpora, tags: list[str]) -> None:
    """A tag that the data itself holds would be two things at once: DataError."""
    for c, e in zip(cached.sources, cached.entries):
        if clash := sorted(set(tags) & set(e.meta["angle_tokens"])):
            raise DataError(f"{c}: the text holds {clash[0]!r}, which is also a corpus "
                            "tag or a terminology marker; choose a tag that the data never "
                            "contains")


def with_tags(vocab: Vocab, tags: list[str]) -> Vocab:
    """vocab with the tags it lacks appended."""
    return Vocab(vocab.itos + [t for t in dict.fromkeys(tags) if t not in vocab.stoi])


def _remap(entry: Vocab, run: Vocab) -> np.ndarray | None:
    """Entry ids -> run ids (<unk> for the entry's tokens the run lacks); None: the same."""
    if entry.itos == run.itos[:len(entry)]:
        return None
    return np.array([run.stoi.get(t, UNK) for t in entry.itos], dtype=np.int64)
