"""Translating lines, lists and streams: tokenize, length-sorted token-budget batches, search,
detokenize, restore the input order. The search is mt's own (ModelSearch) or another that keeps
the Search protocol (CTranslate2's, mt.ct2.search)."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from mt import align
from mt.checkpoint import Run, load_run, open_run
from mt.config import Config, DecodeConfig, config_from_dict, corpus_configs
from mt.data import group_bounds, pad
from mt.decode import Hypothesis, beam_search, greedy, sample, sequence_scores
from mt.device import has_native_bf16
from mt.ensemble import Ensemble
from mt.errors import ConfigError, DataError
from mt.log import warn
from mt.model import Seq2Seq
from mt.threads import Streams, tick

CHUNK_LINES = 2000  # lines read, sorted and translated together: bounds memory on any input


@dataclass
class Attention:
    """The cross-attention behind one translation, layers and heads averaged (as mt.align
    uses it): weights (T, S), row j the step that predicts output token j."""

    src_tokens: list[str]  # the source's tokens (after a tag), as the tokenizer wrote them
    out_tokens: list[str]  # the output's tokens, before detokenizing
    weights: list[list[float]]  # (T, S), each row summing to 1


@dataclass
class Translation:
    text: str  # detokenized, on one line
    score: float  # length-penalised log-probability (see mt.decode); 0.0 for an empty input
    alignment: str | None = None  # with decode.align: Pharaoh `i-j` word pairs (mt.align)
    attention: Attention | None = None  # with translate_nbest(..., attention=True)


def format_nbest(index: int, translations: list[Translation]) -> str:
    """The n-best format: one `index<TAB>score<TAB>text` line per translation, best first
    (and `<TAB>alignment` after each, with decode.align)."""
    return "".join(f"{index}\t{t.score:.4f}\t{_aligned(t)}\n" for t in translations)


def _aligned(t: Translation) -> str:
    """The text, and a tab and the alignment when there is one."""
    return t.text if t.alignment is None else f"{t.text}\t{t.alignment}"


def record(src: str, translations: list[Translation], nbest: bool) -> dict:
    """One input line's JSON object (`mt translate --format jsonl`, `mt serve`): {"src",
    "text", "score"} of the best translation, its "alignment" (with decode.align) and
    "attention" (when asked for), and with nbest every translation, best first, as
    "nbest": [{"text", "score"}, ...] (each with its "alignment")."""
    best = translations[0]
    fields = {"src": src, **_fields(best)}
    if best.attention is not None:
        fields["attention"] = dataclasses.asdict(best.attention)
    if nbest:
        fields["nbest"] = [_fields(t) for t in translations]
    return fields


def _fields(t: Translation) -> dict:
    fields = {"text": t.text, "score": t.score}
    if t.alignment is not None:
        fields["alignment"] = t.alignment
    return fields


class Search(Protocol):
    """How a Translator decodes a batch: mt's own (ModelSearch) or CTranslate2's
    (mt.ct2.search.CTranslate2Search)."""

    def search(self, src: torch.Tensor, cfg: DecodeConfig, scored: bool,
               prefix: torch.Tensor | None = None) -> list[list[Hypothesis]]:
        """src (B, S) padded ids -> up to cfg.nbest hypotheses per sentence, best first.

        Scores only when scored; otherwise a hypothesis may be scored NaN. prefix (B, P):
        target ids padded with PAD, forced at the start of each sentence's hypotheses (and
        part of them); None: none (mt.decode)."""


class ModelSearch:
    """mt's own search (mt.decode) on a model: beam search when decode.beam > 1, else sampling
    when decode.sampling is set (decode.samples per sentence, in the order drawn), else greedy."""

    def __init__(self, model: Seq2Seq):
        self.model = model

    def search(self, src: torch.Tensor, cfg: DecodeConfig, scored: bool,
               prefix: torch.Tensor | None = None) -> list[list[Hypothesis]]:
        self.model.eval()
        if cfg.beam > 1:
            return beam_search(self.model, src, cfg, prefix)
        n = cfg.samples if cfg.sampling != "none" else 1
        if cfg.sampling != "none":
            hyps = sample(self.model, src, cfg, prefix)
        else:
            hyps = greedy(self.model, src, cfg.max_len_a, cfg.max_len_b, cfg.min_len,
                          cfg.no_repeat_ngram, prefix)
        # Neither scores; rescore (one teacher-forced pass) only when scores are shown.
        scores = (sequence_scores(self.model, src.repeat_interleave(n, 0), hyps, cfg) if scored
                  else [float("nan")] * len(hyps))
        found = [Hypothesis(h, s) for h, s in zip(hyps, scores, strict=True)]
        return [found[i: i + n] for i in range(0, len(found), n)]


def _decoding_model(model: Seq2Seq, dtype: str, device: torch.device) -> Seq2Seq:
    """The model in decode.dtype: itself for float32; for bf16 a copy, so the run's float32
    model stays as it is for whoever else holds it."""
    if dtype != "bf16":
        return model
    if not has_native_bf16(device):
        warn(f"decode.dtype bf16: this {device.type.upper()} device has no native bf16, so it "
             "is emulated and slower than float32")
    return copy.deepcopy(model).to(torch.bfloat16)


SEARCHES = ("mt", "ctranslate2")  # what Translator.load can search with (`mt translate --engine`)
# What the models of an ensemble must share (beside their vocabularies and tokenizer files):
# the settings that make their tokenizers.
SHARED_DATA_KEYS = ("tokenizer", "src_lang", "tgt_lang", "lowercase")
Paths = str | Path | Sequence[str | Path]  # one run (or export), or the runs of an ensemble


def as_paths(path: Paths) -> list[Path]:
    return [Path(path)] if isinstance(path, str | Path) else [Path(p) for p in path]


def open_runs(path: Paths, overrides: Sequence[str] = ()) -> list[Run]:
    """open_run of each path (no model), checked as an ensemble's when there are several."""
    paths = as_paths(path)
    refuse_exports(paths)
    runs = [open_run(p, overrides) for p in paths]
    check_ensemble(runs, paths)
    return runs


