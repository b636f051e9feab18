"""A run's data: vocabularies, tokenizers, the training pairs (from the token cache) and the
validation pairs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mt import log
from mt.checkpoint import SRC_VOCAB, TGT_VOCAB
from mt.config import Config
from mt.data import ParallelData, read_parallel, split_path
from mt.errors import DataError
from mt.token_cache import open_cache
from mt.tokenizers import Tokenizer, tokenizer_files
from mt.train.distributed import Group
from mt.vocab import Vocab


@dataclass
class Corpus:
    """What training reads: the same on every rank (tok_files aside)."""

    src_vocab: Vocab
    tgt_vocab: Vocab
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    train: ParallelData
    val: ParallelData
    val_src: list[str]  # the validation text, for BLEU
    val_ref: list[str]
    tok_files: dict[str, bytes]  # what checkpoints carry of the tokenizers (rank 0 only)
    fingerprint: str  # of the training data as tokenized: the token cache entry's name


@dataclass
class Inherited:
    """Vocabularies and tokenizer files the data is encoded with instead of the token cache's
    own: a resumed run's, or a fine-tuned run's parent's."""

    src_vocab: Vocab
    tgt_vocab: Vocab
    tok_files: dict[str, bytes]

    @classmethod
    def of_run(cls, cfg: Config, run_dir: Path) -> Inherited:
        return cls(Vocab.load(run_dir / SRC_VOCAB), Vocab.load(run_dir / TGT_VOCAB),
                   {n: (run_dir / n).read_bytes() for n in tokenizer_files(cfg.data)})


def load_corpus(cfg: Config, run_dir: Path, resume: bool, group: Group,
                inherit: Inherited | None = None) -> Corpus:
    """The vocabularies and tokenizers are the run's own on --resume, `inherit`'s when given
    (fine-tuning), else the token cache's."""
    d = cfg.data
    if resume:
        inherit = Inherited.of_run(cfg, run_dir)
    vocabs = (inherit.src_vocab, inherit.tgt_vocab) if inherit else None
    # Under torchrun rank 0 builds the token cache, if it must, while the other ranks wait
    # here; then every rank maps the same arrays.
    if not group.main:
        group.barrier()
    try:
        cache = open_cache(d, vocabs, tok_files=inherit.tok_files if inherit else None)
    finally:
        if group.main:
            group.barrier()
    src_vocab, tgt_vocab = vocabs or cache.vocabs
    src_tok, tgt_tok = cache.tokenizers()
    # What checkpoints carry of the tokenizers (e.g. a SentencePiece model), read once: the
    # inherited ones, else the cache's (written to a new run's directory with its config).
    tok_files = inherit.tok_files if inherit else (
        {n: (cache.path / "tok" / n).read_bytes() for n in tokenizer_files(d)}
        if group.main else {})
    train = cache.data()
    dropped = train.filter_length(d.max_len)
    if not len(train):
        raise DataError(f"{split_path(d.dir, d.train, d.src_lang)}: no training pairs left "
                        f"after dropping empty ones and those over data.max_len={d.max_len} "
                        "tokens")
    val_src, val_ref = read_parallel(split_path(d.dir, d.val, d.src_lang),
                                     split_path(d.dir, d.val, d.tgt_lang))
    val = ParallelData.from_text(val_src, val_ref, src_tok, tgt_tok, src_vocab, tgt_vocab)
    val.filter_length(cfg.model.max_positions - 2)
    log.info(f"data: {len(train)} training pairs ({dropped} dropped: empty or over "
             f"{d.max_len} tokens), {len(val_src)} validation; vocab src {len(src_vocab)} "
             f"tgt {len(tgt_vocab)}")
    return Corpus(src_vocab, tgt_vocab, src_tok, tgt_tok, train, val, val_src, val_ref,
                  tok_files, cache.path.name)
