"""One tree of dataclasses (data, model, train, decode), loaded from YAML and validated once."""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from mt.corpus_formats import CorpusConfig, corpus_format
from mt.errors import ConfigError
from mt.tokenizers import (
    DEFAULT_KIND,
    FLAT_KEYS,
    KINDS,
    TokenizerSettings,
    default_settings,
    tokenizer_kind,
)

Schedule = Literal["inverse_sqrt", "cosine", "linear"]  # learning-rate decay after warmup
LengthNorm = Literal["gnmt", "average", "none"]  # how beam search compares lengths
DecodeDtype = Literal["float32", "bf16", "int8", "auto"]
CompileMode = Literal["auto", "on", "off"]  # decode.compile
GlossaryMode = Literal["constrain", "annotate", "both"]  # decode.glossary_mode
MemoryExact = Literal["reuse", "translate"]  # decode.memory_exact
UnkMode = Literal["replace", "forbid", "show"]  # decode.unk (mt.unknowns)
ShortlistMode = Literal["off", "auto", "on"]  # decode.shortlist (mt.decoding.shortlist)
Sampling = Literal["none", "topk", "topp"]  # none: the search (greedy or beam) picks
SCHEDULES = typing.get_args(Schedule)
LENGTH_NORMS = typing.get_args(LengthNorm)
DECODE_DTYPES = typing.get_args(DecodeDtype)


@dataclass
class FilterConfig:
    """Training pairs dropped while the token cache is built (mt.filters; docs/data.md)."""

    max_ratio: float = 0.0  # drop pairs whose word counts differ more than this factor; 0 = off
    dedup: bool = False  # drop repeats of a pair (after the whitespace rule), keep the first
    drop_copies: bool = False  # drop pairs whose target is the source copied
    drop_invalid: bool = False  # drop pairs with invalid UTF-8 (U+FFFD) or control characters


@dataclass
class TerminologyConfig:
    """Glossary terms annotated into the training sources, so the model learns to keep a
    glossary given at translation time (mt.terminology; docs/terminology.md)."""

    glossary: str = ""  # a glossary file (TSV, as --glossary takes); "" = off
    prob: float = 0.5  # each occurrence that may be annotated is, with this probability, per epoch
    # batches planned by the pairs' own lengths, the annotations riding on top (over
    # train.max_tokens by their share): the same pairs per step as the run without them
    plain_batches: bool = False


RELATED = 3  # data.memory.mask: a token's translations, the first of its shortlist row


@dataclass
class MemoryConfig:
    """Training with a translation memory, neural fuzzy repair: each source followed by its
    best match's target (mt.fuzzy_repair; docs/memory.md#training-with-a-memory)."""

    # where the matches come from: a memory (a file made by mt memory add, or a postgresql://
    # URL) or a corpus file as mt memory add reads it; "" = the training data itself (a pair
    # never its own match)
    path: str = ""
    threshold: float = 50.0  # the least match percentage (0-100) a source is augmented with
    prob: float = 0.5  # each pair with a match is augmented with this probability, per epoch
    # the match's target with the words that translate the match's source words the input
    # lacks masked (one <tm-gap> a run of them), as Xu, Crego & Senellart's FM*: where to
    # repair, shown rather than learned (mt.fuzzy_repair.unrelated)
    mask: bool = False


@dataclass
class DataConfig:
    src_lang: str = "en"  # language code of the source side: file suffix, spaCy language
    tgt_lang: str = "de"
    dir: str = "data/toy"  # files are {dir}/{split}.{lang}, plain or .gz
    # split names (file stems) inside dir, the defaults the toy's; train may instead list
    # corpora (CorpusConfig: files, weight, tag), and val and test each be a corpus of any
    # format (its files, no weight or tag)
    train: str | list[CorpusConfig] = "toy.train"
    val: str | CorpusConfig = "toy.val"
    test: str | CorpusConfig = "toy.test"
    lowercase: bool = False  # lowercase both sides before tokenizing
    max_len: int = 100  # training pairs with more tokens on either side are dropped
    min_freq: int = 1  # vocabulary: drop rarer tokens
    max_size: int = 0  # vocabulary: keep the most frequent tokens; 0 = no limit
    shared_vocab: bool = False  # one vocabulary for both sides (sentencepiece: one joint model)
    # spacy (words) or sentencepiece (subwords, trained): a kind's name, or {kind: NAME, ...}
    # with that kind's settings (its dataclass in mt/tokenizers/; docs/tokenization.md)
    tokenizer: TokenizerSettings = field(default_factory=default_settings)
    filter: FilterConfig = field(default_factory=FilterConfig)
    terminology: TerminologyConfig = field(default_factory=TerminologyConfig)
    memory: MemoryConfig | None = None  # a section ({} for the defaults) turns it on

    def problems(self) -> Iterator[Problem]:
        """Its own ranges (its tokenizer's and corpora's are checked on their own)."""
        yield from _failed([
            ("data.max_len", self.max_len > 0, "data.max_len must be positive"),
            ("data.filter.max_ratio", self.filter.max_ratio == 0 or self.filter.max_ratio >= 1,
             "data.filter.max_ratio must be 0 (off) or at least 1"),
            ("data.min_freq", self.min_freq >= 1, "data.min_freq must be at least 1"),
            ("data.terminology.prob", 0.0 < self.terminology.prob <= 1.0,
             "data.terminology.prob must be in (0, 1]"),
            ("data.max_size", self.max_size >= 0,
             "data.max_size must be 0 (no limit) or positive"),
        ])
        if self.memory is not None:
            yield from _failed([
                ("data.memory.threshold", 0.0 <= self.memory.threshold <= 100.0,
                 "data.memory.threshold must be in [0, 100] (a match percentage)"),
                ("data.memory.prob", 0.0 < self.memory.prob <= 1.0,
                 "data.memory.prob must be in (0, 1]"),
                (("data.memory", "data.shared_vocab"), self.shared_vocab,
                 "data.memory needs data.shared_vocab: true (the match's target tokens are "
                 "read by the source side)"),
            ])


