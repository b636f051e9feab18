"""Translating lines, lists and streams: tokenize, length-sorted token-budget batches, an
engine's search, detokenize, restore the input order. The engine is mt's own search
(mt.engines.ModelEngine) or another that keeps the Engine protocol (CTranslate2's,
mt.ct2.search); what a translation is and how it is written: mt.records."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import torch

from mt import align, confidence
from mt.checkpoint import Run, load_run
from mt.compatibility import OWN_SEARCH, own_search_only
from mt.config import Config, DecodeConfig, config_from_dict, corpus_configs
from mt.constrained import Terms
from mt.data import group_bounds, pad
from mt.decode import Hypothesis, Memory
from mt.engines import (
    ENGINES,
    GREEDY_GLOSSARY,
    Engine,
    ModelEngine,
    decoding_model,
    inference_layout,
)
from mt.ensemble import Ensemble, Paths, as_paths, check_ensemble, refuse_exports
from mt.errors import ConfigError, DataError
from mt.glossary import Glossary, GlossaryLike, Matcher, as_glossary
from mt.log import warn
from mt.model import Seq2Seq
from mt.records import Attention, AttentionSpec, Translation
from mt.terminology import MARKERS, annotate
from mt.threads import Streams, translation_streams
from mt.tokenizers import Tokenizer
from mt.vocab import EOS, PAD, SPECIALS

CHUNK_LINES = 2000  # lines read, sorted and translated together: bounds memory on any input


def _with_options(cfg: Config, decode: DecodeConfig, options: dict) -> DecodeConfig:
    """decode with some of its fields replaced (`beam=5`), checked as the config is: a wrong
    key, type or range is a ConfigError naming it."""
    raw = cfg.to_dict()
    raw["decode"] = {**dataclasses.asdict(decode), **options}
    return config_from_dict(raw, "Translator options").decode


def _lines(lines):
    """lines, unless it is one string: iterated, that would be one line per character."""
    if isinstance(lines, str):
        raise TypeError("Translator: give a list of lines, not one string (for one line: "
                        "translate([text]))")
    return lines


def _labels(tokens: list[str], tokenizer: Tokenizer) -> list[str]:
    """Each token as a reader sees it, detokenized alone: spaCy's joiner marks and
    SentencePiece's word-start mark removed (a token that is only marks stays as it is)."""
    return [tokenizer.detokenize([t]).strip() or t for t in tokens]


def _rounded(weights: list, decimals: int | None) -> list:
    if decimals is None:
        return weights
    if weights and isinstance(weights[0], list):
        return [_rounded(w, decimals) for w in weights]
    return [round(v, decimals) for v in weights]


def prefix_mismatch(lines: int, prefixes: int) -> DataError:
    """The error for prefixes that do not pair with the input lines (counts as far as read)."""
    what = (f"the prefixes end after {prefixes} of the input's lines" if prefixes < lines
            else f"more prefixes than the input's {lines} lines")
    return DataError(f"prefix: {what}; give one prefix line (empty for none) per input line")


def glossaries_mismatch(lines: int, glossaries: int) -> DataError:
    """The error for per-line glossaries that do not pair with the input lines."""
    what = (f"the glossaries end after {glossaries} of the input's lines" if glossaries < lines
            else f"more glossaries than the input's {lines} lines")
    return DataError(f"glossaries: {what}; give one glossary (None for none) per input line")


def unkept_message(lines: int, max_src: int) -> str:
    """The warning for lines whose output misses a glossary term."""
    return (f"{lines} line(s) miss a glossary term: the length limit (model.max_positions, "
            f"{max_src}) left no room for it, its target term has a token the model's "
            "vocabulary lacks, or (glossary_mode annotate) the model did not copy it")


def _rows(memory: Memory, rows: list[int]) -> Memory:
    """The encoder output (an ensemble's: one per model) of the batch's rows `rows`."""
    return [m[rows] for m in memory] if isinstance(memory, list) else memory[rows]


