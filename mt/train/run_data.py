"""A run's data: vocabularies, tokenizers, the training pairs (from the token cache) and the
validation pairs, as one RunData."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mt import log
from mt.cached_mix import check_tags, corpus_tags, mixed_data, run_vocabs
from mt.checkpoint import SRC_VOCAB, TGT_VOCAB
from mt.config import Config
from mt.corpus_formats import CorpusSource
from mt.data import ParallelData, read_pairs, split_source
from mt.document.starters import learn as learn_starters
from mt.errors import DataError
from mt.fuzzy_repair import lexicon
from mt.mixing import MixedData
from mt.shortlist import Shortlist
from mt.token_cache import CachedCorpora, open_cached_corpora
from mt.tokenizers import Tokenizer, tokenizer_files
from mt.train.distributed import Group
from mt.train.shortlist import learn_run
from mt.vocab import Vocab, start_id


@dataclass
class RunData:
    """What training reads: the same on every rank (tok_files aside)."""

    src_vocab: Vocab
    tgt_vocab: Vocab
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    train: MixedData
    val: ParallelData
    val_src: list[str]  # the validation text, for BLEU
    val_ref: list[str]
    tok_files: dict[str, bytes]  # what checkpoints carry of the tokenizers (rank 0 only)
    starters: list[str]  # the training sources' sentence starters (rank 0 only)
    shortlist: Shortlist | None  # of the training pairs (rank 0, and every rank that masks)
    fingerprint: str  # of the training data as tokenized: its token cache entries' names
    mix: list[dict]  # each corpus's pairs, weight, tag and share of an epoch (mix_shares)


@dataclass
class Inherited:
    """What a run takes from another instead of from its data: vocabularies and tokenizer
    files (its own on --resume; its parent's with --init-from)."""

    src_vocab: Vocab
    tgt_vocab: Vocab
    tok_files: dict[str, bytes]

    @classmethod
    def of_run(cls, cfg: Config, run_dir: Path) -> Inherited:
        d = cfg.data
        return cls(Vocab.load(run_dir / SRC_VOCAB), Vocab.load(run_dir / TGT_VOCAB),
                   {n: (run_dir / n).read_bytes() for n in tokenizer_files(d)})


def load_run_data(cfg: Config, run_dir: Path, resume: bool, group: Group,
                  inherit: Inherited | None = None) -> RunData:
    """The vocabularies and tokenizers are the run's own on --resume, `inherit`'s when given,
    else made from the training corpora."""
    d = cfg.data
    if resume:
        inherit = Inherited.of_run(cfg, run_dir)
    # Under torchrun rank 0 builds the token cache, if it must, while the other ranks wait
    # here; then every rank maps the same arrays.
    if not group.main:
        group.barrier()
    try:
        cache = open_cached_corpora(d, inherit.tok_files if inherit else None)
    finally:
        if group.main:
            group.barrier()
    if inherit:
        src_vocab, tgt_vocab = inherit.src_vocab, inherit.tgt_vocab
        _check_tags(cache, src_vocab)
    else:
        src_vocab, tgt_vocab = run_vocabs(cache)
    src_tok, tgt_tok = cache.tokenizers()
    tok_files = cache.tok_files if group.main else {}
    starters = learn_starters(cache.entries) if group.main else []
    train = mixed_data(cache, src_vocab, tgt_vocab, cfg.train.buckets)
    dropped = train.filter_length(d.max_len)
    # The weight first: a lone corpus whose weight draws nothing has pairs left all the same
    for i, part in enumerate(train.parts):
        if len(part.variants[0]) and not part.drawn():
            raise DataError(f"data.train[{i}].weight {part.weight:g}: draws no pair from corpus "
                            f"{part.name!r} (round({part.weight:g} x {len(part.variants[0])} "
                            f"pairs) = 0); give it at least {1 / len(part.variants[0]):.2g}")
    if not len(train):
        raise DataError(f"{' and '.join(map(str, cache.sources))}: no training pairs left "
                        f"after dropping empty ones and those over data.max_len={d.max_len} "
                        "tokens")
    # Learned once, before masking: data.memory.mask reads its rows, as translating reads
    # the checkpoint's copy of the same table, so a line is masked as training masked it
    mask = d.memory is not None and d.memory.mask
    shortlist = (learn_run(train, src_vocab, tgt_vocab, cfg.train.shortlist)
                 if group.main or mask else None)
    if mask:
        train.mask_repairs(lexicon(shortlist))
    val_src, val_ref = read_pairs(split_source(d, "val"))
    val = ParallelData.from_text(val_src, val_ref, src_tok, tgt_tok, src_vocab, tgt_vocab)
    val.filter_length(cfg.model.max_positions - 2)
    train.start = val.start = start_id(cfg.model.decoder_start)
    log.info(f"data: {len(train)} training pairs ({sum(dropped)} dropped: empty or "
             f"over {d.max_len} tokens), {len(val_src)} validation; vocab src {len(src_vocab)} "
             f"tgt {len(tgt_vocab)}")
    shares = mix_shares(train, cache.sources)
    if len(train.parts) > 1 or train.parts[0].weight != 1 or train.parts[0].tag:
        log.info(f"data: mix: {format_mix(shares)}")
    return RunData(src_vocab, tgt_vocab, src_tok, tgt_tok, train, val, val_src, val_ref,
                  tok_files, starters, shortlist, "+".join(e.path.name for e in cache.entries),
                  shares)


def mix_shares(train: MixedData, sources: list[CorpusSource]) -> list[dict]:
    """Each corpus's pairs (after the length filter), weight, tag and share of an epoch."""
    total = len(train)
    return [{"name": p.name, "pairs": len(p.variants[0]), "weight": p.weight, "tag": c.tag,
             "drawn": p.drawn(), "share": p.drawn() / total}
            for p, c in zip(train.parts, sources)]


def format_mix(shares: list[dict]) -> str:
    return "; ".join(f"{m['name']} {m['pairs']} pairs x {m['weight']:g} = {m['share']:.1%} of "
                     "an epoch" + (f", tag {m['tag']}" if m["tag"] else "") for m in shares)


def _check_tags(cache: CachedCorpora, src_vocab: Vocab) -> None:
    """The config's tags must be tokens of the inherited source vocabulary."""
    tags = corpus_tags(cache)
    check_tags(cache, tags)
    if missing := [t for t in tags if t not in src_vocab.stoi]:
        raise DataError(f"tag {missing[0]}: not in the vocabulary this run inherits (its tags "
                        "are fixed when the first run is trained); train a new run to add it")
