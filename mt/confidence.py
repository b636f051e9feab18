"""How far to trust a translation: features of each output, and a calibration (logistic
regression) that maps them to the probability that the line is good.

The features (per sentence, docs/confidence.md) are defined by one teacher-forced pass of the
output with its source (`features`); the searches record the same quantities as they decode
(mt.decoding.record), and `traced_features` reads them from that record, with no second pass:

- mean_logprob, min_logprob: the log-probabilities of the output's tokens, <eos> included;
- mean_entropy: the entropy (nats) of the distribution at each of those steps, averaged;
- length_ratio: output tokens over source tokens;
- coverage: each source token's cross-attention received over all steps (layers and heads
  averaged, as mt.decoding.align reads them), capped at 1, averaged over the source: below 1 where a
  source token was barely looked at, the classic sign of an omission;
- repetition: the share of the output's token bigrams that occurred earlier in it;
- src_tokens: the source's length in tokens (short lines vary most);
- nbest_disagreement, with several outputs a line (n-best lists, samples): 1 - the mean
  sentence chrF of the others against it (not read by the calibration, which sees one).
- ensemble_disagreement, with an ensemble: the variance across its members of their mean
  token log-probability of the output;
- mc_dropout_logprob, mc_dropout_variance, with decode.mc_dropout N: the mean and variance of
  the output's mean token log-probability over N passes with dropout on (`mc_dropout`).
The last four are reported, not read by the calibration (fitted on one output, one model).

A Calibration is fitted by `mt calibrate` on a held-out set: P(sentence chrF >= threshold) as a
logistic regression on standardized features (Newton's method, numpy alone), kept in the run
directory as calibration.json beside the checkpoint it was fitted for.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from mt.attention import Searched
from mt.config import DecodeConfig, ModelConfig
from mt.data import pad
from mt.decoding import align
from mt.decoding.record import Trace
from mt.errors import CheckpointError
from mt.log import warn
from mt.textio import atomic_write
from mt.tokenizers import Tokenizer
from mt.vocab import EOS, PAD, Vocab, start_id

FEATURES = ("mean_logprob", "min_logprob", "mean_entropy", "length_ratio", "coverage",
            "repetition", "src_tokens")
CALIBRATION = "calibration.json"  # in the run directory
# feature: the percentiles of the held-out set outside which a line is flagged (None: no bound)
FLAGGED = {"coverage": (1, None), "repetition": (None, 99), "length_ratio": (1, 99)}
FORMAT = 1


def summary(y: list[int], logprobs: list[float], entropy: list[float],
            received: list[float], members: list[float] | None = None) -> dict[str, float]:
    """One output's features from what its steps gave (mt.decoding.record.Trace, or a teacher-forced
    pass): y its ids (no <eos>); per step (its tokens, <eos> last) the log-probability and
    the entropy; the attention each source token (no tag, no padding) received over the steps;
    an ensemble's members' summed log-probabilities of the steps' tokens."""
    bigrams = list(zip(y, y[1:]))
    repeats = sum(g in bigrams[:i] for i, g in enumerate(bigrams))
    s = len(received)
    found = {
        "mean_logprob": sum(logprobs) / len(logprobs),
        "min_logprob": min(logprobs),
        "mean_entropy": sum(entropy) / len(entropy),
        "length_ratio": len(y) / max(s, 1),
        "coverage": sum(min(r, 1.0) for r in received) / s if s > 0 else 1.0,
        "repetition": repeats / len(bigrams) if bigrams else 0.0,
        "src_tokens": float(s),
    }
    if members is not None:
        found["ensemble_disagreement"] = float(np.var([m / len(logprobs) for m in members]))
    return found


def traced_features(traces: list[Trace], outputs: list[list[int]], lengths: list[int],
                    lead: int = 0) -> tuple[list[dict[str, float]], list[list[float]]]:
    """The features of outputs (ids, no <eos>) from what the search recorded of them
    (mt.decoding.record), each with the length of its source row (tag tokens and all, no
    padding) and `lead` tag tokens at its start -> as `features` gives them."""
    found = [summary(y, tr.logprobs, tr.entropy, tr.received[lead:n], tr.members)
             for tr, y, n in zip(traces, outputs, lengths, strict=True)]
    return found, [tr.logprobs for tr in traces]