def refuse_exports(paths: Sequence[Path]) -> None:
    """A ConfigError for a CTranslate2 export among an ensemble's paths."""
    if len(paths) < 2:
        return
    from mt.ct2.search import is_export  # ct2 is an extra: imported only when needed

    for p in paths:
        if is_export(p):
            raise ConfigError(f"{p}: a CTranslate2 export cannot be part of an ensemble (mt's "
                              "own search decodes ensembles); give the run it was exported from")


def check_ensemble(runs: Sequence[Run], paths: Sequence[Path]) -> None:
    """A ConfigError naming the first difference an ensemble cannot have between a run and the
    first: one source tensor feeds every model and their log-probabilities are averaged token
    by token, so tokenizers and both vocabularies must be the same."""
    first = runs[0]
    for run, path in zip(runs[1:], paths[1:], strict=True):
        what = _first_difference(first, run)
        if what:
            raise ConfigError(f"{path}: cannot be ensembled with {paths[0]}: {what}; the "
                              "models of an ensemble share their tokenizers and vocabularies")


def _first_difference(a: Run, b: Run) -> str | None:
    for key in SHARED_DATA_KEYS:
        if getattr(a.cfg.data, key) != getattr(b.cfg.data, key):
            return (f"its data.{key} is {getattr(b.cfg.data, key)!r}, not "
                    f"{getattr(a.cfg.data, key)!r}")
    for name in sorted(set(a.files) | set(b.files)):
        if a.files.get(name) != b.files.get(name):
            return f"its tokenizer file {name} differs"
    for side, x, y in (("source", a.src_vocab, b.src_vocab), ("target", a.tgt_vocab, b.tgt_vocab)):
        at = next((i for i, (s, t) in enumerate(zip(x.itos, y.itos)) if s != t), None)
        if at is not None:
            return f"its {side} vocabulary differs at id {at} ({y.itos[at]!r}, not {x.itos[at]!r})"
        if len(x) != len(y):
            return f"its {side} vocabulary has {len(y)} tokens, not {len(x)}"
    return None