@dataclass
class ModelConfig:
    d_model: int = 256
    n_heads: int = 4
    n_enc_layers: int = 3
    n_dec_layers: int = 3
    d_ff: int = 1024
    dropout: float = 0.1  # on embeddings and each sublayer's output (the residual branch)
    # Inside the sublayers; unset (null) = model.dropout. fairseq's defaults are 0 for both.
    attention_dropout: float | None = None  # on the attention weights
    activation_dropout: float | None = None  # on the feed-forward's hidden activations
    # The feed-forward's activation: relu (mt's fast path, ReLU and dropout fused), or gelu
    # (erf) or silu (swish), as pretrained models use them
    activation: Literal["relu", "gelu", "silu"] = "relu"
    pre_norm: bool = True  # LayerNorm before each sublayer (False: after, as in the 2017 paper)
    tie_output: bool = True  # target embedding shares weights with the output projection
    tie_all: bool = False  # source embedding too; needs data.shared_vocab
    max_positions: int = 256  # longest sequence the positional table covers
    # Sinusoidal positions: sinusoid (sines and cosines interleaved) or marian (the sines in
    # the first half of the dimensions, the cosines in the second, as Marian models have them)
    positions: Literal["sinusoid", "marian"] = "sinusoid"
    scale_embedding: bool = True  # embeddings times sqrt(d_model) before positions are added
    logits_bias: bool = False  # a fixed (untrained) bias on the output logits, Marian's
    # The decoder's first input: <bos>, or <pad> (Marian's, whose vocabularies have no <bos>)
    decoder_start: Literal["bos", "pad"] = "bos"

    def problems(self) -> Iterator[Problem]:
        heads = max(self.n_heads, 1)
        yield from _failed([
            ("model.d_model", self.d_model > 0, "model.d_model must be positive"),
            ("model.n_heads", self.n_heads > 0, "model.n_heads must be positive"),
            (("model.d_model", "model.n_heads"), self.d_model % heads == 0,
             f"model.d_model ({self.d_model}) must be divisible by model.n_heads "
             f"({self.n_heads})"),
            (("model.n_enc_layers", "model.n_dec_layers"),
             self.n_enc_layers > 0 and self.n_dec_layers > 0,
             "model.n_enc_layers and model.n_dec_layers must be positive"),
            ("model.d_ff", self.d_ff > 0, "model.d_ff must be positive"),
            ("model.dropout", 0.0 <= self.dropout < 1.0, "model.dropout must be in [0, 1)"),
            ("model.attention_dropout",
             self.attention_dropout is None or 0.0 <= self.attention_dropout < 1.0,
             "model.attention_dropout must be in [0, 1), or null for model.dropout"),
            ("model.activation_dropout",
             self.activation_dropout is None or 0.0 <= self.activation_dropout < 1.0,
             "model.activation_dropout must be in [0, 1), or null for model.dropout"),
            ("model.max_positions", self.max_positions > 0,
             "model.max_positions must be positive"),
        ])


@dataclass
class ShortlistConfig:
    """The lexical shortlist learned as training starts (mt.shortlist), Marian's defaults
    (`--shortlist lex.s2t 100 100`; the Bergamot students' are 50 50: faster, riskier)."""

    k: int = 100  # target tokens listed per source token, best first; 0: no shortlist
    frequent: int = 100  # the most frequent target tokens, always listed