class Translator:
    """Translates lists of lines (translate, translate_nbest) or streams of them, in input order.

    Translator.load(path, ...) opens a run, a checkpoint or an export; the decoding options
    (DecodeConfig's fields, e.g. beam=5) may be given there and again per call.
    """

    def __init__(self, run: Run, decode: DecodeConfig | None = None,
                 device: torch.device | str = "cpu", engine: Engine | None = None,
                 streams: Streams | None = None, chunk_lines: int | None = None):
        """decode: the run's config's decode section if None. engine: ModelEngine on the run's
        model (in decode.dtype) if None. streams: how batches are decoded side by side
        (mt.threads.translation_streams; None: one at a time, in the calling thread).
        chunk_lines: lines the streams read, sort and translate together (None: CHUNK_LINES);
        1 answers each line as soon as it is read, for someone typing at a terminal."""
        self.run, self.device = run, torch.device(device)
        self._decoding = decode or run.cfg.decode
        if engine is None:
            engine = ModelEngine(decoding_model(run.model, self._decoding.dtype, self.device))
        self.engine = engine
        self.streams = streams or Streams()
        self.chunk_lines = chunk_lines
        self.src_tok, self.tgt_tok = run.src_tok, run.tgt_tok
        self._check_align(self._decoding)
        if self._decoding.confidence:
            self.calibration  # noqa: B018 (read now: a damaged one fails before any work)
        model = self.model  # an ensemble's max_positions is its shortest model's
        self.max_src = (run.cfg.model if model is None else model.cfg).max_positions
        self.truncated = 0  # source lines cut to the model's positions, since the last warning
        self.unkept = 0  # lines whose output misses a glossary term, since the last warning
        self._no_entries: dict[bool, Matcher] = {}  # matcher()'s of an empty glossary
        if self._decoding.tag:  # refused now, before any work
            self._tag_id(self._decoding.tag)

    @classmethod
    def load(cls, path: Paths, device: torch.device | str = "cpu", engine: str = "mt",
             overrides: Sequence[str] = (), *, threads: int | None = None,
             chunk_lines: int | None = None, **decode) -> Translator:
        """A Translator for a run directory (its best.pt), a checkpoint file or, with engine
        "ctranslate2", an `mt export` directory (a run is then exported on the fly). Several
        runs or checkpoints make an ensemble (mt.ensemble; engine "mt"), decoding with the
        first's config.

        engine: one of ENGINES. overrides: `key=value` items over the run's config, as
        `--set`. threads: None leaves torch's threads as they are and decodes in the calling
        thread; else this process's threads as `--threads` sets them for a command
        (mt.threads.translation_streams: 0 is one stream per core). chunk_lines: as for
        Translator. decode: decoding options over its decode section, e.g. beam=5, nbest=3.
        """
        paths = as_paths(path)
        if engine not in ENGINES:
            raise ConfigError(f"engine {engine!r}: expected {' or '.join(ENGINES)}")
        streams = None if threads is None else translation_streams(threads, device, engine)
        made = {"streams": streams, "chunk_lines": chunk_lines}
        if engine == "mt":
            refuse_exports(paths)
            runs = [load_run(p, device, overrides) for p in paths]
            check_ensemble(runs, paths)
            for r in runs:  # loaded here to decode, never to train
                inference_layout(r.model)
            run, cfg = runs[0], _with_options(runs[0].cfg, runs[0].cfg.decode, decode)
            if len(runs) == 1:
                return cls(run, cfg, device, **made)
            model = Ensemble([r.model for r in runs]).eval()
            return cls(run, cfg, device, ModelEngine(decoding_model(model, cfg.dtype, device)),
                       **made)
        if len(paths) > 1:
            raise ConfigError(f"an ensemble of {len(paths)} models: not with the ctranslate2 "
                              "engine (mt's own search decodes ensembles)")
        from mt.ct2.search import open_ctranslate2  # an extra: imported only when asked for

        run, ct2 = open_ctranslate2(paths[0], device, overrides)
        return cls(run, _with_options(run.cfg, run.cfg.decode, decode), device, ct2, **made)

    def with_options(self, **decode) -> Translator:
        """A Translator of the same run, engine and streams whose default decoding options are
        these over this one's (e.g. a server's batch_tokens), checked as a call's are."""
        return Translator(self.run, self._cfg(decode), self.device, self.engine, self.streams,
                          self.chunk_lines)

    @property
    def decoding(self) -> DecodeConfig:
        """The default decoding options of its calls (with_options makes another's)."""
        return self._decoding

    @property
    def model(self) -> Seq2Seq | None:
        """The model mt's own search decodes with (in decode.dtype); None for another engine."""
        return self.engine.model if isinstance(self.engine, ModelEngine) else None

    def translate(self, lines: list[str], prefix: list[str] | None = None,
                  glossary: GlossaryLike = None,
                  glossaries: Sequence[GlossaryLike] | None = None, **decode) -> list[str]:
        """One output per input, in order; empty (or all-whitespace) input gives empty output.

        prefix: a target prefix per input ("" for none), forced and scored, the start of its
        output (tokenized with the target tokenizer). glossary: a mt.glossary.Glossary, a TSV
        file's path or (source, target) pairs, whose active entries' target terms each output
        holds (docs/terminology.md; beam search). glossaries: one more glossary per input (None
        for none), added to glossary for its line alone (an entry of a source term glossary has
        takes that entry's place). decode: decoding options for this call only, e.g. beam=5."""
        return [best[0].text for best in self._translate_list(lines, prefix, False, decode, None,
                                                              glossary, glossaries)]

    def translate_nbest(self, lines: list[str], prefix: list[str] | None = None, *,
                        attention: bool | AttentionSpec = False, glossary: GlossaryLike = None,
                        glossaries: Sequence[GlossaryLike] | None = None,
                        **decode) -> list[list[Translation]]:
        """Up to decode.nbest distinct scored translations per input, best first, in input
        order; prefix, glossary and glossaries as for translate (with a glossary, each
        translation says its active entries and the terms it misses); decode: options for this
        call only, e.g. beam=5, nbest=3. attention: give each translation its cross-attention
        (Translation.attention: layers and heads averaged, or as the AttentionSpec asks; mt's
        own search only).

        An empty (or all-whitespace) input has one translation: the empty one, scored 0.0.
        """
        self.check_options(bool(attention))
        spec = AttentionSpec() if attention is True else attention or None
        return self._translate_list(lines, prefix, True, decode, spec, glossary, glossaries)

    def _translate_list(self, lines: list[str], prefix: list[str] | None, scored: bool,
                        options: dict, attention: AttentionSpec | None = None,
                        glossary: GlossaryLike = None,
                        glossaries: Sequence[GlossaryLike] | None = None
                        ) -> list[list[Translation]]:
        for given in (lines, prefix or []):
            _lines(given)
        if prefix is not None and len(prefix) != len(lines):
            raise prefix_mismatch(len(lines), len(prefix))
        if glossaries is not None and len(glossaries) != len(lines):
            raise glossaries_mismatch(len(lines), len(glossaries))
        cfg = self._cfg(options)
        matchers = self.line_matchers(self.matcher(glossary, cfg), glossaries, len(lines), cfg)
        return self._translate(lines, scored, cfg, prefix, attention, matchers)

    def matcher(self, glossary: GlossaryLike, cfg: DecodeConfig | None = None
                ) -> Matcher | None:
        """The glossary in this run's tokens, for translations with cfg (decode_cfg if None);
        None for none. A ConfigError where it cannot be kept: constrained (glossary_mode
        constrain or both) by greedy or sampling (beam 1) or by an engine without lexical
        constraints; annotated by a model trained without data.terminology."""
        glossary = as_glossary(glossary)
        if glossary is None:
            return None
        cfg = cfg or self._decoding
        if cfg.glossary_mode != "annotate":
            if self.model is None:
                from mt.ct2.search import NO_TERMS

                raise ConfigError(NO_TERMS)
            if cfg.beam < 2:
                raise ConfigError(f"decode.beam {cfg.beam}: {GREEDY_GLOSSARY}")
        if cfg.glossary_mode != "constrain" and not all(m in self.run.src_vocab.stoi
                                                          for m in MARKERS):
            raise ConfigError(f"decode.glossary_mode {cfg.glossary_mode}: this model was "
                              "trained without data.terminology, so it cannot read annotated "
                              "terms; use glossary_mode constrain")
        if not glossary.entries:  # kept, so that lines' own glossaries extend one Matcher
            key = cfg.glossary_ignore_case
            if key not in self._no_entries:
                self._no_entries[key] = Matcher(glossary, self.src_tok, self.tgt_tok,
                                                self.run.tgt_vocab, key)
            return self._no_entries[key]
        return Matcher(glossary, self.src_tok, self.tgt_tok, self.run.tgt_vocab,
                       cfg.glossary_ignore_case)

    def line_matchers(self, matcher: Matcher | None,
                      glossaries: Iterable[GlossaryLike] | None, lines: int,
                      cfg: DecodeConfig | None = None, start: int = 0
                      ) -> list[Matcher | None]:
        """Each line's Matcher: matcher (the glossary of all lines, or None) extended by the
        line's own glossary (glossaries: one per line, or None for none at all; a bad one is a
        DataError naming `glossaries[i]`, i from start); refused as matcher() refuses."""
        if glossaries is None:
            return [matcher] * lines
        given = [as_glossary(g, f"glossaries[{i}]") for i, g in enumerate(glossaries, start)]
        if matcher is None and any(given):  # a Glossary is true when it has entries
            matcher = self.matcher(Glossary(()), cfg)
        return [matcher.extended(g) if g else matcher for g in given]

    def check_options(self, attention: bool = False, **decode) -> DecodeConfig:
        """The decoding config a translate_nbest call with these arguments would use; the
        ConfigError the call would raise for an unknown key, a wrong type or a value out of
        range, or for attention without mt's own search."""
        if attention:
            self._check_attention(OWN_SEARCH["attention"])
        return self._cfg(decode)

    def _check_align(self, cfg: DecodeConfig) -> None:
        for name in ("align", "confidence"):  # mt.compatibility.OWN_SEARCH
            if getattr(cfg, name):
                self._check_attention(OWN_SEARCH[name])

    @functools.cached_property
    def calibration(self) -> confidence.Calibration | None:
        """The run's calibration (mt calibrate), read and checked once; None without one, and
        for an ensemble (its features are not the calibrated model's)."""
        if isinstance(self.model, Ensemble):
            return None
        return confidence.for_run(self.run.checkpoint, self.run.step)

    @functools.cached_property
    def _dropout_twin(self) -> torch.nn.Module:
        """The model with its dropout on, sharing its weights (decode.mc_dropout); a warning
        where the model has no dropout to turn on."""
        m = self.run.cfg.model
        if not any(r for r in (m.dropout, m.attention_dropout, m.activation_dropout)):
            warn("decode.mc_dropout: the model has no dropout (model.dropout 0), so every pass "
                 "is the same and the variance 0; give the passes some with --set "
                 "model.dropout=0.1")
        return confidence.dropout_twin(self.model)

    def _check_attention(self, what: str) -> None:
        if self.model is None:
            raise ConfigError(own_search_only(what))

    def _cfg(self, options: dict) -> DecodeConfig:
        """The decoding config of one call: decode_cfg with its options."""
        if not options:
            return self._decoding
        cfg = _with_options(self.run.cfg, self._decoding, options)
        if cfg.tag:
            self._tag_id(cfg.tag)
        self._check_align(cfg)
        if cfg.dtype != self._decoding.dtype and isinstance(self.engine, ModelEngine):
            raise ConfigError(f"decode.dtype {cfg.dtype}: the weights' dtype is chosen when the "
                              f"Translator is made; give it to Translator.load(..., "
                              f"dtype={cfg.dtype!r})")
        return cfg

    def _translate(self, lines: list[str], scored: bool, cfg: DecodeConfig,
                   prefixes: list[str] | None = None, attention: AttentionSpec | None = None,
                   matchers: list[Matcher | None] | None = None) -> list[list[Translation]]:
        """matchers: each line's glossary (line_matchers), or None for none."""
        matchers = matchers or [None] * len(lines)
        ids, tokens, active = [], [], []
        lead = [self._tag_id(cfg.tag)] if cfg.tag else []
        room = self.max_src - len(lead)
        for toks, matcher in zip(self.src_tok.tokenize_many(lines), matchers, strict=True):
            spans = matcher.spans(toks) if matcher else []
            active.append(list(dict.fromkeys(e for _, _, e in spans)))
            if spans and cfg.glossary_mode != "constrain":  # as data.terminology trained it
                toks = annotate(toks, spans, matcher.target_tokens, MARKERS)
            if len(toks) > room:
                self.truncated += 1
                toks = toks[:room]
            ids.append(lead + self.run.src_vocab.encode(toks) if toks else [])
            tokens.append(toks)
        # A prefix and <eos> must fit the model's positions after <bos>.
        forced = [self.run.tgt_vocab.encode(toks[: self.max_src - 1])
                  for toks in self.tgt_tok.tokenize_many(prefixes or [])]
        out = [[Translation("", 0.0, "" if cfg.align else None, terms=empty, missing=empty)]
               for empty in ([] if m else None for m in matchers)]
        order = sorted((i for i in range(len(ids)) if ids[i]), key=lambda i: len(ids[i]))
        # beam search decodes K rows per sentence, sampling one per sample: budget K x tokens
        K = max(cfg.beam, cfg.samples)
        sizes = np.array([K * len(ids[i]) for i in order], dtype=np.int64)
        bounds = group_bounds(sizes, np.zeros_like(sizes), cfg.batch_tokens)
        groups = [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

        def decode(group: list[int]) -> list[list[Translation]]:
            src = pad([ids[i] for i in group]).to(self.device)
            prefix = None
            if any(forced[i] for i in group if forced):
                prefix = pad([forced[i] for i in group]).to(self.device)
            terms = None
            if any(matchers[i] for i in group) and cfg.glossary_mode != "annotate":
                terms = Terms.of([matchers[i].terms(active[i]) if matchers[i] else []
                                  for i in group], cfg.glossary_ordered, self.device)
            memory, more = None, ()
            if cfg.align or attention or cfg.confidence:  # encoded once: search and passes
                with torch.no_grad():
                    memory = self.model.encode(src, self.model.src_mask(src))
                # the search keeps the alignment's attention and the confidence's record as
                # it goes (no second pass)
                more = (memory, cfg.align and not attention, cfg.confidence)
            found = self.engine.search(src, cfg, scored, prefix, terms, *more)
            done = [[Translation(self.detokenize(h.tokens), h.score) for h in hyps]
                    for hyps in found]
            for i, hyps, ts in zip(group, found, done, strict=True):
                if (matcher := matchers[i]) is not None:
                    for h, t in zip(hyps, ts, strict=True):
                        t.terms = [list(matcher.glossary.entries[e]) for e in active[i]]
                        t.missing = matcher.missing(active[i], h.tokens)
            if cfg.align or attention:
                self._attend(src, [tokens[i] for i in group], found, done, len(lead),
                             cfg.align, attention, memory)
            if cfg.confidence:
                self._confide(src, found, done, len(lead), memory, cfg)
            return done

        for group, done in zip(groups, self.streams.map(decode, groups), strict=True):
            for i, translations in zip(group, done, strict=True):
                out[i] = translations
                self.unkept += bool(translations[0].missing)
        return out

    def _tag_id(self, tag: str) -> int:
        """The id of a corpus tag the model was trained with; ConfigError for any other."""
        tags = [c.tag for c in corpus_configs(self.run.cfg.data) if c.tag]
        if tag not in tags or tag not in self.run.src_vocab.stoi:
            have = f"its tags are {', '.join(tags)}" if tags else "it was trained without tags"
            raise ConfigError(f"decode.tag {tag}: not a tag of this model ({have})")
        return self.run.src_vocab.stoi[tag]

    def _attend(self, src: torch.Tensor, tokens: list[list[str]], found: list[list[Hypothesis]],
                out: list[list[Translation]], lead: int, alignment: bool,
                attention: AttentionSpec | None, memory: Memory) -> None:
        """Give each translation of a batch (src (B, S), each row's source tokens after `lead`
        tag tokens, memory: the model's encode(src)) its word alignment (mt.align) and/or its
        cross-attention, from one more teacher-forced pass of the decoder over all of them
        (two when the attention asked for is not the alignment's)."""
        rows = [b for b, hyps in enumerate(found) for _ in hyps]
        memory = _rows(memory, rows)
        outputs = [h.tokens for hyps in found for h in hyps]
        averaged = shown = [None] * len(rows)  # one teacher-forced pass each, where needed
        kept = [h.attention for hyps in found for h in hyps]
        lengths = (src[rows] != PAD).sum(1).tolist()
        if alignment and attention is None and all(a is not None for a in kept):
            averaged = [a[:, :n].cpu() for a, n in zip(kept, lengths, strict=True)]  # the search's
        elif alignment or (attention is not None and attention.averaged):
            averaged = shown = align.cross_attention(self.model, src[rows], outputs,
                                                     memory=memory)
        if attention is not None and not attention.averaged:
            shown = align.cross_attention(self.model, src[rows], outputs, attention.layer,
                                          attention.heads, attention.end, memory)
        words = [align.token_words(t, self.src_tok) for t in tokens] if alignment else []
        labels = [_labels(t, self.src_tok) for t in tokens] if attention is not None else []
        translations = (t for ts in out for t in ts)
        for b, y, w, a, t in zip(rows, outputs, averaged, shown, translations, strict=True):
            out_tokens = self.run.tgt_vocab.decode(y)
            if alignment:
                tgt = align.token_words(out_tokens, self.tgt_tok)
                t.alignment = align.pharaoh(align.word_alignment(w[:, lead:], words[b], tgt))
            if attention is not None:  # (..., T, S) without the tag's columns
                a = a[..., lead:]
                ends = [SPECIALS[EOS]] if attention.end else []
                t.attention = Attention(tokens[b], out_tokens + ends,
                                        _rounded(a.tolist(), attention.decimals),
                                        labels[b],
                                        _labels(out_tokens, self.tgt_tok) + ends)

    def _confide(self, src: torch.Tensor, found: list[list[Hypothesis]],
                 out: list[list[Translation]], lead: int, memory: Memory,
                 cfg: DecodeConfig) -> None:
        """Give each translation of a batch its features, its words' probabilities and, with
        a calibration, its confidence (mt.confidence), from what the search recorded of it
        (mt.trace; a teacher-forced pass over memory, the search's encoder output, for an
        engine that records nothing); with decode.mc_dropout, N passes more."""
        rows = [b for b, hyps in enumerate(found) for _ in hyps]
        outputs = [h.tokens for hyps in found for h in hyps]
        traces = [h.trace for hyps in found for h in hyps]
        if all(tr is not None for tr in traces):
            lengths = (src[rows] != PAD).sum(1).tolist()
            feats, lps = confidence.traced_features(traces, outputs, lengths, lead)
        else:
            feats, lps = confidence.features(self.model, src[rows], outputs, lead,
                                             _rows(memory, rows))
        if cfg.mc_dropout:
            drawn = confidence.mc_dropout(self._dropout_twin, src[rows], outputs,
                                          cfg.mc_dropout, cfg.seed)
            for f, d in zip(feats, drawn, strict=True):
                f.update(d)
        cal = self.calibration
        probs = cal.predict(feats) if cal else [None] * len(feats)
        for ts in out:
            if len(ts) > 1:
                texts = [t.text for t in ts]
                for t, d in zip(ts, confidence.disagreement(texts), strict=True):
                    t.features = {"nbest_disagreement": d}
        translations = (t for ts in out for t in ts)
        for y, f, lp, p, t in zip(outputs, feats, lps, probs, translations, strict=True):
            f.update(t.features or {})
            t.features, t.confidence = f, p
            t.flags = cal.flags(f) if cal else None
            words = t.text.split()
            least = [0.0] * len(words)  # per word, its least likely token's log-probability
            at = align.token_words(self.run.tgt_vocab.decode(y), self.tgt_tok)
            for w, v in zip(at, lp, strict=False):  # <eos>'s, last, is no word's
                if w < len(words):
                    least[w] = min(least[w], v)
            t.words = [[word, round(math.exp(v), 4)] for word, v in zip(words, least)]

    def detokenize(self, ids: list[int]) -> str:
        """Output ids to one line of text."""
        text = self.tgt_tok.detokenize(self.run.tgt_vocab.decode(ids))
        # Only plain spaces inside a line, so no reader splits it into two.
        return " ".join(text.split())

    def translate_stream(self, lines: Iterable[str], prefix: Iterable[str] | None = None,
                         glossary: GlossaryLike = None,
                         glossaries: Iterable[GlossaryLike] | None = None,
                         **decode) -> Iterator[str]:
        """Translate an iterable of lines chunk by chunk, yielding outputs in input order;
        prefix and glossaries: iterables of as many prefixes and glossaries, and glossary, as
        for translate."""
        return (best[0].text for best in self.translate_nbest_stream(
            lines, False, prefix, glossary, glossaries, **decode))

    def translate_nbest_stream(self, lines: Iterable[str], scored: bool = True,
                               prefix: Iterable[str] | None = None,
                               glossary: GlossaryLike = None,
                               glossaries: Iterable[GlossaryLike] | None = None, **decode
                               ) -> Iterator[list[Translation]]:
        """translate_nbest over an iterable of lines (and of their prefixes and glossaries),
        chunk by chunk, in input order. More or fewer prefixes or glossaries than lines is a
        DataError, raised when the shorter ends."""
        cfg, it = self._cfg(decode), iter(_lines(lines))
        matcher = self.matcher(glossary, cfg)  # refused now, before any line is read
        prefixes = None if prefix is None else iter(prefix)
        own = None if glossaries is None else iter(glossaries)
        size, done = self.chunk_lines or CHUNK_LINES, 0
        while True:
            chunk = list(itertools.islice(it, size))
            forced = None if prefixes is None else list(itertools.islice(prefixes, size))
            if forced is not None and len(forced) != len(chunk):
                raise prefix_mismatch(done + len(chunk), done + len(forced))
            mine = None if own is None else list(itertools.islice(own, size))
            if mine is not None and len(mine) != len(chunk):
                raise glossaries_mismatch(done + len(chunk), done + len(mine))
            if not chunk:
                break
            matchers = self.line_matchers(matcher, mine, len(chunk), cfg, done)
            done += len(chunk)
            yield from self._translate(chunk, scored, cfg, forced, matchers=matchers)
        self.report()

    def report(self) -> None:
        """Warn of the lines since the last report that miss a glossary term or were cut to
        the model's positions (one line each), and count afresh."""
        if self.unkept:
            warn(unkept_message(self.unkept, self.max_src))
            self.unkept = 0
        if self.truncated:
            warn(f"{self.truncated} source line(s) longer than model.max_positions "
                 f"({self.max_src} tokens) were truncated")
            self.truncated = 0
