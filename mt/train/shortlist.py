"""A run's lexical shortlist (mt.shortlist) learned from its training pairs: by `mt train`,
which puts it in every checkpoint it writes, and by `mt shortlist RUN` for a run that has none
(trained before, or imported), from its training corpus or another (`--corpus DIR`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from mt import log
from mt.cached_mix import mixed_data
from mt.checkpoint import Run
from mt.config import DataConfig, ShortlistConfig
from mt.mixing import MixedData
from mt.shortlist import Shortlist, learn
from mt.token_cache import open_cached_corpora
from mt.vocab import Vocab


def learn_run(data: MixedData, src_vocab: Vocab, tgt_vocab: Vocab, cfg: ShortlistConfig
              ) -> Shortlist | None:
    """The shortlist of a run's training pairs (each corpus's first segmentation, in the
    run's ids); None where train.shortlist.k is 0."""
    if cfg.k == 0:
        return None
    corpora = [(part.variants[0], *part.remap) for part in data.parts]
    table = learn(corpora, len(src_vocab), len(tgt_vocab), cfg.k, cfg.frequent)
    log.info(f"shortlist: {cfg.k} target tokens per source token (of {len(src_vocab)}), "
             f"{len(table.frequent)} frequent; {len(table.ids)} entries")
    return table


def corpus_config(d: DataConfig, corpus: Path | None) -> DataConfig:
    """The data section whose training corpora a shortlist is learned from: the run's own, or
    the plain files DIR/train.SRC and DIR/train.TGT (corpus DIR)."""
    if corpus is None:
        return d
    return dataclasses.replace(d, dir=str(corpus), train="train",
                               terminology=dataclasses.replace(d.terminology, glossary=""))


def learn_for(run: Run, corpus: Path | None = None, cfg: ShortlistConfig | None = None
              ) -> Shortlist | None:
    """The shortlist of an opened run, from its training corpora (tokenized with its own
    tokenizers, through the token cache) or corpus's."""
    d = corpus_config(run.cfg.data, corpus)
    cached = open_cached_corpora(d, run.files)
    data = mixed_data(cached, run.src_vocab, run.tgt_vocab)
    return learn_run(data, run.src_vocab, run.tgt_vocab, cfg or run.cfg.train.shortlist)