@dataclass
class TrainConfig:
    seed: int = 1
    max_tokens: int = 4096  # batch budget: padded source + target tokens
    buckets: bool = True  # batches of a few fixed shapes (lengths on a ladder: mt.buckets);
    #                        false: exact lengths, sorted in pools
    max_epochs: int = 20
    max_steps: int = 0  # 0 = no limit
    lr: float = 5e-4  # peak learning rate, reached after warmup
    warmup: int = 1000  # linear warmup steps, then the schedule's decay
    schedule: Schedule = "inverse_sqrt"  # decay after warmup: inverse_sqrt, or cosine / linear
    #                                      to zero at max_steps or max_minutes, whichever is first
    label_smoothing: float = 0.1
    clip_norm: float = 1.0  # 0 = no clipping
    eval_every: int = 500  # validate (and save) every N steps
    eval_epochs: bool = True  # also validate (and save) at each epoch's end
    eval_bleu: bool = True  # greedy-decode the validation set for BLEU
    metric: Literal["bleu", "loss"] = "bleu"  # early stopping and `best`: higher bleu, lower loss
    patience: int = 0  # stop after N validations without improvement; 0 = never
    log_every: int = 100  # steps between metrics-log lines
    # autocast: auto (bf16 where native, CUDA or CPU; else fp16 on CUDA, fp32 on CPU), bf16,
    # fp16 (CUDA only; fp32 on CPU), none
    amp: Literal["auto", "bf16", "fp16", "none"] = "auto"
    accum_steps: int = 1  # micro-batches (of max_tokens each) per rank per update
    compile: bool = False  # torch.compile the model for training (dynamic shapes)
    keep_checkpoints: int = 0  # also keep the last N validation-step weights as ckpt.STEP.pt
    max_minutes: float = 0.0  # wall-clock budget for training (resumes included); 0 = none
    # CPU threads for torch, fixed; 0: the cores, fewer while other processes keep some busy
    # (mt.threads.Governor; a run is then reproducible only on an otherwise idle machine)
    threads: int = 0
    tensorboard: bool = False  # also write metrics as TensorBoard scalars to RUN/tb
    # Exponential moving average of the weights (mt.train.ema); 0 = off. When on, validation,
    # best.pt and ckpt.STEP.pt use the average; last.pt keeps the raw weights and the average.
    ema_decay: float = 0.0
    shortlist: ShortlistConfig = field(default_factory=ShortlistConfig)

    def problems(self) -> Iterator[Problem]:
        t = self
        yield from _failed([
            ("train.max_tokens", t.max_tokens > 0, "train.max_tokens must be positive"),
            ("train.max_epochs", t.max_epochs > 0, "train.max_epochs must be positive"),
            ("train.max_steps", t.max_steps >= 0,
             "train.max_steps must be 0 (no limit) or positive"),
            ("train.lr", t.lr > 0, "train.lr must be positive"),
            ("train.warmup", t.warmup >= 0, "train.warmup must be 0 or positive"),
            (("train.schedule", "train.max_steps", "train.max_minutes", "train.warmup"),
             t.schedule == "inverse_sqrt" or t.max_steps > t.warmup or t.max_minutes > 0,
             f"train.schedule: {t.schedule} decays to zero at train.max_steps or "
             "train.max_minutes: set max_steps above train.warmup, or max_minutes"),
            ("train.label_smoothing", 0.0 <= t.label_smoothing < 1.0,
             "train.label_smoothing must be in [0, 1)"),
            ("train.clip_norm", t.clip_norm >= 0, "train.clip_norm must be 0 (off) or positive"),
            ("train.eval_every", t.eval_every > 0, "train.eval_every must be positive"),
            ("train.log_every", t.log_every > 0, "train.log_every must be positive"),
            ("train.patience", t.patience >= 0, "train.patience must be 0 (off) or positive"),
            (("train.metric", "train.eval_bleu"), t.metric != "bleu" or t.eval_bleu,
             "train.metric: bleu needs train.eval_bleu: true"),
            ("train.threads", t.threads >= 0, "train.threads must be 0 (default) or positive"),
            ("train.accum_steps", t.accum_steps >= 1, "train.accum_steps must be at least 1"),
            ("train.keep_checkpoints", t.keep_checkpoints >= 0,
             "train.keep_checkpoints must be 0 (off) or positive"),
            ("train.max_minutes", t.max_minutes >= 0,
             "train.max_minutes must be 0 (no budget) or positive"),
            ("train.ema_decay", 0.0 <= t.ema_decay < 1.0,
             "train.ema_decay must be in [0, 1) (0 = off; e.g. 0.9999)"),
            ("train.shortlist.k", t.shortlist.k >= 0,
             "train.shortlist.k must be 0 (no shortlist) or positive"),
            ("train.shortlist.frequent", t.shortlist.frequent >= 0,
             "train.shortlist.frequent must be 0 or positive"),
        ])


# What a check finds wrong: the keys whose values it is about, and the message. The error is
# blamed on the last `--set` item that gave one of those values, else on the config file.
Problem = tuple[str | tuple[str, ...], str]


# Who takes a decoding option besides `--set decode.KEY` (docs/decoding.md#options): the
# commands with its flag --KEY, and REQUEST, a field of `mt serve`'s requests. The options
# about the outputs of a line (several, aligned, scored) are not for eval and calibrate,
# which score one output a line; batch_tokens and dtype stay the server's (its memory, and
# the weights' dtype chosen when the model loads).
REQUEST = "request"
EVERYWHERE = ("translate", "serve", "eval", "calibrate", REQUEST)
LINES = ("translate", "serve", REQUEST)
COMMANDS = ("translate", "serve", "eval", "calibrate")
TEACHING = (*EVERYWHERE, "distill")  # mt distill's teachers: beam, batch_tokens, dtype
# the kinds of placeholder a paragraph takes out (mt.document.placeholders.KINDS: the same)
PLACEHOLDERS = ("template", "url", "email", "number", "option")


def option(default: object, help: str, *, helps: typing.Mapping[str, str] | None = None,
           commands: tuple[str, ...] = EVERYWHERE, **bounds: object) -> typing.Any:
    """A DecodeConfig field: its default, and as metadata its flag's help (helps: a command's
    own, where it differs: mt serve answers in JSON where mt translate writes lines, mt
    distill's teachers), who takes it (commands) and its range, checked by
    DecodeConfig.problems: ge, gt, le; off: a value outside them meaning off; must: the
    range's words in the error where they are not the plain ones; limit: the largest value,
    since it sizes what is allocated (with the other bounds of docs/configuration.md#bounds)."""
    return field(default=default, metadata={"help": help, "helps": dict(helps or {}),
                                            "commands": commands, **bounds})


def option_help(f: dataclasses.Field, command: str) -> str:
    """A DecodeConfig field's help in a command."""
    return f.metadata["helps"].get(command, f.metadata["help"])


def _range_words(m: typing.Mapping[str, object]) -> str:
    """What a value outside a field's range must be, as its error says it."""
    if "must" in m:
        return str(m["must"])
    if "gt" in m and "le" in m:
        return f"in ({m['gt']}, {m['le']}]"
    if "gt" in m:
        return "positive" if m["gt"] == 0 else f"above {m['gt']}"
    return "0 or positive" if m["ge"] == 0 else f"at least {m['ge']}"


def _in_range(value: float, m: typing.Mapping[str, object]) -> bool:
    return ("off" in m and value == m["off"]) or (
        value >= m.get("ge", -math.inf) and value > m.get("gt", -math.inf)
        and value <= m.get("le", math.inf))