@torch.no_grad()
def features(model, src: torch.Tensor, outputs: list[list[int]], lead: int = 0,
             memory=None) -> tuple[list[dict[str, float]], list[list[float]]]:
    """src (B, S) padded ids, an output (ids, no <eos>) per row -> per row its features (a dict
    over FEATURES, and ensemble_disagreement for an ensemble) and its tokens'
    log-probabilities (<eos> last), from one teacher-forced pass: the definition the searches'
    traces (traced_features) are tested against. lead: tag tokens at the start of each source
    row, not counted as the source. memory: the model's encode(src), where the caller has it."""
    tgt_in = pad([[start_id(model.cfg.decoder_start)] + y for y in outputs]).to(src.device)
    # (B, T+1, V), per layer (B, H, T+1, S), an ensemble's per member (B, T+1, V)
    lprobs, layers, members = teacher_forced(model, src, tgt_in, memory)
    tgt_out = pad([y + [EOS] for y in outputs]).to(src.device)
    picked = lprobs.gather(-1, tgt_out[..., None]).squeeze(-1)  # (B, T+1)
    entropy = -(lprobs.exp() * lprobs).nan_to_num().sum(-1)  # 0 * -inf is 0, not NaN
    attn = torch.stack([w.float().mean(1) for w in layers]).mean(0)  # (B, T+1, S)
    steps = tgt_out != PAD
    received = (attn * steps[..., None]).sum(1)  # (B, S)
    if members is not None:  # (B, M) each member's summed log-probability of the steps' tokens
        members = torch.stack([(m.gather(-1, tgt_out[..., None]).squeeze(-1) * steps).sum(1)
                               for m in members], dim=1).tolist()
    lengths = (src != PAD).sum(1).tolist()
    found, token_lps = [], []
    for b, y in enumerate(outputs):
        n = len(y) + 1
        lp = picked[b, :n].tolist()
        found.append(summary(y, lp, entropy[b, :n].tolist(), received[b, lead: lengths[b]].tolist(),
                             None if members is None else members[b]))
        token_lps.append(lp)
    return found, token_lps


def disagreement(texts: list[str]) -> list[float]:
    """An n-best list's (or samples') texts -> for each, 1 - its mean sentence chrF (0-1)
    against the others: 0 where they all agree with it. A feature only with nbest or samples
    above 1, so the calibration does not read it."""
    from sacrebleu.metrics import CHRF

    chrf = CHRF()
    return [1 - sum(chrf.sentence_score(o, [t]).score for j, o in enumerate(texts) if j != i)
            / (100 * (len(texts) - 1)) for i, t in enumerate(texts)]


def teacher_forced(model, src: torch.Tensor, tgt_in: torch.Tensor, memory=None):
    """Log-probabilities (B, T, V), each decoder layer's cross-attention (B, H, T, S) and, for an
    ensemble (mt.ensemble), each member's log-probabilities (B, T, V) (else None), from one
    pass over memory (the model's encode(src); encoded here if None)."""
    mask = model.src_mask(src)
    cache = model.start_cache(model.encode(src, mask) if memory is None else memory, mask)
    ensemble = getattr(model, "members", 0) > 0
    out = model.decode(tgt_in, cache, need_weights=True, **({"members": True} if ensemble else {}))
    return model.log_probs(model.next_scores(out[0])), out[2], out[3] if ensemble else None


