"""CTranslate2 as the search of `mt translate` and `mt eval` (`--engine ctranslate2`).

mt tokenizes, batches and detokenizes as always (mt.translator.Translator); only the search over
a batch of source ids goes to CTranslate2: CTranslate2Engine is an Engine (mt.decoding.engines),
as mt's own ModelEngine is. Given an export (`mt export`), its model is loaded; given a run
directory or checkpoint, it is exported in float32 to a temporary directory first.

Options, mt's -> CTranslate2's (docs/ctranslate2.md):
  beam, nbest                    beam_size, num_hypotheses: exact
  max_len_a, max_len_b           max_decoding_length, per sentence: sentences are sent in groups
                                 of equal limit, so each gets mt's a * src_len + b (capped by
                                 model.max_positions), exactly
  min_len                        min_decoding_length: exact
  length_norm, length_penalty    length_penalty: none -> 0 and average -> 1 rank finished
                                 hypotheses as mt does; gnmt ((5 + m) / 6)^alpha has no
                                 CTranslate2 equivalent and becomes m^alpha. The stopping rules
                                 also differ, so beam outputs may differ; greedy is exact.
  no_repeat_ngram                no_repeat_ngram_size: same rule
  shortlist                      use_vmap, with the export's vmap.txt (the run's shortlist);
                                 auto uses it whenever the export has one
  sampling, topk, topp,          sampling_topk (topk: decode.topk; topp: 0, all tokens),
  temperature, samples, seed     sampling_topp, sampling_temperature, num_hypotheses; the seed
                                 goes to ctranslate2.set_random_seed before each batch.
                                 CTranslate2 has its own generator and draws for the whole
                                 batch, so its samples differ from mt's, and a line's samples
                                 depend on the lines in its batch (docs/ctranslate2.md).
Scores shown (--nbest) are mt's: each hypothesis is rescored with CTranslate2's score_batch
(per-token log-probabilities, <eos> included) and divided by mt's length penalty.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from mt.checkpoint import CONFIG, SRC_VOCAB, TGT_VOCAB, Run, load_run, open_run
from mt.config import DecodeConfig
from mt.ct2.export import MARKER, VMAP, export_info, require_ctranslate2, write_model
from mt.decoding.constraints import max_lengths, with_prefix
from mt.decoding.engines import Capabilities
from mt.decoding.request import Hypothesis, SearchRequest
from mt.decoding.scores import length_penalty
from mt.errors import CheckpointError, ConfigError, MTError
from mt.vocab import PAD, Vocab

# mt's length_norm -> CTranslate2's length_penalty exponent (None: use decode.length_penalty)
CT2_LENGTH_PENALTY = {"none": 0.0, "average": 1.0, "gnmt": None}
NO_TERMS = ("a glossary: CTranslate2 has no lexically constrained search; use --engine mt (an "
            "export's run decodes with it)")
# What an export needs besides its tokenizer files: CTranslate2's model, then mt's run files.
EXPORT_FILES = ("model.bin", "config.json", CONFIG, SRC_VOCAB, TGT_VOCAB)


def is_export(path: Path) -> bool:
    return Path(path).is_dir() and any((Path(path) / name).is_file()
                                       for name in ("model.bin", MARKER))


class CTranslate2Engine:
    """A Translator's Engine (mt.decoding.engines), done by a `ctranslate2.Translator`: ids in,
    hypotheses out."""

    model = None  # no torch model to run outputs through again

    def __init__(self, model_dir: Path, src_vocab: Vocab, tgt_vocab: Vocab, max_positions: int,
                 device: str = "cpu", threads: int = 0, replicas: int = 1):
        """threads: each replica's (0: torch's count); replicas: CTranslate2's inter_threads,
        searches that run at once when several threads call `search`."""
        self.ct2 = ct2 = require_ctranslate2()
        # Same thread count as torch's, so the two searches compare like for like
        # (benchmarks/bench_decode.py).
        self.translator = ct2.Translator(
            str(model_dir), device="cuda" if str(device).startswith("cuda") else "cpu",
            intra_threads=threads or torch.get_num_threads(), inter_threads=replicas)
        self.src_vocab, self.tgt_vocab, self.max_positions = src_vocab, tgt_vocab, max_positions
        self.vmap = (Path(model_dir) / VMAP).is_file()  # the run's shortlist (mt.ct2.export)

    def capabilities(self, cfg: DecodeConfig) -> Capabilities:
        """Prefixes (target_prefix) and sampling; no lexical constraints, and nothing recorded
        (the Translator refuses attention and confidence for it)."""
        return Capabilities(no_terms=NO_TERMS)

    def search(self, request: SearchRequest) -> list[list[Hypothesis]]:
        """request.src (B, S) padded ids -> up to cfg.nbest hypotheses per sentence, best
        first; each starting with its prefix's ids (B, P) if given (target_prefix)."""
        src, cfg, prefix = request.src, request.cfg, request.prefix
        mask = src != PAD
        limits = with_prefix(max_lengths(mask, cfg.max_len_a, cfg.max_len_b,
                                         self.max_positions), prefix).tolist()
        tokens = _tokens(src, self.src_vocab)
        prefixes = None if prefix is None else _tokens(prefix, self.tgt_vocab)
        alpha = CT2_LENGTH_PENALTY[cfg.length_norm]
        sampling = _sampling_options(cfg)
        if sampling:
            self.ct2.set_random_seed(cfg.seed)
        out: list[list[Hypothesis]] = [[] for _ in tokens]
        for limit in sorted(set(limits)):  # one call per length limit: each sentence gets its own
            group = [i for i, n in enumerate(limits) if n == limit]
            results = self.translator.translate_batch(
                [tokens[i] for i in group], beam_size=cfg.beam,
                num_hypotheses=cfg.samples if sampling else min(cfg.nbest, cfg.beam),
                max_input_length=0, max_decoding_length=limit,
                min_decoding_length=min(cfg.min_len, limit),
                length_penalty=cfg.length_penalty if alpha is None else alpha,
                no_repeat_ngram_size=cfg.no_repeat_ngram, **sampling,
                suppress_sequences=[[self.tgt_vocab.itos[PAD]]],  # as mt's search: never <pad>
                # no attention here to replace an <unk> with (mt.unknowns): never write one
                disable_unk=cfg.unk != "show",
                target_prefix=prefixes and [prefixes[i] for i in group],
                use_vmap=self._use_vmap(cfg))
            for i, r in zip(group, results, strict=True):
                out[i] = [Hypothesis(self.tgt_vocab.encode(h), float("nan"))
                          for h in r.hypotheses]
        if request.scores:
            self._rescore(tokens, out, cfg)
        return out

    def _use_vmap(self, cfg: DecodeConfig) -> bool:
        """decode.shortlist as CTranslate2's use_vmap: auto and on where the export has the
        run's shortlist (vmap.txt); on without one is a ConfigError, as for mt's own search."""
        if cfg.shortlist == "on" and not self.vmap:
            raise ConfigError("decode.shortlist on: this export has no vocabulary map "
                              f"({VMAP}); build the run's shortlist with mt shortlist RUN, "
                              "then export it again")
        return self.vmap and cfg.shortlist != "off"

    def _rescore(self, tokens: list[list[str]], out: list[list[Hypothesis]],
                 cfg: DecodeConfig) -> None:
        """Give each hypothesis mt's score, and sort each list best first by it (samples stay
        in the order drawn, as mt's own)."""
        pairs = [(i, h) for i, hyps in enumerate(out) for h in hyps]
        targets = [[self.tgt_vocab.itos[t] for t in h.tokens] for _, h in pairs]
        results = self.translator.score_batch([tokens[i] for i, _ in pairs], targets,
                                              max_input_length=0)
        for (_, h), r in zip(pairs, results, strict=True):
            h.score = sum(r.log_probs) / length_penalty(len(h.tokens) + 1, cfg.length_norm,
                                                        cfg.length_penalty)
        if cfg.sampling != "none":
            return
        for hyps in out:
            hyps.sort(key=lambda h: -h.score)