@dataclass
class DecodeConfig:
    """How a run translates. Each field is one decoding option: `--set decode.KEY`, the flag
    --KEY of the commands its metadata names, a field of mt serve's requests (docs/decoding.md's
    table lists them; docs/development.md: adding one)."""

    beam: int = option(1, "Beam size; 1 is greedy.", ge=1, limit=1024, commands=TEACHING,
                       helps={"distill": "The teachers' beam (default: the first teacher's "
                                         "decode.beam)."})
    # hypotheses kept per sentence, best first (at most beam)
    nbest: int = option(1, "Write the N best per input line as index<TAB>score<TAB>text lines "
                        "(N <= beam).", commands=LINES, helps={
                            "serve": 'Give the N best per line as a JSON list, "nbest" (N <= '
                                     'beam).'})
    # gnmt: score / ((5 + len) / 6) ** alpha; average: / len; none
    length_norm: LengthNorm = option("gnmt", "Beam scores: gnmt, average or none.")
    # alpha of gnmt (0 = none); larger favours longer outputs
    length_penalty: float = option(0.6, "GNMT alpha (0 = no penalty).", ge=0)
    # no <eos> before this many output tokens (the max length still wins)
    min_len: int = option(0, "No end of sentence before this many tokens.", ge=0)
    max_len_a: float = option(1.5, "Output at most a * source length + b tokens.")
    max_len_b: int = option(10, "See --max-len-a.")
    # source tokens per decoding batch, times beam (bounds memory)
    batch_tokens: int = option(4096, "Source tokens per batch (x beam).", gt=0,
                               commands=(*COMMANDS, "distill"),
                               helps={"distill": "The teachers' source tokens per batch (x "
                                                 "beam)."})
    # weights and activations while decoding (mt.decoding.precision for int8)
    dtype: DecodeDtype = option("float32", "float32; bf16 where the CPU or GPU has native "
                                "bf16; int8 on a CPU with VNNI/AMX; auto: the fastest of "
                                "them on this machine (docs/decoding.md).",
                                commands=(*COMMANDS, "distill"),
                                helps={"distill": "The teachers' decode.dtype."})
    # the output projection over the batch's lexical shortlist (mt.decoding.shortlist): auto
    # where the run has one and it lists at most half the target vocabulary
    shortlist: ShortlistMode = option("off", "auto, on or off: project onto the likely target "
                                      "tokens of the batch's source words alone, the run's "
                                      "lexical shortlist (docs/decoding.md#shortlist).")
    # the decoding step compiled by torch.compile (mt.decoding.compiled): auto once a
    # process has decoded enough to repay it, never for one line
    compile: CompileMode = option("off", "Compile the decoding step (torch.compile): auto "
                                  "(for large inputs only), on or off (docs/decoding.md#compiled-"
                                  "decoding).", commands=("translate", "serve", "eval"))
    no_repeat_ngram: int = option(0, "No output repeats an n-gram of this size (0 = off).",
                                  ge=0, must="0 (off) or positive")
    # draw each token: from the topk best, or the topp nucleus
    sampling: Sampling = option("none", "none, or draw each token (back-translation): topk or "
                                "topp (docs/decoding.md).")
    temperature: float = option(1.0, "Sampling: divide the logits by this (lower is closer to "
                                "greedy).", gt=0)
    topk: int = option(10, "Sampling topk: draw from the K most likely tokens.", gt=0)
    topp: float = option(0.9, "Sampling topp: draw from the fewest tokens whose probability "
                         "reaches P.", gt=0, le=1)
    samples: int = option(1, "Sampling: N outputs per input line, in the n-best format when "
                          "N > 1.", commands=LINES, ge=1, limit=1024, helps={
                              "serve": 'Sampling: N outputs per line, as a JSON list ("nbest") '
                                       'when N > 1.'})
    seed: int = option(0, "Sampling: the seed; one seed gives one set of outputs (on CPU).")
    # one of the model's corpus tags
    tag: str = option("", "Put this corpus tag (e.g. <2de>) before each source line "
                      "(docs/data.md#tags).")
    align: bool = option(False, "Add Pharaoh i-j word alignments: a tab after each "
                         "translation (docs/decoding.md).", commands=LINES, helps={
                             "serve": 'Add Pharaoh i-j word alignments: "alignment" beside each '
                                      'translation.'})
    # per-sentence features and (with the run's calibration) a confidence, recorded by the
    # search (docs/confidence.md)
    confidence: bool = option(False, "With --format jsonl: each translation's confidence (0-1, "
                              "with the run's calibration) and its features "
                              "(docs/confidence.md).", commands=LINES)
    # Monte Carlo dropout: N teacher-forced passes with dropout on
    mc_dropout: int = option(0, "With --confidence: N more passes with dropout on; each "
                             "translation gets the mean and variance of its log-probability "
                             "over them (slow; docs/confidence.md).", commands=LINES, ge=2,
                             off=0, must="0 (off) or at least 2 passes (a variance needs two)",
                             limit=1024)
    glossary_ignore_case: bool = option(False, "With --glossary: match its source terms "
                                        "whatever their case.")
    glossary_ordered: bool = option(False, "With --glossary: its target terms in the order "
                                    "their source terms occur (docs/terminology.md).")
    # annotate: the terms written into the source, for a model trained with data.terminology
    glossary_mode: GlossaryMode = option("constrain", "With --glossary: constrain (the search "
                                         "holds its terms), annotate (for a model trained with "
                                         "data.terminology) or both (docs/terminology.md).")
    # what a reader sees where the model writes <unk> (mt.unknowns): chosen on validation
    # sets (docs/results.md#unknown-words)
    unk: UnkMode = option("replace", "<unk> in outputs: replace (by the source word the "
                          "attention points to, or a glossary term's own word), forbid (the "
                          "search never writes it) or show (docs/decoding.md#unknown-words).")
    # the model's own words for a term's source (the token of its unconstrained output that
    # needs that source most) blocked in that line (mt.own_words)
    glossary_replace: bool = option(True, "With --glossary (constrain or both): the words the "
                                    "model would write for a term's source are not written, so "
                                    "the term replaces them (docs/terminology.md).")
    # paragraphs (documents, serve, --split-sentences): by default a sentence also begins
    # where one of the run's sentence starters follows a word
    ignore_starters: bool = option(False, "Paragraphs: split after punctuation alone, not also "
                                   "where one of the run's sentence starters follows a word "
                                   "(docs/documents.md).", commands=LINES)
    # placeholders (mt.document.placeholders.KINDS) taken out of each sentence: every kind,
    # numbers included, chosen on validation sets
    # (docs/results.md#placeholders-chosen-on-validation), but for a
    # model that never saw a digit (mt.document.reads_digits)
    mask: str = option(",".join(PLACEHOLDERS), "Paragraphs: the placeholder kinds taken out "
                       "of each sentence and put back by the alignment, comma-separated, of "
                       f"{', '.join(PLACEHOLDERS)}; \"\" for none "
                       "(docs/documents.md#placeholders).", commands=LINES)

    # documents that hold translations (a PO file): by default only what is untranslated
    overwrite: bool = option(False, "Documents that hold translations (PO, XLIFF): translate every "
                             "entry, those translated already too, not only the untranslated "
                             "ones (docs/documents.md#po-files).", commands=LINES)

    # a translation memory (mt.memory; docs/memory.md): its best match shown beside each
    # translation, an exact one reused (memory_exact), and the source augmented with it for a
    # run trained with data.memory
    memory: str = option("", "Translate with this translation memory (a file made by mt memory "
                         "add, or a postgresql:// URL): an exact match reused, the best match "
                         "shown in --format jsonl (docs/memory.md).",
                         commands=("translate", "eval"))  # mt serve's own --memory: per pair
    memory_exact: MemoryExact = option("reuse", "With --memory: an exact match's target reused "
                                       "as it is (reuse) or the line translated all the same "
                                       "(translate).", commands=("translate", "eval", "serve"))
    memory_reuse: float = option(100.0, "With --memory and memory_exact reuse: the least "
                                 "match percentage whose stored target is used as it is, not "
                                 "translated: 100, exact matches only; lower, close matches "
                                 "too, marked for review in PO and XLIFF files (as a CAT tool "
                                 "pre-translates).", commands=("translate", "eval", "serve"),
                                 ge=0, le=100, must="in [0, 100]")
    memory_threshold: float = option(50.0, "With --memory: the least match percentage (0-100) "
                                     "a match is shown at, and augments the source with (for a "
                                     "run trained with data.memory, at least its own threshold).",
                                     commands=("translate", "eval", "serve"), ge=0, le=100,
                                     must="in [0, 100]")

    @property
    def masked(self) -> tuple[str, ...]:
        """The placeholder kinds mask names."""
        return tuple(k.strip() for k in self.mask.split(",") if k.strip())

    def problems(self) -> Iterator[Problem]:
        """Each field's range (its metadata), then the options that need each other."""
        for f in dataclasses.fields(self):
            if not any(k in f.metadata for k in ("ge", "gt", "le")):
                continue
            if not _in_range(getattr(self, f.name), f.metadata):
                yield f"decode.{f.name}", f"decode.{f.name} must be {_range_words(f.metadata)}"
        checks = [
            (("decode.nbest", "decode.beam"), 1 <= self.nbest <= self.beam,
             f"decode.nbest ({self.nbest}) must be between 1 and decode.beam ({self.beam})"),
            (("decode.max_len_a", "decode.max_len_b"), self.max_len_a >= 0 and self.max_len_b >= 0,
             "decode.max_len_a and decode.max_len_b must be non-negative"),
            (("decode.max_len_a", "decode.max_len_b"), self.max_len_a > 0 or self.max_len_b > 0,
             "decode.max_len_a and decode.max_len_b are both 0; make one positive"),
            (("decode.mc_dropout", "decode.confidence"), self.mc_dropout == 0 or self.confidence,
             "decode.mc_dropout needs decode.confidence (--confidence): its passes are "
             "confidence features"),
            (("decode.samples", "decode.sampling"), self.samples == 1 or self.sampling != "none",
             "decode.samples > 1 needs decode.sampling topk or topp (for several beam outputs, "
             "decode.nbest)"),
            (("decode.sampling", "decode.beam"), self.sampling == "none" or self.beam == 1,
             "decode.sampling draws one token at a time: it needs decode.beam 1"),
            ("decode.mask", set(self.masked) <= set(PLACEHOLDERS),
             f"decode.mask must name placeholder kinds, comma-separated: "
             f"{', '.join(PLACEHOLDERS)} (not {self.mask!r})"),
        ]
        yield from _failed(checks)


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        if list(out["data"]["tokenizer"]) == ["kind"]:  # a kind without settings: its name
            out["data"]["tokenizer"] = out["data"]["tokenizer"]["kind"]
        return out

    def save(self, path: Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False), encoding="utf-8")