def dropout_twin(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of the model that shares its weights, in training mode (its dropout on), for
    mc_dropout: the model itself stays in evaluation mode for the searches, which other
    threads may be running with it."""
    shared = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    return copy.deepcopy(model, memo=shared).train()


def mc_dropout_twin(model: torch.nn.Module, cfg: ModelConfig) -> torch.nn.Module:
    """dropout_twin of the model (cfg: its config), for decode.mc_dropout; a warning where
    the model has no dropout to turn on."""
    if not any(r for r in (cfg.dropout, cfg.attention_dropout, cfg.activation_dropout)):
        warn("decode.mc_dropout: the model has no dropout (model.dropout 0), so every pass "
             "is the same and the variance 0; give the passes some with --set "
             "model.dropout=0.1")
    return dropout_twin(model)


@torch.no_grad()
def mc_dropout(twin: torch.nn.Module, src: torch.Tensor, outputs: list[list[int]],
               passes: int, seed: int = 0) -> list[dict[str, float]]:
    """Monte Carlo dropout: `passes` teacher-forced passes of the outputs (ids, no <eos>) with
    dropout on (twin: dropout_twin of the model), seeded by `seed` -> per row
    mc_dropout_logprob, the mean over the passes of the output's mean token log-probability
    (<eos> included), and mc_dropout_variance, their variance: how much the model's belief
    in this output hangs on which units it happens to use (Fomicheva et al. 2020, D-TP and
    D-Var). The encoder runs in every pass: its dropout is part of it."""
    tgt_in = pad([[start_id(twin.cfg.decoder_start)] + y for y in outputs]).to(src.device)
    tgt_out = pad([y + [EOS] for y in outputs]).to(src.device)
    steps = tgt_out != PAD
    means = []
    devices = [src.device.index or 0] if src.device.type == "cuda" else []
    with torch.random.fork_rng(devices):  # the caller's random state as it was
        torch.manual_seed(seed)
        for _ in range(passes):
            lprobs = twin.log_probs(twin(src, tgt_in))  # (B, T+1, V)
            picked = lprobs.gather(-1, tgt_out[..., None]).squeeze(-1) * steps
            means.append((picked.double().sum(1) / steps.sum(1)).tolist())  # (B,)
    per_row = np.array(means).T  # (B, passes)
    return [{"mc_dropout_logprob": float(r.mean()), "mc_dropout_variance": float(r.var())}
            for r in per_row]


def confide(model, batch: Searched, cfg: DecodeConfig, calibration: Calibration | None,
            twin: torch.nn.Module | None, tgt_vocab: Vocab, tgt_tok: Tokenizer) -> None:
    """Give each translation of a batch its features, its words' probabilities and, with a
    calibration, its confidence, from what the search recorded of it (mt.decoding.record; a
    teacher-forced pass over the search's encoder output for an engine that records
    nothing); with decode.mc_dropout, that many passes more of twin (mc_dropout_twin)."""
    src, rows, outputs = batch.src, batch.rows, batch.outputs
    traces = [h.trace for hyps in batch.found for h in hyps]
    if all(tr is not None for tr in traces):
        lengths = (src[rows] != PAD).sum(1).tolist()
        feats, lps = traced_features(traces, outputs, lengths, batch.lead)
    else:
        feats, lps = features(model, src[rows], outputs, batch.lead, batch.memory_rows(rows))
    if cfg.mc_dropout:
        drawn = mc_dropout(twin, src[rows], outputs, cfg.mc_dropout, cfg.seed)
        for f, d in zip(feats, drawn, strict=True):
            f.update(d)
    probs = calibration.predict(feats) if calibration else [None] * len(feats)
    for ts in batch.out:
        if len(ts) > 1:
            texts = [t.text for t in ts]
            for t, d in zip(ts, disagreement(texts), strict=True):
                t.features = {"nbest_disagreement": d}
    for y, f, lp, p, t in zip(outputs, feats, lps, probs, batch.translations(), strict=True):
        f.update(t.features or {})
        t.features, t.confidence = f, p
        t.flags = calibration.flags(f) if calibration else None
        at = align.token_words(tgt_vocab.decode(y), tgt_tok)
        t.words = word_probabilities(t.text, at, lp)


def word_probabilities(text: str, at: list[int], logprobs: list[float]) -> list[list]:
    """[word, probability] for each whitespace word of text: the probability of its least
    likely token (at: each token's word, logprobs: each token's log-probability, <eos>'s
    last), rounded to 4 decimals."""
    words = text.split()
    least = [0.0] * len(words)  # per word, its least likely token's log-probability
    for w, v in zip(at, logprobs, strict=False):  # <eos>'s, last, is no word's
        if w < len(words):
            least[w] = min(least[w], v)
    return [[word, round(math.exp(v), 4)] for word, v in zip(words, least)]


def model_inputs(rows: list[dict[str, float]]) -> np.ndarray:
    """The features as the calibration reads them (N, 8): the length ratio on a log scale and
    its square (too short and too long are both bad), the source length on a log scale."""
    out = []
    for f in rows:
        ratio = math.log(max(f["length_ratio"], 1e-3))
        out.append([f["mean_logprob"], f["min_logprob"], f["mean_entropy"], ratio, ratio ** 2,
                    f["coverage"], f["repetition"], math.log1p(f["src_tokens"])])
    return np.array(out, dtype=np.float64).reshape(len(rows), 8)


@dataclass
class Calibration:
    """P(sentence chrF >= threshold) = sigmoid(bias + weights . (x - mean) / scale), x being
    model_inputs of a translation's features."""

    threshold: float  # sentence chrF (0-100) a line must reach to count as good
    mean: list[float]
    scale: list[float]
    weights: list[float]
    bias: float
    lines: int  # the held-out lines it was fitted on
    positives: float  # the share of them at or above the threshold
    checkpoint: str  # the checkpoint file's name it was fitted for, and its step
    step: int
    data: str = ""  # the source and reference files, as given
    # weights_fingerprint of that checkpoint: a copy beside other weights of the same file
    # name and step is not used ("" in a file from before it was kept: name and step only)
    fingerprint: str = ""
    # what the held-out lines showed (FLAGGED): a line outside gets that feature's flag
    bounds: dict[str, list[float | None]] = field(default_factory=dict)

    def flags(self, row: dict[str, float]) -> list[str]:
        """The features of a translation outside what the held-out set showed: `coverage`
        below its 1st percentile (a possible omission), `repetition` above its 99th (a
        possible loop), `length_ratio` outside its 1st to 99th (too short or too long)."""
        return [k for k, (lo, hi) in self.bounds.items()
                if (lo is not None and row[k] < lo) or (hi is not None and row[k] > hi)]

    def predict(self, rows: list[dict[str, float]]) -> list[float]:
        if not rows:
            return []
        x = (model_inputs(rows) - np.array(self.mean)) / np.array(self.scale)
        return _sigmoid(x @ np.array(self.weights) + self.bias).tolist()

    def save(self, directory: Path) -> Path:
        body = asdict(self)
        text = json.dumps(body, sort_keys=True)
        path = Path(directory) / CALIBRATION
        data = json.dumps({"format": FORMAT, "crc32": zlib.crc32(text.encode()),
                           "calibration": body}, indent=1) + "\n"
        atomic_write(path, lambda tmp: Path(tmp).write_text(data, encoding="utf-8"))
        return path

    @classmethod
    def load(cls, path: Path) -> Calibration:
        """Read and check calibration.json; a CheckpointError (exit 5) where it is damaged."""
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
            body = raw["calibration"]
            if raw.get("format") != FORMAT:
                raise ValueError(f"format {raw.get('format')!r}, expected {FORMAT}")
            if zlib.crc32(json.dumps(body, sort_keys=True).encode()) != raw["crc32"]:
                raise ValueError("its CRC-32 does not match its contents")
            cal = cls(**body)
            cal.check()
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{path}: damaged calibration ({e}); run mt calibrate "
                                  "again") from None
        return cal

    def check(self) -> None:
        """A ValueError naming the first field that is not what predict and flags can use:
        the right number of finite numbers (numbers or null for the bounds)."""
        n = model_inputs([dict.fromkeys(FEATURES, 1.0)]).shape[1]
        for name in ("mean", "scale", "weights"):
            values = getattr(self, name)
            if not (isinstance(values, list) and len(values) == n):
                raise ValueError(f"expected {n} {name}")
            _finite(name, values)
        _finite("bias", [self.bias])
        _finite("threshold", [self.threshold])
        if not isinstance(self.bounds, dict) or any(
                k not in FLAGGED or not isinstance(b, list) or len(b) != 2
                for k, b in self.bounds.items()):
            raise ValueError(f"bounds must map features of {sorted(FLAGGED)} to [low, high]")
        for k, b in self.bounds.items():
            _finite(f"bounds.{k}", [v for v in b if v is not None])