def _with_options(cfg: Config, decode: DecodeConfig, options: dict) -> DecodeConfig:
    """decode with some of its fields replaced (`beam=5`), checked as the config is: a wrong
    key, type or range is a ConfigError naming it."""
    raw = cfg.to_dict()
    raw["decode"] = {**dataclasses.asdict(decode), **options}
    return config_from_dict(raw, "Translator options").decode


def prefix_mismatch(lines: int, prefixes: int) -> DataError:
    """The error for prefixes that do not pair with the input lines (counts as far as read)."""
    what = (f"the prefixes end after {prefixes} of the input's lines" if prefixes < lines
            else f"more prefixes than the input's {lines} lines")
    return DataError(f"prefix: {what}; give one prefix line (empty for none) per input line")


class Translator:
    """Translates lists of lines (translate, translate_nbest) or streams of them, in input order.

    Translator.load(path, ...) opens a run, a checkpoint or an export; the decoding options
    (DecodeConfig's fields, e.g. beam=5) may be given there and again per call.
    """

    def __init__(self, run: Run, decode: DecodeConfig | None = None,
                 device: torch.device | str = "cpu", search: Search | None = None):
        """decode: the run's config's decode section if None. search: ModelSearch on the run's
        model (in decode.dtype) if None."""
        self.run, self.device = run, torch.device(device)
        self.decode_cfg = decode or run.cfg.decode
        if search is None:
            search = ModelSearch(_decoding_model(run.model, self.decode_cfg.dtype, self.device))
        self.search = search
        self.src_tok, self.tgt_tok = run.src_tok, run.tgt_tok
        self._check_align(self.decode_cfg)
        model = self.model  # an ensemble's max_positions is its shortest model's
        self.max_src = (run.cfg.model if model is None else model.cfg).max_positions
        self.truncated = 0  # source lines cut to the model's positions
        # Lines the streams read, sort and translate together (None: CHUNK_LINES); 1 answers
        # each line as soon as it is read, for someone typing at a terminal.
        self.chunk_lines: int | None = None
        self.streams = Streams()  # batches decoded at once (mt.threads.translation_streams)
        if self.decode_cfg.tag:  # refused now, before any work
            self._tag_id(self.decode_cfg.tag)

    @classmethod
    def load(cls, path: Paths, device: torch.device | str = "cpu", search: str = "mt",
             overrides: Sequence[str] = (), **decode) -> Translator:
        """A Translator for a run directory (its best.pt), a checkpoint file or, with search
        "ctranslate2", an `mt export` directory (a run is then exported on the fly). Several
        runs or checkpoints make an ensemble (mt.ensemble; search "mt"), decoding with the
        first's config.

        search: one of SEARCHES. overrides: `key=value` items over the run's config, as
        `--set`. decode: decoding options over its decode section, e.g. beam=5, nbest=3.
        """
        paths = as_paths(path)
        if search not in SEARCHES:
            raise ConfigError(f"search {search!r}: expected {' or '.join(SEARCHES)}")
        if search == "mt":
            refuse_exports(paths)
            runs = [load_run(p, device, overrides) for p in paths]
            check_ensemble(runs, paths)
            run, cfg = runs[0], _with_options(runs[0].cfg, runs[0].cfg.decode, decode)
            if len(runs) == 1:
                return cls(run, cfg, device)
            model = Ensemble([r.model for r in runs]).eval()
            return cls(run, cfg, device, ModelSearch(_decoding_model(model, cfg.dtype, device)))
        if len(paths) > 1:
            raise ConfigError(f"an ensemble of {len(paths)} models: not with the ctranslate2 "
                              "search (mt's own decodes ensembles)")
        from mt.ct2.search import open_ctranslate2  # an extra: imported only when asked for

        run, ct2 = open_ctranslate2(paths[0], device, overrides)
        return cls(run, _with_options(run.cfg, run.cfg.decode, decode), device, ct2)

    @property
    def model(self) -> Seq2Seq | None:
        """The model mt's own search decodes with (in decode.dtype); None for another search."""
        return self.search.model if isinstance(self.search, ModelSearch) else None

    def translate(self, lines: list[str], prefix: list[str] | None = None, **decode
                  ) -> list[str]:
        """One output per input, in order; empty (or all-whitespace) input gives empty output.

        prefix: a target prefix per input ("" for none), forced and scored, the start of its
        output (tokenized with the target tokenizer). decode: decoding options for this call
        only, e.g. beam=5."""
        return [best[0].text for best in self._translate_list(lines, prefix, False, decode)]

    def translate_nbest(self, lines: list[str], prefix: list[str] | None = None, *,
                        attention: bool = False, **decode) -> list[list[Translation]]:
        """Up to decode.nbest distinct scored translations per input, best first, in input
        order; prefix as for translate; decode: options for this call only, e.g. beam=5,
        nbest=3. attention: give each translation its cross-attention (Translation.attention;
        mt's own search only).

        An empty (or all-whitespace) input has one translation: the empty one, scored 0.0.
        """
        self.check_options(attention)
        return self._translate_list(lines, prefix, True, decode, attention)

    def _translate_list(self, lines: list[str], prefix: list[str] | None, scored: bool,
                        options: dict, attention: bool = False) -> list[list[Translation]]:
        if prefix is not None and len(prefix) != len(lines):
            raise prefix_mismatch(len(lines), len(prefix))
        return self._translate(lines, scored, self._cfg(options), prefix, attention)

    def check_options(self, attention: bool = False, **decode) -> DecodeConfig:
        """The decoding config a translate_nbest call with these arguments would use; the
        ConfigError the call would raise for an unknown key, a wrong type or a value out of
        range, or for attention without mt's own search."""
        if attention:
            self._check_attention("attention weights")
        return self._cfg(decode)

    def _check_align(self, cfg: DecodeConfig) -> None:
        if cfg.align:
            self._check_attention("decode.align: word alignments")

    def _check_attention(self, what: str) -> None:
        if self.model is None:
            raise ConfigError(f"{what} come from mt's own search (its cross-attention), not "
                              "CTranslate2's; use --engine mt")

    def _cfg(self, options: dict) -> DecodeConfig:
        """The decoding config of one call: decode_cfg with its options."""
        if not options:
            return self.decode_cfg
        cfg = _with_options(self.run.cfg, self.decode_cfg, options)
        if cfg.tag:
            self._tag_id(cfg.tag)
        self._check_align(cfg)
        if cfg.dtype != self.decode_cfg.dtype and isinstance(self.search, ModelSearch):
            raise ConfigError(f"decode.dtype {cfg.dtype}: the weights' dtype is chosen when the "
                              f"Translator is made; give it to Translator.load(..., "
                              f"dtype={cfg.dtype!r})")
        return cfg

    def _translate(self, lines: list[str], scored: bool, cfg: DecodeConfig,
                   prefixes: list[str] | None = None, attention: bool = False
                   ) -> list[list[Translation]]:
        ids, tokens = [], []
        lead = [self._tag_id(cfg.tag)] if cfg.tag else []
        room = self.max_src - len(lead)
        for toks in self.src_tok.tokenize_many(lines):
            if len(toks) > room:
                self.truncated += 1
                toks = toks[:room]
            ids.append(lead + self.run.src_vocab.encode(toks) if toks else [])
            tokens.append(toks)
        # A prefix and <eos> must fit the model's positions after <bos>.
        forced = [self.run.tgt_vocab.encode(toks[: self.max_src - 1])
                  for toks in self.tgt_tok.tokenize_many(prefixes or [])]
        out = [[Translation("", 0.0, "" if cfg.align else None)] for _ in lines]
        order = sorted((i for i in range(len(ids)) if ids[i]), key=lambda i: len(ids[i]))
        # beam search decodes K rows per sentence, sampling one per sample: budget K x tokens
        K = max(cfg.beam, cfg.samples)
        sizes = np.array([K * len(ids[i]) for i in order], dtype=np.int64)
        bounds = group_bounds(sizes, np.zeros_like(sizes), cfg.batch_tokens)
        groups = [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

        def decode(group: list[int]) -> list[list[Translation]]:
            tick()  # threads follow the free cores, where the command asked for it
            src = pad([ids[i] for i in group]).to(self.device)
            prefix = None
            if any(forced[i] for i in group if forced):
                prefix = pad([forced[i] for i in group]).to(self.device)
            found = self.search.search(src, cfg, scored, prefix)
            done = [[Translation(self.detokenize(h.tokens), h.score) for h in hyps]
                    for hyps in found]
            if cfg.align or attention:
                self._attend(src, [tokens[i] for i in group], found, done, len(lead),
                             cfg.align, attention)
            return done

        # CTranslate2 runs its own threads; mt's search decodes in streams
        streams = self.streams if isinstance(self.search, ModelSearch) else Streams()
        for group, done in zip(groups, streams.map(decode, groups), strict=True):
            for i, translations in zip(group, done, strict=True):
                out[i] = translations
        return out

    def _tag_id(self, tag: str) -> int:
        """The id of a corpus tag the model was trained with; ConfigError for any other."""
        tags = [c.tag for c in corpus_configs(self.run.cfg.data) if c.tag]
        if tag not in tags or tag not in self.run.src_vocab.stoi:
            have = f"its tags are {', '.join(tags)}" if tags else "it was trained without tags"
            raise ConfigError(f"decode.tag {tag}: not a tag of this model ({have})")
        return self.run.src_vocab.stoi[tag]

    def _attend(self, src: torch.Tensor, tokens: list[list[str]], found: list[list[Hypothesis]],
                out: list[list[Translation]], lead: int, alignment: bool, attention: bool
                ) -> None:
        """Give each translation of a batch (src (B, S), each row's source tokens after `lead`
        tag tokens) its word alignment (mt.align) and/or its cross-attention, from one more
        teacher-forced pass over all of them."""
        rows = [b for b, hyps in enumerate(found) for _ in hyps]
        outputs = [h.tokens for hyps in found for h in hyps]
        weights = align.cross_attention(self.model, src[rows], outputs)
        words = [align.token_words(t, self.src_tok.detokenize) for t in tokens]
        translations = (t for ts in out for t in ts)
        for b, y, w, t in zip(rows, outputs, weights, translations, strict=True):
            out_tokens, w = self.run.tgt_vocab.decode(y), w[:, lead:]  # (T, S) without the tag
            if alignment:
                tgt = align.token_words(out_tokens, self.tgt_tok.detokenize)
                t.alignment = align.pharaoh(align.word_alignment(w, words[b], tgt))
            if attention:  # 4 decimals: enough to draw, and a third of the JSON
                t.attention = Attention(tokens[b], out_tokens,
                                        [[round(v, 4) for v in row] for row in w.tolist()])

    def detokenize(self, ids: list[int]) -> str:
        """Output ids to one line of text."""
        text = self.tgt_tok.detokenize(self.run.tgt_vocab.decode(ids))
        # Only plain spaces inside a line, so no reader splits it into two.
        return " ".join(text.split())

    def translate_stream(self, lines: Iterable[str], prefix: Iterable[str] | None = None,
                         **decode) -> Iterator[str]:
        """Translate an iterable of lines chunk by chunk, yielding outputs in input order;
        prefix: an iterable of as many prefixes, as for translate."""
        return (best[0].text for best in self.translate_nbest_stream(lines, False, prefix,
                                                                     **decode))

    def translate_nbest_stream(self, lines: Iterable[str], scored: bool = True,
                               prefix: Iterable[str] | None = None, **decode
                               ) -> Iterator[list[Translation]]:
        """translate_nbest over an iterable of lines (and of their prefixes), chunk by chunk,
        in input order. More or fewer prefixes than lines is a DataError, raised when the
        shorter ends."""
        cfg, it = self._cfg(decode), iter(lines)
        prefixes = None if prefix is None else iter(prefix)
        size, done = self.chunk_lines or CHUNK_LINES, 0
        while True:
            chunk = list(itertools.islice(it, size))
            forced = None if prefixes is None else list(itertools.islice(prefixes, size))
            if forced is not None and len(forced) != len(chunk):
                raise prefix_mismatch(done + len(chunk), done + len(forced))
            if not chunk:
                break
            done += len(chunk)
            yield from self._translate(chunk, scored, cfg, forced)
        if self.truncated:
            warn(f"{self.truncated} source line(s) longer than model.max_positions "
                 f"({self.max_src} tokens) were truncated")
            self.truncated = 0