Check = Callable[[Config], Iterable[Problem]]


def load_config(path: str | Path | None = None, overrides: Sequence[str] = (),
                checks: Sequence[Check] = ()) -> Config:
    """Read YAML (or start from defaults), apply `a.b=value` overrides, build and validate.

    checks: more checks of the result, after this module's own. A command that is about to
    make the config's tokenizers passes `mt.tokenizers.config_problems` (spaCy's languages,
    which need spaCy imported): they are then refused now, blamed like any other value.
    """
    raw: dict = {}
    where = "config"
    if path is not None:
        path = Path(path)
        where = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found; check the path (configs/ has "
                              "examples)") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: cannot read config ({e}); check its permissions and "
                              "that it is UTF-8 text") from None
        try:
            raw = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            line = f" line {mark.line + 1}" if mark is not None else ""
            problem = getattr(e, "problem", None) or "invalid YAML"
            raise ConfigError(f"{path}:{line}: {problem}; fix the YAML there") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: expected a mapping of sections, got "
                              f"{type(raw).__name__}; see configs/ for examples")
    for item in overrides:
        _apply_override(raw, item)
    return _checked(raw, blamer(where, overrides), checks)


def config_from_dict(raw: dict, where: str = "config") -> Config:
    return _checked(raw, blamer(where, ()))