def _finite(name: str, values: list) -> None:
    """A ValueError unless every value is a finite number (a bool is not one)."""
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{name} holds {v!r}, not a finite number")


def weights_fingerprint(checkpoint: Path) -> str:
    """What identifies a checkpoint's weights: a hash of the CRC-32s its zip archive keeps of
    each tensor's bytes (read from the archive's directory, no tensor read). The same weights
    copied elsewhere keep it; other weights saved under the same name and step do not."""
    with zipfile.ZipFile(checkpoint) as archive:
        # A member's name starts with the archive's folder, which torch takes from the file's
        # (temporary) name: only what follows it says which tensor it is.
        crcs = sorted((i.filename.partition("/")[2], i.CRC) for i in archive.infolist()
                      if "/data/" in i.filename)
    return hashlib.sha256(repr(crcs).encode()).hexdigest()[:16]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # no overflow for large |z|


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 50
                 ) -> tuple[np.ndarray, float]:
    """Weights and bias of an L2-regularised logistic regression (the bias not penalised) by
    Newton's method (iteratively reweighted least squares): x (N, F) standardized, y (N,) in
    {0, 1}. The penalty keeps the weights finite where a feature separates the classes."""
    n, f = x.shape
    a = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(f + 1)
    penalty = np.diag([l2] * f + [0.0])
    for _ in range(steps):
        p = _sigmoid(a @ w)
        grad = a.T @ (p - y) + penalty @ w
        hess = (a * (p * (1 - p))[:, None]).T @ a + penalty + 1e-9 * np.eye(f + 1)
        delta = np.linalg.solve(hess, grad)
        w -= delta
        if np.abs(delta).max() < 1e-10:
            break
    return w[:f], float(w[f])