def _tokens(ids: torch.Tensor, vocab: Vocab) -> list[list[str]]:
    """(B, L) padded ids -> each row's tokens, as CTranslate2 takes them."""
    return [[vocab.itos[i] for i in row if i != PAD] for row in ids.tolist()]


def _sampling_options(cfg: DecodeConfig) -> dict:
    """decode.sampling and its settings as translate_batch's options ({} without sampling)."""
    if cfg.sampling == "none":
        return {}
    return {"sampling_topk": cfg.topk if cfg.sampling == "topk" else 0,
            "sampling_topp": cfg.topp if cfg.sampling == "topp" else 1.0,
            "sampling_temperature": cfg.temperature}


def open_ctranslate2(path: Path, device: str = "cpu", overrides: Sequence[str] = ()
                     ) -> tuple[Run, CTranslate2Engine]:
    """An export, or a run directory / checkpoint exported on the fly (float32, temporary),
    its config overridden (`key=value`).

    The Run carries the config, vocabularies and tokenizers mt tokenizes with; its model is
    None (CTranslate2 holds the weights).
    """
    require_ctranslate2()
    path = Path(path)
    if is_export(path):
        return open_export(path, device, overrides)
    run = load_run(path, "cpu", overrides)
    with tempfile.TemporaryDirectory(prefix="mt-ct2-") as tmp:
        write_model(run, Path(tmp), None)
        # CTranslate2 reads the whole model into memory here: the directory can go after.
        search = CTranslate2Engine(Path(tmp), run.src_vocab, run.tgt_vocab,
                                   run.cfg.model.max_positions, device)
    run.model = None
    return run, search


def open_export(path: Path, device: str = "cpu", overrides: Sequence[str] = ()
                ) -> tuple[Run, CTranslate2Engine]:
    """An `mt export` directory, as open_ctranslate2 opens it. Anything wrong with its files
    is a damaged model (CheckpointError), with the advice to export it again."""
    info = export_info(path)
    if info is None:
        raise damaged_export(path, {}, f"{MARKER} is not what mt export writes")
    missing = [name for name in EXPORT_FILES if not (path / name).is_file()]
    if missing:
        raise damaged_export(path, info, f"{', '.join(missing)} missing")
    try:
        run = open_run(path, overrides)  # an export holds a run directory's files
    except MTError:
        try:  # whose fault: the export's files, or the overrides (the user's, a ConfigError)?
            open_run(path)
        except MTError as own:
            raise damaged_export(path, info, str(own).split("; ")[0]) from None
        raise
    run.step = info.get("step", 0)
    try:
        search = CTranslate2Engine(path, run.src_vocab, run.tgt_vocab,
                                   run.cfg.model.max_positions, device)
    except RuntimeError as e:  # CTranslate2's for a truncated model.bin, a bad vocabulary...
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise damaged_export(path, info, f"CTranslate2 cannot load it: {first}") from None
    return run, search


def damaged_export(path: Path, info: dict, what: str) -> CheckpointError:
    """The error for an export whose files are missing or damaged: export it again (from the
    checkpoint it was written from, when its MARKER says)."""
    source = info.get("checkpoint") or "RUN"
    return CheckpointError(f"{path}: damaged CTranslate2 export ({what}); export it again: "
                           f"mt export {source} --to ctranslate2 {path} --force")