def override(cfg: Config, overrides: Sequence[str], where: str) -> Config:
    """A copy of cfg with `a.b=value` overrides (e.g. command-line options), validated again;
    an error names the item to blame, as load_config's do."""
    raw = cfg.to_dict()
    for item in overrides:
        _apply_override(raw, item)
    return _checked(raw, blamer(where, overrides))


class OptionError(ConfigError):
    """A decoding option's value refused by with_decode: its message blames `where`; key: the
    option blamed (None where the error is about none of those given)."""

    def __init__(self, where: str, problem: str, key: str | None):
        super().__init__(f"{where}: {problem}")
        self.problem, self.key = problem, key


def with_decode(decode: DecodeConfig, options: Mapping[str, object],
                where: str = "Translator options") -> DecodeConfig:
    """decode with the options' fields replaced (`beam=5`), each typed as its field, then
    checked as a config's decode section is; a wrong key, type or range is an OptionError
    blamed on the last option given among those its check reads."""
    fields = {}
    for key, value in options.items():
        try:
            fields.update(_fields_from(DecodeConfig, {key: value}, lambda _: where, "decode."))
        except ConfigError as e:
            raise OptionError(where, str(e).removeprefix(f"{where}: "), key) from None
    decode = dataclasses.replace(decode, **fields)
    for keys, message in list(_bound_problems(decode, "decode.")) or decode.problems():
        keys = (keys,) if isinstance(keys, str) else keys
        given = [key for key in options if f"decode.{key}" in keys]
        raise OptionError(where, message, given[-1] if given else None)
    return decode


def override_keys(overrides: Sequence[str]) -> set[str]:
    """The keys that `a.b=value` overrides set (`decode.nbest`), as _apply_override reads them."""
    return {item.partition("=")[0].strip() for item in overrides}


def override_value(value: str) -> object:
    """A `--set key=VALUE`'s value as YAML reads it; "" for none, the text where it is not
    YAML."""
    try:
        return yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        return value


def _apply_override(raw: dict, item: str) -> None:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set train.lr=3e-4")
    parsed = override_value(value)
    node = raw
    *parents, last = key.split(".")
    data = raw.get("data")
    if (key == TOKENIZER_KEY and isinstance(data, dict)
            and _kind_of(data.get("tokenizer")) == parsed):
        return  # the kind it names already: its settings stay
    for i, p in enumerate(parents):
        name, index = _indexed(key, p)
        if node.get(name) is None:  # absent, or an optional section that is off (null)
            node[name] = {}
        node = node[name]
        if isinstance(node, str) and ".".join(parents[:i + 1]) == TOKENIZER_KEY:
            node = raw["data"]["tokenizer"] = {"kind": node}  # a kind's name: its section
        if index is not None:  # data.train[1].weight: the second corpus of a list
            if not isinstance(node, list) or index >= len(node):
                raise ConfigError(f"--set {key}: '{name}' has no item {index} (it is not a "
                                  "list, or a shorter one; items count from 0)")
            node = node[index]
        if not isinstance(node, dict):
            raise ConfigError(f"--set {key}: '{p}' is not a section; give section.key=value")
    node[last] = parsed


def _indexed(key: str, part: str) -> tuple[str, int | None]:
    """'train[1]' -> ('train', 1); 'train' -> ('train', None)."""
    m = re.fullmatch(r"([^\[\]]+)(?:\[(\d+)\])?", part)
    if m is None:
        raise ConfigError(f"--set {key}: bad key part {part!r}; e.g. data.train[0].weight=2")
    return m[1], None if m[2] is None else int(m[2])


def blamer(where: str, overrides: Sequence[str]) -> Callable[[str | tuple[str, ...]], str]:
    """Who gave the values of some keys: the last `--set` item that set one of them (or a
    section holding it, or a key inside it), else where."""
    sets = [(ALIASES.get(k, k), item)
            for item in reversed(overrides) for k in [item.partition("=")[0]]]

    def blame(keys: str | tuple[str, ...]) -> str:
        keys = (keys,) if isinstance(keys, str) else keys
        keys = tuple(re.sub(r"\[\d+\]", "", ALIASES.get(k, k)) for k in keys)  # data.train[0]
        for set_key, item in sets:
            if any(f"{set_key}.".startswith(f"{key}.") or f"{key}.".startswith(f"{set_key}.")
                   for key in keys):
                return f"--set {item}"
        return where

    return blame


def _checked(raw: dict, blame: Callable[[str | tuple[str, ...]], str],
             checks: Sequence[Check] = ()) -> Config:
    if isinstance(raw.get("data"), dict):
        raw = {**raw, "data": _with_flat_keys_folded(raw["data"], blame)}
    if isinstance(raw.get("decode"), dict) and "no_mask" in raw["decode"]:
        raw = {**raw, "decode": _mask_from_no_mask(raw["decode"])}
    cfg = _dataclass_from(Config, raw, blame, "")
    for check in (_range_problems, *checks):
        for keys, message in check(cfg):
            raise ConfigError(f"{blame(keys)}: {message}")
    return cfg


def _mask_from_no_mask(decode: dict) -> dict:
    """A decode section written before decode.mask: its no_mask (the kinds left in, all
    others masked) as the mask that means the same, so the runs of then still load."""
    decode = dict(decode)
    left = decode.pop("no_mask")
    if "mask" not in decode and isinstance(left, str):
        gone = {k.strip() for k in left.split(",")}
        then = ("template", "url", "email", "number")  # the kinds there were: not "option"
        decode["mask"] = ",".join(k for k in then if k not in gone)
    return decode


def _nearest(name: str, options: Iterable[str]) -> str:
    options = list(options)
    match = difflib.get_close_matches(name, options, n=1, cutoff=0.5)
    return f"; did you mean '{match[0]}'?" if match else f"; valid keys: {', '.join(options)}"