def calibrate(rows: list[dict[str, float]], chrf: list[float], threshold: float, **record
              ) -> Calibration:
    """The Calibration fitted on held-out translations' features and sentence chrF scores."""
    x = model_inputs(rows)
    mean, scale = x.mean(0), x.std(0)
    scale[scale == 0] = 1.0  # a constant feature: weight 0 after all
    y = (np.array(chrf) >= threshold).astype(np.float64)
    w, b = fit_logistic((x - mean) / scale, y)
    bounds = {}
    for key, (lo, hi) in FLAGGED.items():
        v = np.array([f[key] for f in rows])
        bounds[key] = [None if q is None else float(np.percentile(v, q)) for q in (lo, hi)]
    return Calibration(threshold, mean.tolist(), scale.tolist(), w.tolist(), b, len(rows),
                       float(y.mean()), bounds=bounds, **record)


def for_run(checkpoint: Path | None, step: int) -> Calibration | None:
    """The calibration beside a checkpoint, checked; None where there is none, or (with a
    warning) where it was fitted for another checkpoint or step."""
    if checkpoint is None:
        return None
    path = Path(checkpoint).parent / CALIBRATION
    if not path.is_file():
        return None
    cal = Calibration.load(path)
    if (cal.checkpoint, cal.step) != (Path(checkpoint).name, step):
        warn(f"{path}: fitted for {cal.checkpoint} at step {cal.step}, not {Path(checkpoint).name}"
             f" at step {step}: not used; run mt calibrate again")
        return None
    if cal.fingerprint and cal.fingerprint != weights_fingerprint(checkpoint):
        warn(f"{path}: fitted for other weights than {Path(checkpoint).name}'s (the same name "
             f"and step {step}, another run's?): not used; run mt calibrate again")
        return None
    return cal


def ece(probs: np.ndarray, good: np.ndarray, bins: int = 10) -> float:
    """The expected calibration error: over 10 equal-width bins of the predicted probability,
    |mean prediction - share good| weighted by the bin's share of lines."""
    probs, good = np.asarray(probs, dtype=np.float64), np.asarray(good, dtype=np.float64)
    at = np.minimum((probs * bins).astype(int), bins - 1)
    total = 0.0
    for k in range(bins):
        inside = at == k
        if inside.any():
            total += inside.mean() * abs(probs[inside].mean() - good[inside].mean())
    return float(total)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (ties get their mean rank)."""
    return float(np.corrcoef(_ranks(np.asarray(a)), _ranks(np.asarray(b)))[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    """0-based ranks, ties sharing their mean rank."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return (ends - 1 - (counts - 1) / 2)[inverse]
