"""Translating lines, lists and streams: tokenize, length-sorted token-budget batches, an
engine's search, detokenize, restore the input order. The engine is mt's own search
(mt.decoding.engines.ModelEngine) or another that keeps the Engine protocol (CTranslate2's,
mt.ct2.search); what a translation is and how it is written: mt.records."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from mt import confidence, own_words, unknowns
from mt.attention import Searched, attend, labels
from mt.checkpoint import Run, load_run
from mt.compatibility import OWN_SEARCH, own_search_only
from mt.config import DecodeConfig, corpus_configs, with_decode
from mt.data import group_bounds, pad
from mt.decoding.align import token_words
from mt.decoding.engines import ENGINES, Engine, ModelEngine, search_with
from mt.decoding.lexical import Terms
from mt.decoding.precision import decoding_model, inference_layout
from mt.decoding.request import Hypothesis, SearchRequest
from mt.ensemble import Ensemble
from mt.errors import ConfigError, DataError
from mt.fuzzy_repair import GAP, MARKER, augment, lexicon, masked, unrelated
from mt.glossary import (
    Glossary,
    GlossaryLike,
    Matcher,
    Matchers,
    as_glossary,
    occurrences,
    own_glossaries,
    per_line,
    quoted,
)
from mt.log import warn
from mt.memory import Match, Memory, open_memory
from mt.model import Seq2Seq
from mt.records import AttentionSpec, Translation
from mt.runs import Paths, as_paths, check_ensemble, refuse_exports
from mt.terminology import MARKERS, annotate
from mt.threads import Streams, translation_streams
from mt.vocab import UNK

CHUNK_LINES = 2000  # lines read, sorted and translated together: bounds memory on any input


def _lines(lines):
    """lines, unless it is one string: iterated, that would be one line per character."""
    if isinstance(lines, str):
        raise TypeError("Translator: give a list of lines, not one string (for one line: "
                        "translate([text]))")
    return lines


def _stems(token: str) -> list[str]:
    """A letters-only token's prefixes (a subword mark before its letters kept) that keep at
    least three of its letters and lack at most two: two tokens sharing one are forms of one
    word (girl, girls; Hund, Hunden). None for a token with anything but letters."""
    k = next((n for n, c in enumerate(token) if c.isalpha()), None)
    if k is None or not token[k:].isalpha():
        return []
    return [token[:n] for n in range(max(k + 3, len(token) - 2), len(token) + 1)]


def reused(match: Match | None, cfg: DecodeConfig) -> bool:
    """Whether a line with this best match is its stored target, not decoded: a match at or
    above decode.memory_reuse (100: exact) under decode.memory_exact reuse."""
    return match is not None and match.score >= cfg.memory_reuse and cfg.memory_exact == "reuse"


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


def unkept_message(lines: int, max_src: int, modes: Iterable[str] = ("constrain", "annotate"),
                   terms: Sequence[str] = ()) -> str:
    """The warning for lines whose output misses a glossary term it could hold (a term no
    output can hold is named when the glossary is read: Matchers.warn_unwritable): why, by
    the glossary modes used (constrain: the search holds every term but where the length
    limit leaves no room; annotate: the model may not copy it), and the terms."""
    causes = []
    if {"constrain", "both"} & set(modes):
        causes.append(f"the length limit (decode.max_len_a and max_len_b, model.max_positions "
                      f"{max_src}) left no room for it")
    if {"annotate", "both"} & set(modes):
        causes.append("the model did not copy the annotated term (glossary_mode annotate)")
    named = f" ({quoted(terms)})" if terms else ""
    return f"{lines} line(s) miss a glossary term{named}: {', or '.join(causes)}"


class Warned(NamedTuple):
    """What a Translator has to warn of (Translator.warnings)."""

    truncated: int  # source lines cut to the model's positions
    unkept: int  # lines whose output misses a glossary term


@dataclass
class Plan:
    """A call's lines made ready for the engine (Translator._plan), and batched: `groups`."""

    lead: list[int]  # the ids before each source: decode.tag's, or none
    matchers: list[Matcher | None]  # each line's glossary
    ids: list[list[int]] = field(default_factory=list)  # each line's source; [] if empty
    tokens: list[list[str]] = field(default_factory=list)  # as ids says (no lead)
    active: list[list[int]] = field(default_factory=list)  # its glossary's active entries
    spans: list[list[tuple[int, int, int]]] = field(default_factory=list)  # matcher.spans's
    forced: list[list[int]] = field(default_factory=list)  # each prefix's ids; [] for none
    forced_tokens: list[list[str]] = field(default_factory=list)  # as forced says

    def groups(self, rows: int, batch_tokens: int, among: Iterable[int] | None = None
               ) -> list[list[int]]:
        """The lines with a source (of `among`: all if None), shortest first, in groups of at
        most batch_tokens tokens (rows: the rows a line is decoded as)."""
        lines = range(len(self.ids)) if among is None else among
        order = sorted((i for i in lines if self.ids[i]), key=lambda i: len(self.ids[i]))
        sizes = np.array([rows * len(self.ids[i]) for i in order], dtype=np.int64)
        bounds = group_bounds(sizes, np.zeros_like(sizes), batch_tokens)
        return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def source(self, group: list[int], device: torch.device) -> torch.Tensor:
        """The group's source ids, (B, S)."""
        return pad([self.ids[i] for i in group]).to(device)

    def prefix(self, group: list[int], device: torch.device) -> torch.Tensor | None:
        """The group's prefix ids, (B, P); None where none of them has one."""
        if self.forced and any(self.forced[i] for i in group):
            return pad([self.forced[i] for i in group]).to(device)
        return None

    def constrained(self, group: list[int], cfg: DecodeConfig) -> bool:
        """Whether the group's search holds terms (glossary_mode constrain or both)."""
        return cfg.glossary_mode != "annotate" and any(self.matchers[i] for i in group)

    def terms(self, group: list[int], cfg: DecodeConfig, device: torch.device,
              blocked: list[list[list[int]]] | None = None) -> Terms | None:
        """The target terms the group's outputs must hold (None where they hold none); a word
        the vocabulary lacks is <unk> in its place, but with decode.unk show. blocked: per
        line, per active entry, the ids it blocks while pending (mt.own_words)."""
        if not self.constrained(group, cfg):
            return None
        terms = [self.matchers[i].terms(self.active[i], cfg.unk != "show")
                 if self.matchers[i] else [] for i in group]
        if blocked is not None and cfg.unk == "show":  # the entries terms() left out
            blocked = [[own for e, own in zip(self.active[i], b, strict=True)
                        if UNK not in self.matchers[i].targets[e]]
                       for i, b in zip(group, blocked, strict=True)]
        return Terms.of(terms, cfg.glossary_ordered, device, blocked)

    def held(self, i: int, hyps: list[Hypothesis], cfg: DecodeConfig) -> bool:
        """Whether every output of line i holds each of its terms (its ids in a row, as
        `mt eval` counts term use) where no search must place them: not in order
        (decode.glossary_ordered), and none with a word the vocabulary lacks (its <unk>)."""
        m = self.matchers[i]
        if m is None or not self.active[i]:
            return True
        return not cfg.glossary_ordered and not any(
            m.missing(self.active[i], h.tokens, placeholders=False) for h in hyps)

    def term_spans(self, i: int) -> list[own_words.Span]:
        """Line i's active entries' source spans (the first of each) and target ids, in
        the order of active."""
        first = {}
        for start, stop, e in self.spans[i]:
            first.setdefault(e, (start, stop))
        m = self.matchers[i]
        return [(*first[e], m.targets[e]) for e in self.active[i]]

    def term_words(self, i: int) -> list[unknowns.Term]:
        """Line i's active glossary terms, ids and tokens (what a term's <unk> stands for)."""
        m = self.matchers[i]
        return [] if m is None else [(m.targets[e], m.target_tokens[e]) for e in self.active[i]]

    def prefix_tokens(self, i: int) -> list[str]:
        return self.forced_tokens[i] if self.forced_tokens else []

    def mark(self, group: list[int], found: list[list[Hypothesis]],
             done: list[list[Translation]], placeholders: bool) -> None:
        """Each translation of a line with a glossary: its active entries, its missing terms
        (placeholders: a term's <unk> stands for its word the vocabulary lacks)."""
        for i, hyps, ts in zip(group, found, done, strict=True):
            if (matcher := self.matchers[i]) is not None:
                for h, t in zip(hyps, ts, strict=True):
                    t.terms = [list(matcher.glossary.entries[e]) for e in self.active[i]]
                    t.missing = matcher.missing(self.active[i], h.tokens, placeholders)


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
            engine = ModelEngine(decoding_model(run.model, self._decoding.dtype, self.device),
                                 run.shortlist)
        self.engine = engine
        self.streams = streams or Streams()
        self.chunk_lines = chunk_lines
        self.src_tok, self.tgt_tok = run.src_tok, run.tgt_tok
        self._check_align(self._decoding)
        if self._decoding.confidence:
            self.calibration  # noqa: B018 (read now: a damaged one fails before any work)
        model = self.model  # an ensemble's max_positions is its shortest model's
        self.max_src = (run.cfg.model if model is None else model.cfg).max_positions
        self._truncated = 0  # source lines cut to the model's positions, since the last warning
        self._unkept = 0  # lines whose output misses a glossary term, since the last warning
        self._unkept_terms: dict[str, None] = {}  # those terms, and the glossary modes used
        self._unkept_modes: set[str] = set()
        self._matchers = Matchers(self.src_tok, self.tgt_tok, run.tgt_vocab)
        self._memories: dict[str, Memory] = {}  # decode.memory's, opened when first used
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
            run, cfg = runs[0], with_decode(runs[0].cfg.decode, decode)
            if len(runs) == 1:
                return cls(run, cfg, device, **made)
            model = Ensemble([r.model for r in runs]).eval()
            # the members share vocabularies (check_ensemble): the first run's table is theirs
            return cls(run, cfg, device, ModelEngine(decoding_model(model, cfg.dtype,
                                                                    torch.device(device)),
                                                     run.shortlist), **made)
        if len(paths) > 1:
            raise ConfigError(f"an ensemble of {len(paths)} models: not with the ctranslate2 "
                              "engine (mt's own search decodes ensembles)")
        from mt.ct2.search import open_ctranslate2  # an extra: imported only when asked for

        run, ct2 = open_ctranslate2(paths[0], device, overrides)
        return cls(run, with_decode(run.cfg.decode, decode), device, ct2, **made)

    def with_options(self, **decode) -> Translator:
        """A Translator of the same run, engine and streams whose default decoding options are
        these over this one's (e.g. a server's batch_tokens), checked as a call's are."""
        made = Translator(self.run, self._cfg(decode), self.device, self.engine, self.streams,
                          self.chunk_lines)
        made._memories = self._memories  # one connection to a memory, whatever the options
        return made

    @property
    def decoding(self) -> DecodeConfig:
        """The default decoding options of its calls (with_options makes another's)."""
        return self._decoding

    @property
    def model(self) -> Seq2Seq | None:
        """The model mt's own search decodes with (in decode.dtype); None for another engine."""
        return self.engine.model

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
                        matches: Sequence[Match | None] | None = None,
                        **decode) -> list[list[Translation]]:
        """Up to decode.nbest distinct scored translations per input, best first, in input
        order; prefix, glossary and glossaries as for translate (with a glossary, each
        translation says its active entries and the terms it misses); decode: options for this
        call only, e.g. beam=5, nbest=3. attention: give each translation its cross-attention
        (Translation.attention: layers and heads averaged, or as the AttentionSpec asks; mt's
        own search only). matches: each input's best match in decode.memory (at or above
        decode.memory_threshold, else None), where the caller has looked them up (mt serve's
        memory thread): used as this call's own lookups would be, and not looked up again.

        An empty (or all-whitespace) input has one translation: the empty one, scored 0.0.
        """
        self.check_options(bool(attention))
        spec = AttentionSpec() if attention is True else attention or None
        if matches is not None and len(matches) != len(lines):
            raise ValueError(f"{len(lines)} lines and {len(matches)} matches: give one per line")
        return self._translate_list(lines, prefix, True, decode, spec, glossary, glossaries,
                                    matches)

    def _translate_list(self, lines: list[str], prefix: list[str] | None, scored: bool,
                        options: dict, attention: AttentionSpec | None = None,
                        glossary: GlossaryLike = None,
                        glossaries: Sequence[GlossaryLike] | None = None,
                        matches: Sequence[Match | None] | None = None
                        ) -> list[list[Translation]]:
        for given in (lines, prefix or []):
            _lines(given)
        if prefix is not None and len(prefix) != len(lines):
            raise prefix_mismatch(len(lines), len(prefix))
        if glossaries is not None and len(glossaries) != len(lines):
            raise glossaries_mismatch(len(lines), len(glossaries))
        cfg = self._cfg(options)
        matchers = self.line_matchers(self.matcher(glossary, cfg), glossaries, len(lines), cfg)
        return self._translate(lines, scored, cfg, prefix, attention, matchers, matches)

    def matcher(self, glossary: GlossaryLike, cfg: DecodeConfig | None = None
                ) -> Matcher | None:
        """The glossary in this run's tokens, for translations with cfg (decoding if None);
        None for none. A ConfigError where it cannot be kept: constrained (glossary_mode
        constrain or both) by greedy or sampling (beam 1) or by an engine without lexical
        constraints; annotated by a model trained without data.terminology."""
        glossary = as_glossary(glossary)
        if glossary is None:
            return None
        cfg = cfg or self._decoding
        self._check_glossary(cfg)
        return self._matchers.of(glossary, cfg.glossary_ignore_case)

    def _check_glossary(self, cfg: DecodeConfig) -> None:
        if cfg.glossary_mode != "annotate" and not (can := self.engine.capabilities(cfg)).terms:
            raise ConfigError(can.no_terms)
        if cfg.glossary_mode != "constrain" and not all(m in self.run.src_vocab.stoi
                                                          for m in MARKERS):
            raise ConfigError(f"decode.glossary_mode {cfg.glossary_mode}: this model was "
                              "trained without data.terminology, so it cannot read annotated "
                              "terms; use glossary_mode constrain")

    def line_matchers(self, matcher: Matcher | None,
                      glossaries: Iterable[GlossaryLike] | None, lines: int,
                      cfg: DecodeConfig | None = None, start: int = 0
                      ) -> list[Matcher | None]:
        """Each line's Matcher: matcher (the glossary of all lines, or None) extended by the
        line's own glossary (glossaries: one per line, or None for none at all; a bad one is a
        DataError naming `glossaries[i]`, i from start); refused as matcher() refuses."""
        if glossaries is None:
            return [matcher] * lines
        own = own_glossaries(glossaries, start)
        if matcher is None and any(own):  # a Glossary is true when it has entries
            matcher = self.matcher(Glossary(()), cfg)
        lines_own = per_line(matcher, own)
        for m in {id(m): m for m in lines_own if m is not None}.values():
            self._matchers.warn_unwritable(m)  # a line's own glossary's, as it is read
        return lines_own

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
        """The model with its dropout on, sharing its weights (decode.mc_dropout)."""
        return confidence.mc_dropout_twin(self.model, self.run.cfg.model)

    def _check_attention(self, what: str) -> None:
        if self.model is None:
            raise ConfigError(own_search_only(what))

    def _cfg(self, options: dict) -> DecodeConfig:
        """The decoding config of one call: the default options with these."""
        if not options:
            return self._decoding
        cfg = with_decode(self._decoding, options)
        if cfg.tag:
            self._tag_id(cfg.tag)
        self._check_align(cfg)
        if cfg.dtype != self._decoding.dtype and self.model is not None:
            raise ConfigError(f"decode.dtype {cfg.dtype}: the weights' dtype is chosen when the "
                              f"Translator is made; give it to Translator.load(..., "
                              f"dtype={cfg.dtype!r})")
        return cfg

    def memory(self, cfg: DecodeConfig | None = None) -> Memory | None:
        """The translation memory decode.memory names (cfg: decoding's if None), opened once;
        None without one. A DataError for a missing or damaged one, or one of another
        language pair than the run's."""
        where = (cfg or self._decoding).memory
        if not where:
            return None
        if where not in self._memories:
            memory = open_memory(where)
            data = self.run.cfg.data
            try:
                memory.check_langs(data.src_lang, data.tgt_lang, "this model's languages")
            except BaseException:
                memory.close()
                raise
            self._memories[where] = memory
        return self._memories[where]

    def matches(self, lines: Sequence[str], cfg: DecodeConfig | None = None
                ) -> list[Match | None]:
        """Each line's best match in decode.memory at or above decode.memory_threshold (None
        where none, for an empty line, and for every line without a memory)."""
        cfg = cfg or self._decoding
        memory = self.memory(cfg)
        if memory is None:
            return [None] * len(lines)
        return [memory.best(line, cfg.memory_threshold) for line in lines]

    @property
    def repair_threshold(self) -> float | None:
        """The match percentage from which a line is augmented with its match's target: the
        run's data.memory.threshold; None for a run trained without data.memory."""
        trained = self.run.cfg.data.memory
        if trained is None or MARKER not in self.run.src_vocab.stoi:
            return None
        return trained.threshold

    def _translate(self, lines: list[str], scored: bool, cfg: DecodeConfig,
                   prefixes: list[str] | None = None, attention: AttentionSpec | None = None,
                   matchers: list[Matcher | None] | None = None,
                   found: Sequence[Match | None] | None = None) -> list[list[Translation]]:
        """matchers: each line's glossary (line_matchers), or None for none. found: each line's
        match in decode.memory, looked up here if None. A line whose match is reused (`reused`:
        exact, or at decode.memory_reuse) is its match's target, not decoded; the others are
        decoded (augmented with their match, for a run trained with it)."""
        found = self.matches(lines, cfg) if found is None else list(found)
        reuse = [reused(m, cfg) for m in found]
        plan = self._plan(["" if r else line for line, r in zip(lines, reuse)], cfg, prefixes,
                          matchers or [None] * len(lines), found)
        out = [[Translation(m.target, 0.0, match=m)] if r else
               [Translation("", 0.0, "" if cfg.align else None, terms=empty, missing=empty)]
               for m, r, empty in zip(found, reuse, ([] if g else None for g in plan.matchers))]
        # beam search decodes K rows per sentence, sampling one per sample: budget K x tokens
        groups = plan.groups(max(cfg.beam, cfg.samples), cfg.batch_tokens)
        search = functools.partial(self._search, plan, cfg, scored, attention)
        searched = list(self.streams.map(search, groups))
        if self.model is not None and any(plan.constrained(g, cfg) for g in groups):
            self._hold_terms(plan, cfg, scored, attention, groups, searched)
        finish = functools.partial(self._finish, plan, cfg, attention)
        for group, done in zip(groups, self.streams.map(finish, zip(groups, searched)),
                               strict=True):
            for i, translations in zip(group, done, strict=True):
                out[i] = translations
                self._count_unkept(translations[0].missing, plan.matchers[i], cfg)
                for t in translations:
                    t.match = found[i]
        return out

    def _count_unkept(self, missing: list[str] | None, matcher: Matcher | None,
                      cfg: DecodeConfig) -> None:
        """Count a line missing a term it could hold (report warns of them); the terms no
        output can hold (with decode.unk show) were named when the glossary was read."""
        cut = [t for t in missing or ()  # missing: a matcher's
               if cfg.unk != "show" or t not in matcher.unwritable]
        if cut:
            self._unkept += 1
            self._unkept_terms.update(dict.fromkeys(cut))
            self._unkept_modes.add(cfg.glossary_mode)

    def _plan(self, lines: list[str], cfg: DecodeConfig, prefixes: list[str] | None,
              matchers: list[Matcher | None], found: list[Match | None]) -> Plan:
        """The lines tokenized (their glossaries' terms annotated but for glossary_mode
        constrain, as data.terminology trained the model; followed by their memory match's
        target as data.memory trained it; cut to the model's positions) and their prefixes,
        as ids."""
        plan = Plan([self._tag_id(cfg.tag)] if cfg.tag else [], matchers)
        room = self.max_src - len(plan.lead)
        lines_tokens = self.src_tok.tokenize_many(lines)
        repairs = self._repairs(found, lines_tokens)
        for toks, matcher, repair in zip(lines_tokens, matchers, repairs, strict=True):
            spans = matcher.spans(toks) if matcher else []
            plan.active.append(list(dict.fromkeys(e for _, _, e in spans)))
            plan.spans.append(spans)
            if spans and cfg.glossary_mode != "constrain":  # as data.terminology trained it
                toks = annotate(toks, spans, matcher.target_tokens, MARKERS)
            if repair and toks and len(toks) + 1 + len(repair) <= room:  # as training: plain
                toks = augment(toks, repair, MARKER)  # where the match leaves no room
            if len(toks) > room:
                self._truncated += 1
                toks = toks[:room]
            plan.ids.append(plan.lead + self.run.src_vocab.encode(toks) if toks else [])
            plan.tokens.append(toks)
        # A prefix and <eos> must fit the model's positions after <bos>.
        plan.forced_tokens = [toks[: self.max_src - 1]
                              for toks in self.tgt_tok.tokenize_many(prefixes or [])]
        plan.forced = [self.run.tgt_vocab.encode(toks) for toks in plan.forced_tokens]
        return plan

    def _repairs(self, found: list[Match | None], lines: list[list[str]]) -> list[list[str]]:
        """The target tokens each line (its tokens) is augmented with: its match's, where the
        run was trained with data.memory and the match reaches its threshold, masked against
        the line as training masked (data.memory.mask); [] elsewhere."""
        least = self.repair_threshold
        use = [least is not None and m is not None and m.score >= least for m in found]
        made = iter(self.tgt_tok.tokenize_many([m.target for m, u in zip(found, use) if u]))
        repairs = [next(made) if u else [] for u in use]
        if not any(use) or not self.run.cfg.data.memory.mask:
            return repairs
        vocab, table = self.run.src_vocab, self.run.shortlist
        if table is None:
            raise ConfigError(f"{self.run.checkpoint}: trained with data.memory.mask but has "
                              "no lexical shortlist to mask by: mt shortlist RUN makes one")
        sources = iter(self.src_tok.tokenize_many([m.source for m, u in zip(found, use) if u]))
        return [masked(target, unrelated(vocab.encode(line), vocab.encode(next(sources)),
                                         vocab.encode(target),
                                         lexicon(table)), GAP,
                       token_words(target, self.tgt_tok))
                if u else [] for line, target, u in zip(lines, repairs, use)]

    def _request(self, cfg: DecodeConfig, scored: bool, attention: AttentionSpec | None,
                 src: torch.Tensor, prefix: torch.Tensor | None, terms: Terms | None,
                 memory) -> SearchRequest:
        """A search of src asking for what the call needs: the alignment's attention and the
        confidence's record kept as it goes (no second pass), where the engine can."""
        return SearchRequest(src, cfg, prefix, terms, memory, scored,
                             attention=bool(cfg.align and not attention), trace=cfg.confidence)

    def _search(self, plan: Plan, cfg: DecodeConfig, scored: bool,
                attention: AttentionSpec | None, group: list[int]) -> Searched:
        """One group of the plan's lines through the engine: without their terms where mt's
        own search holds them (_hold_terms searches again the lines that lack one; not
        CTranslate2's, which takes them whole)."""
        src, prefix = plan.source(group, self.device), plan.prefix(group, self.device)
        memory = None
        if cfg.align or attention or cfg.confidence:  # encoded once, read again by _finish
            with torch.no_grad():
                memory = self.model.encode(src, self.model.src_mask(src))
        first = self.model is not None and plan.constrained(group, cfg)
        terms = None if first else plan.terms(group, cfg, self.device)
        request = self._request(cfg, scored, attention, src, prefix, terms, memory)
        return Searched(src, len(plan.lead), memory, search_with(self.engine, request), [])

    def _finish(self, plan: Plan, cfg: DecodeConfig, attention: AttentionSpec | None,
                item: tuple[list[int], Searched]) -> list[list[Translation]]:
        """A group's translations from its search, with what the call asked for: glossary
        terms, word alignments, attention, confidence."""
        group, batch = item
        found = batch.found
        if cfg.unk == "show":
            written = [(self.run.tgt_vocab.decode(y), []) for y in batch.outputs]
        else:
            written = unknowns.written(
                self.model, batch, [plan.tokens[i] for i in group],
                [plan.prefix_tokens(i) for i in group], [plan.term_words(i) for i in group],
                self.run.tgt_vocab, functools.partial(labels, tokenizer=self.src_tok))
        it = iter(written)
        batch.out = done = [[self._translation(*next(it), h.score) for h in hyps]
                            for hyps in found]
        plan.mark(group, found, done, cfg.unk != "show")
        if cfg.align or attention:
            attend(self.model, batch, [plan.tokens[i] for i in group], cfg.align, attention,
                   self.src_tok, self.tgt_tok, self.run.tgt_vocab)
        if cfg.confidence:
            twin = self._dropout_twin if cfg.mc_dropout else None
            confidence.confide(self.model, batch, cfg, self.calibration, twin,
                               self.run.tgt_vocab, self.tgt_tok)
        return done

    def _hold_terms(self, plan: Plan, cfg: DecodeConfig, scored: bool,
                    attention: AttentionSpec | None, groups: list[list[int]],
                    searched: list[Searched]) -> None:
        """Keep each group's search (of its lines without terms) where a line's outputs hold
        its terms already; search the other lines again holding them, with the words found
        wrote for each term's source blocked (decode.glossary_replace, mt.own_words). A
        constrained search changes what it need not: on Multi30k val, 72 of the 106 lines it
        changed held their terms already, and lost 2 BLEU (docs/results.md). The lines of all
        groups are searched again together, batched as the call's groups are: each group's
        few alone would pay a whole search's steps for a handful of rows."""
        at = {i: (batch, k) for group, batch in zip(groups, searched)
              for k, i in enumerate(group)}
        first = {i: batch.found[k][0].tokens for i, (batch, k) in at.items()
                 if not plan.held(i, batch.found[k], cfg)}
        again = functools.partial(self._search_holding, plan, cfg, scored, attention, first)
        regrouped = plan.groups(max(cfg.beam, cfg.samples), cfg.batch_tokens, first)
        for rows, found in zip(regrouped, self.streams.map(again, regrouped), strict=True):
            for i, hyps in zip(rows, found, strict=True):
                batch, k = at[i]
                # its attention and trace span this batch's padded source, not its group's:
                # their readers cut them to the line's length
                batch.found[k] = hyps

    def _search_holding(self, plan: Plan, cfg: DecodeConfig, scored: bool,
                        attention: AttentionSpec | None, first: dict[int, list[int]],
                        rows: list[int]) -> list[list[Hypothesis]]:
        """The plan's lines `rows` searched holding their terms (first: each one's best
        output of the search without them, whose own words are blocked)."""
        src = plan.source(rows, self.device)
        with torch.no_grad():
            memory = self.model.encode(src, self.model.src_mask(src))
        blocked = None
        if cfg.glossary_replace:  # the own words of the lines searched again only
            outputs = [first[i] for i in rows]
            spans = [plan.term_spans(i) for i in rows]
            words = own_words.own_words(self.model, src, outputs, memory, len(plan.lead),
                                        spans, self._casings)
            # a term the output holds already is the model's own word: nothing to block
            # ("parking lot" for Parkplatz -> parking: "lot" stays); one with <unk> in it is
            # held by no output (any <unk> would match it)
            blocked = [[[] if UNK not in term and occurrences(y, term) else own
                        for (_, _, term), own in zip(row, mine, strict=True)]
                       for y, row, mine in zip(outputs, spans, words, strict=True)]
        terms = plan.terms(rows, cfg, self.device, blocked)
        return search_with(self.engine, self._request(
            cfg, scored, attention, src, plan.prefix(rows, self.device), terms, memory))

    @functools.lru_cache(maxsize=4096)  # noqa: B019 (one per Translator, ids are few)
    def _casings(self, i: int) -> frozenset[int]:
        """Target id i and the ids of its other forms: its first letter upper or lower, and a
        word of the vocabulary that is it with up to two letters more or fewer at its end,
        three letters or more left (girl, girls; Hund, Hunde, Hunden): a blocked own word
        (mt.own_words) must not come back inflected ("Two little girl" where *girls* was
        blocked for a term)."""
        token = self.run.tgt_vocab.itos[i]
        k = next((n for n, c in enumerate(token) if c.isalpha()), None)
        if k is None:
            return frozenset({i})
        forms = {token[:k] + f + token[k + 1:] for f in (token[k].lower(), token[k].upper())}
        return frozenset({i} | {j for f in forms for stem in _stems(f)
                                for j in self._by_stem.get(stem, ())})

    @functools.cached_property
    def _by_stem(self) -> dict[str, list[int]]:
        """Each letters-only target token's ids, under each of its prefixes it keeps at least
        three letters of and lacks at most two (mt.own_words' forms)."""
        out: dict[str, list[int]] = {}
        for j, token in enumerate(self.run.tgt_vocab.itos):
            for stem in _stems(token):
                out.setdefault(stem, []).append(j)
        return out

    def _tag_id(self, tag: str) -> int:
        """The id of a corpus tag the model was trained with; ConfigError for any other."""
        tags = [c.tag for c in corpus_configs(self.run.cfg.data) if c.tag]
        if tag not in tags or tag not in self.run.src_vocab.stoi:
            have = f"its tags are {', '.join(tags)}" if tags else "it was trained without tags"
            raise ConfigError(f"decode.tag {tag}: not a tag of this model ({have})")
        return self.run.src_vocab.stoi[tag]

    def _translation(self, tokens: list[str], replaced: list[str], score: float) -> Translation:
        """An output's tokens (its <unk>s replaced by `replaced`) as a Translation."""
        text = self.tgt_tok.detokenize(tokens)
        # Only plain spaces inside a line, so no reader splits it into two.
        return Translation(" ".join(text.split()), score,
                           unknowns=labels(replaced, self.tgt_tok) if replaced else None)

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

    def warnings(self) -> Warned:
        """What report() would warn of now: the lines since the last report that were cut to
        the model's positions, and those that miss a glossary term."""
        return Warned(self._truncated, self._unkept)

    def report(self) -> None:
        """Warn of the lines since the last report that miss a glossary term or were cut to
        the model's positions (one line each), and count afresh."""
        if self._unkept:
            warn(unkept_message(self._unkept, self.max_src, self._unkept_modes,
                                list(self._unkept_terms)))
            self._unkept, self._unkept_terms, self._unkept_modes = 0, {}, set()
        if self._truncated:
            warn(f"{self._truncated} source line(s) longer than model.max_positions "
                 f"({self.max_src} tokens) were truncated")
            self._truncated = 0