def _dataclass_from(cls, raw: object, blame: Callable[[str], str], prefix: str):
    """An instance of the config dataclass cls from a mapping, every value type-checked."""
    section = prefix.rstrip(".")
    if raw is None:
        raw = {}
    if cls is TokenizerSettings:  # its kind picks the dataclass
        cls, raw = _tokenizer_settings(raw, blame, section)
    if not isinstance(raw, dict):
        raise ConfigError(f"{blame(section)}: '{section}' must be a section (a mapping); "
                          "see configs/ for examples")
    return cls(**_fields_from(cls, raw, blame, prefix))


def _fields_from(cls, raw: dict, blame: Callable[[str], str], prefix: str) -> dict:
    """The fields of the config dataclass cls that a mapping gives, every value type-checked."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in raw.items():
        if key not in names:
            raise ConfigError(f"{blame(f'{prefix}{key}')}: unknown key "
                              f"'{prefix}{key}'{_nearest(str(key), names)}")
        kind = hints[key]
        if dataclasses.is_dataclass(kind):
            kwargs[key] = _dataclass_from(kind, value, blame, f"{prefix}{key}.")
        else:
            kwargs[key] = _coerce(value, kind, blame, f"{prefix}{key}")
    return kwargs


def _coerce(value: object, kind: type, blame: Callable[[str], str], key: str):
    """value as the type `kind` declares (one of a Literal's values; int, float, bool, str,
    or a union of them), or a ConfigError blamed on whoever gave it."""
    if typing.get_origin(kind) is Literal:
        options = typing.get_args(kind)
        if isinstance(value, bool) and {"on", "off"} <= set(options):
            value = "on" if value else "off"  # YAML 1.1 reads on and off as booleans
        if isinstance(value, str) and value in options:
            return value
        raise ConfigError(f"{blame(key)}: {key} must be {_listed(options)}, got {value!r}")
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        kinds = typing.get_args(kind)
    else:
        kinds = (kind,)
    for k in kinds:
        if dataclasses.is_dataclass(k) and isinstance(value, dict):
            return _dataclass_from(k, value, blame, f"{key}.")
        if typing.get_origin(k) is list and isinstance(value, list):
            (item,) = typing.get_args(k)
            return [_dataclass_from(item, v, blame, f"{key}[{i}].") for i, v in enumerate(value)]
        if k is type(None) and value is None:
            return None
        if k is bool and isinstance(value, bool):
            return value
        if k is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if k is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if k is float and isinstance(value, str):
            # PyYAML reads `3e-4` (no dot) as a string; accept what Python reads as a number.
            try:
                return float(value)
            except ValueError:
                pass
        if k is str and isinstance(value, str):
            return value
    if isinstance(value, dict):
        raise ConfigError(f"{blame(key)}: '{key}' is a value, not a section; give "
                          "section.key=value")
    names = " or ".join("a list" if typing.get_origin(k) is list
                        else "a section" if dataclasses.is_dataclass(k)
                        else getattr(k, "__name__", str(k)) for k in kinds)
    raise ConfigError(f"{blame(key)}: '{key}' must be {names}, got {value!r}")


# Every integer key is at most INT_MAX (and at least -INT_MAX), every float key finite, so no
# value reaches torch or numpy arithmetic that overflows; the keys in LIMITS have lower bounds,
# since their values size what is allocated (docs/configuration.md#bounds).
INT_MAX = 2**31 - 1
LIMITS = {**{f"decode.{f.name}": f.metadata["limit"] for f in dataclasses.fields(DecodeConfig)
             if "limit" in f.metadata}, "data.train.weight": 100.0}


def _bound_problems(value: object, key: str) -> Iterator[Problem]:
    """An integer beyond INT_MAX, a float that is not finite, a value beyond its LIMITS, anywhere
    in a config section."""
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from _bound_problems(getattr(value, f.name), f"{key}{f.name}")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _bound_problems(item, f"{key}[{i}].")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    limit = LIMITS.get(re.sub(r"\[\d+\]", "", key))  # data.train[2].weight: data.train.weight
    if isinstance(value, float) and not math.isfinite(value):
        yield key, f"{key} must be a finite number, got {value}"
    elif limit is not None and value > limit:
        yield key, f"{key} must be at most {limit:,g}, got {value:,g}"
    elif isinstance(value, int) and abs(value) > INT_MAX:
        bound = f"at most {INT_MAX:,}" if value > 0 else f"at least {-INT_MAX:,}"
        yield key, f"{key} must be {bound}, got {value}"


def _range_problems(cfg: Config) -> list[Problem]:
    """What types alone cannot express: ranges and settings that need each other, each
    section's (its problems()), then those across sections."""
    bounds = [(key, message) for section in dataclasses.fields(cfg)
              for key, message in _bound_problems(getattr(cfg, section.name),
                                                  f"{section.name}.")]
    if bounds:  # before the checks below compare or compute with them
        return bounds
    d, m = cfg.data, cfg.model
    across = [
        (("model.tie_all", "data.shared_vocab"), not m.tie_all or d.shared_vocab,
         "model.tie_all needs data.shared_vocab: true"),
        (("data.memory.mask", "train.shortlist.k"),
         d.memory is None or not d.memory.mask or cfg.train.shortlist.k >= RELATED,
         f"data.memory.mask needs train.shortlist.k >= {RELATED}: translating reads the words "
         "to mask from the run's lexical shortlist"),
        (("model.decoder_start", "data.tokenizer"),
         d.tokenizer.kind != "marian" or m.decoder_start == "pad",
         "model.decoder_start must be pad with a marian tokenizer (its vocabulary has no <bos>)"),
        (("data.max_len", "model.max_positions"), d.max_len <= m.max_positions - 2,
         f"data.max_len ({d.max_len}) must leave room for <bos>/<eos> within "
         f"model.max_positions ({m.max_positions})"),
    ]
    return [*m.problems(), *d.problems(), *cfg.train.problems(), *cfg.decode.problems(),
            *_failed(across),
            *d.tokenizer.problems(), *_corpus_problems(d)]


def _failed(checks: Iterable[tuple[str | tuple[str, ...], bool, str]]) -> Iterator[Problem]:
    """The problems of (keys, holds, message) checks that do not hold."""
    return ((keys, message) for keys, ok, message in checks if not ok)


TAG = re.compile(r"<[^\s<>]+>")  # a corpus tag: one token in angle brackets, no spaces


def corpus_configs(d: DataConfig) -> list[CorpusConfig]:
    """data.train as a list of corpora, each named: a split name is one plain corpus under
    data.dir."""
    if isinstance(d.train, str):
        return [CorpusConfig(name=Path(d.train).name, format="plain", prefix=d.train)]
    return [dataclasses.replace(c, name=c.name or corpus_format(c.format).default_name(c))
            for c in d.train]


def split_config(d: DataConfig, split: str) -> CorpusConfig:
    """data.val or data.test (split: "val" or "test") as a corpus, named: a split name is one
    plain corpus under data.dir."""
    value = getattr(d, split)
    if isinstance(value, str):
        return CorpusConfig(name=value, format="plain", prefix=value)
    return dataclasses.replace(value, name=value.name or
                               corpus_format(value.format).default_name(value))


def _corpus_problems(d: DataConfig) -> list[Problem]:
    out: list[Problem] = []
    if isinstance(d.train, list) and not d.train:
        out.append(("data.train", "data.train lists no corpora"))
    tagged: dict[str, tuple] = {}
    names: set[str] = set()
    for i, c in enumerate(corpus_configs(d)):
        key = f"data.train[{i}]"
        files = dataclasses.replace(c, name="", weight=1.0, tag="")  # what it reads
        out += [(key, message) for message in corpus_format(c.format).check(c, key)]
        if not c.weight > 0:
            out.append((f"{key}.weight", f"{key}.weight must be positive, got {c.weight}"))
        if c.tag and not TAG.fullmatch(c.tag):
            out.append((f"{key}.tag", f"{key}.tag {c.tag!r}: write a tag as one token in "
                                      "angle brackets, like <bt> or <2de>"))
        if c.tag and tagged.setdefault(c.tag, files) != files:
            out.append((f"{key}.tag", f"{key}.tag {c.tag}: another corpus has this tag; one "
                                      "tag marks one corpus"))
        if c.name in names:
            out.append((f"{key}.name", f"{key}: two corpora are named {c.name!r}; give each "
                                       "its own name"))
        names.add(c.name)
    for split in ("val", "test"):
        c, key = getattr(d, split), f"data.{split}"
        if isinstance(c, CorpusConfig):
            out += [(key, message) for message in corpus_format(c.format).check(c, key)]
            if c.weight != 1 or c.tag:
                out.append((key, f"{key}: a held-out set has no weight or tag"))
    return out


# --- data.tokenizer: a kind's name, or its section; the old flat keys an alias ---------------
TOKENIZER_KEY = "data.tokenizer"
# the old flat keys (data.vocab_size) -> their place in data.tokenizer
ALIASES = {f"data.{key}": f"{TOKENIZER_KEY}.{name}" for key, (_, name, _) in FLAT_KEYS.items()}


def _listed(options: Sequence[str]) -> str:
    return " or ".join(options) if len(options) == 2 else f"one of {', '.join(options)}"


def _kind_of(tokenizer: object) -> object:
    """The kind a raw data.tokenizer names (a name, or a section's kind; None: neither)."""
    if isinstance(tokenizer, dict):
        return tokenizer.get("kind", DEFAULT_KIND)
    return DEFAULT_KIND if tokenizer is None else tokenizer


def _tokenizer_settings(raw: object, blame: Callable[[str], str], key: str
                        ) -> tuple[type[TokenizerSettings], object]:
    """The settings dataclass of the kind raw names, and raw as a section for it."""
    raw = {"kind": raw} if isinstance(raw, str) else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{blame(key)}: '{key}' must be a tokenizer kind ({_listed(KINDS)}) "
                          f"or a section with its kind, got {raw!r}")
    kind = raw.get("kind", DEFAULT_KIND)
    if not isinstance(kind, str) or kind not in KINDS:
        raise ConfigError(f"{blame(key)}: {key} must be {_listed(list(KINDS))}, got {kind!r}")
    return tokenizer_kind(kind).settings, raw


def _with_flat_keys_folded(data: dict, blame: Callable[[str], str]) -> dict:
    """The data section with the old form's keys (mt.tokenizers.FLAT_KEYS: data.vocab_size,
    data.spm_*) moved into data.tokenizer's section, where they win over what it says there
    (they come from --set as often as not). A config saved in the old form holds all of them
    whatever its kind: another kind's are dropped when they hold their old defaults, and
    refused otherwise (before, only spm_alpha was refused; the others were silently without
    effect)."""
    flat = {key: data[key] for key in FLAT_KEYS if key in data}
    if not flat:
        return data
    data = {k: v for k, v in data.items() if k not in FLAT_KEYS}
    tokenizer = data.get("tokenizer", DEFAULT_KIND)
    kind = _kind_of(tokenizer)
    section = dict(tokenizer) if isinstance(tokenizer, dict) else {"kind": kind}
    for key, value in flat.items():
        owner, name, default = FLAT_KEYS[key]
        if owner == kind:
            section[name] = value
        elif value != default:
            raise ConfigError(f"{blame(f'data.{key}')}: data.{key} is a setting of the {owner} "
                              f"tokenizer: it needs data.tokenizer: {owner} (it is {kind})")
    return {**data, "tokenizer": section if len(section) > 1 else kind}
