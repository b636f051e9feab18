"""One tree of dataclasses (data, model, train, decode), loaded from YAML and validated once."""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from mt.errors import ConfigError

TOKENIZERS = ("spacy", "sentencepiece")  # README, Tokenization


@dataclass
class DataConfig:
    src_lang: str = "en"  # language code of the source side: file suffix, spaCy language
    tgt_lang: str = "de"
    dir: str = "data/toy"  # files are {dir}/{split}.{lang}, plain or .gz
    train: str = "toy.train"  # split names (file stems) inside dir; the defaults are the toy's
    val: str = "toy.val"
    test: str = "toy.test"
    lowercase: bool = False  # lowercase both sides before tokenizing
    max_len: int = 100  # training pairs with more tokens on either side are dropped
    min_freq: int = 1  # vocabulary: drop rarer tokens
    max_size: int = 0  # vocabulary: keep the most frequent tokens; 0 = no limit
    shared_vocab: bool = False  # one vocabulary for both sides (sentencepiece: one joint model)
    tokenizer: str = "spacy"  # spacy (words, reversible) or sentencepiece (subwords, trained)
    spm_model_type: str = "unigram"  # sentencepiece: unigram or bpe
    vocab_size: int = 8000  # sentencepiece: pieces per model, specials and 256 bytes included
    spm_max_sentences: int = 1000000  # sentencepiece: train on a sample this big; 0 = all lines


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
    activation_dropout: float | None = None  # on the feed-forward's hidden ReLU output
    pre_norm: bool = True  # LayerNorm before each sublayer (False: after, as in the 2017 paper)
    tie_output: bool = True  # target embedding shares weights with the output projection
    tie_all: bool = False  # source embedding too; needs data.shared_vocab
    max_positions: int = 256  # longest sequence the positional table covers


SCHEDULES = ("inverse_sqrt", "cosine", "linear")  # learning-rate decay after warmup


@dataclass
class TrainConfig:
    seed: int = 1
    max_tokens: int = 4096  # batch budget: padded source + target tokens
    max_epochs: int = 20
    max_steps: int = 0  # 0 = no limit
    lr: float = 5e-4  # peak learning rate, reached after warmup
    warmup: int = 1000  # linear warmup steps, then the schedule's decay
    schedule: str = "inverse_sqrt"  # decay after warmup: inverse_sqrt, or cosine / linear to
    #                                 zero at max_steps or max_minutes, whichever comes first
    label_smoothing: float = 0.1
    clip_norm: float = 1.0  # 0 = no clipping
    eval_every: int = 500  # validate (and save) every N steps
    eval_epochs: bool = True  # also validate (and save) at each epoch's end
    eval_bleu: bool = True  # greedy-decode the validation set for BLEU
    metric: str = "bleu"  # early stopping and `best`: bleu (higher) or loss (lower)
    patience: int = 0  # stop after N validations without improvement; 0 = never
    log_every: int = 100  # steps between metrics-log lines
    amp: str = "auto"  # autocast: auto (bf16 where native, CUDA or CPU; else fp16 on CUDA,
    #                    fp32 on CPU), bf16, fp16 (CUDA only; fp32 on CPU), none
    accum_steps: int = 1  # micro-batches (of max_tokens each) per rank per update
    compile: bool = False  # torch.compile the model for training (dynamic shapes)
    keep_checkpoints: int = 0  # also keep the last N validation-step weights as ckpt.STEP.pt
    max_minutes: float = 0.0  # wall-clock budget for training (resumes included); 0 = none
    threads: int = 0  # CPU threads for torch; 0 = torch's default
    tensorboard: bool = False  # also write metrics as TensorBoard scalars to RUN/tb


DECODE_DTYPES = ("float32", "bf16")
LENGTH_NORMS = ("gnmt", "average", "none")  # how beam search compares outputs of different lengths


@dataclass
class DecodeConfig:
    beam: int = 1  # 1 = greedy
    nbest: int = 1  # hypotheses kept per sentence, best first (at most beam)
    length_norm: str = "gnmt"  # gnmt: score / ((5 + len) / 6) ** alpha; average: / len; none
    length_penalty: float = 0.6  # alpha of gnmt (0 = none); larger favours longer outputs
    min_len: int = 0  # no <eos> before this many output tokens (the max length still wins)
    max_len_a: float = 1.5  # output at most a * src_len + b tokens
    max_len_b: int = 10
    batch_tokens: int = 4096  # source tokens per decoding batch, times beam (bounds memory)
    dtype: str = "float32"  # weights and activations while decoding: float32 or bf16


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def save(self, path: Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False), encoding="utf-8")


def load_config(path: str | Path | None = None, overrides: typing.Sequence[str] = ()) -> Config:
    """Read YAML (or start from defaults), apply `a.b=value` overrides, build and validate."""
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
    return _overridden(raw, overrides, where)


def config_from_dict(raw: dict, where: str = "config") -> Config:
    cfg = _build(Config, raw, where, "")
    validate(cfg, where)
    return cfg


def override(cfg: Config, overrides: typing.Sequence[str], where: str) -> Config:
    """A copy of cfg with `a.b=value` overrides (e.g. command-line options), validated again;
    an error names the item to blame, as load_config's do."""
    return _overridden(cfg.to_dict(), overrides, where)


def _overridden(raw: dict, overrides: typing.Sequence[str], where: str) -> Config:
    for item in overrides:
        _apply_override(raw, item)
        _check_override(raw, item)
    cfg = _build(Config, raw, where, "")
    validate(cfg, where, overrides)
    return cfg


def _apply_override(raw: dict, item: str) -> None:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set train.lr=3e-4")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    node = raw
    *parents, last = key.split(".")
    for p in parents:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {key}: '{p}' is not a section; give section.key=value")
    node[last] = parsed


def _check_override(raw: dict, item: str) -> None:
    """Blame `--set item`, not the config file, for an unknown key or a value of the wrong type."""
    key = item.partition("=")[0]
    cls, node, prefix = Config, raw, ""
    for name in key.split("."):
        if not dataclasses.is_dataclass(cls):
            raise ConfigError(f"--set {item}: '{prefix.rstrip('.')}' is a value, not a "
                              "section; give section.key=value")
        hints = typing.get_type_hints(cls)
        if name not in hints:
            raise ConfigError(f"--set {item}: unknown key '{prefix}{name}'{_nearest(name, hints)}")
        cls, node, prefix = hints[name], node[name], f"{prefix}{name}."
    if dataclasses.is_dataclass(cls):
        raise ConfigError(f"--set {item}: '{key}' is a section; set one of its keys")
    _coerce(node, cls, f"--set {item}", key)


def _nearest(name: str, options: typing.Iterable[str]) -> str:
    options = list(options)
    match = difflib.get_close_matches(name, options, n=1, cutoff=0.5)
    return f"; did you mean '{match[0]}'?" if match else f"; valid keys: {', '.join(options)}"


def _build(cls, raw: object, where: str, prefix: str):
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: '{prefix.rstrip('.')}' must be a section (a mapping); "
                          "see configs/ for examples")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in raw.items():
        if key not in names:
            raise ConfigError(
                f"{where}: unknown key '{prefix}{key}'{_nearest(str(key), names)}"
            )
        kind = hints[key]
        if dataclasses.is_dataclass(kind):
            kwargs[key] = _build(kind, value, where, f"{prefix}{key}.")
        else:
            kwargs[key] = _coerce(value, kind, where, f"{prefix}{key}")
    return cls(**kwargs)


def _coerce(value: object, kind: type, where: str, key: str):
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        kinds = typing.get_args(kind)
    else:
        kinds = (kind,)
    for k in kinds:
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
    names = " or ".join(getattr(k, "__name__", str(k)) for k in kinds)
    raise ConfigError(f"{where}: '{key}' must be {names}, got {value!r}")


def _blame(message: str, where: str, overrides: typing.Sequence[str]) -> str:
    """The `--set` item whose key the message names (the last such), else where."""
    for item in reversed(overrides):
        key = item.partition("=")[0]
        if re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", message):
            return f"--set {item}"
    return where


def validate(cfg: Config, where: str = "config", overrides: typing.Sequence[str] = ()) -> None:
    """Range checks that types alone cannot express; fail before any work starts.

    An error is blamed on the `--set` item that gave the value it names, else on where.
    """
    d, m, t, dec = cfg.data, cfg.model, cfg.train, cfg.decode
    checks = [
        (m.d_model > 0, "model.d_model must be positive"),
        (m.n_heads > 0, "model.n_heads must be positive"),
        (m.d_model % max(m.n_heads, 1) == 0,
         f"model.d_model ({m.d_model}) must be divisible by model.n_heads ({m.n_heads})"),
        (m.n_enc_layers > 0 and m.n_dec_layers > 0,
         "model.n_enc_layers and model.n_dec_layers must be positive"),
        (m.d_ff > 0, "model.d_ff must be positive"),
        (0.0 <= m.dropout < 1.0, "model.dropout must be in [0, 1)"),
        (m.attention_dropout is None or 0.0 <= m.attention_dropout < 1.0,
         "model.attention_dropout must be in [0, 1), or null for model.dropout"),
        (m.activation_dropout is None or 0.0 <= m.activation_dropout < 1.0,
         "model.activation_dropout must be in [0, 1), or null for model.dropout"),
        (m.max_positions > 0, "model.max_positions must be positive"),
        (not m.tie_all or d.shared_vocab, "model.tie_all needs data.shared_vocab: true"),
        (d.max_len > 0, "data.max_len must be positive"),
        (d.max_len <= m.max_positions - 2,
         f"data.max_len ({d.max_len}) must leave room for <bos>/<eos> within "
         f"model.max_positions ({m.max_positions})"),
        (d.min_freq >= 1, "data.min_freq must be at least 1"),
        (d.max_size >= 0, "data.max_size must be 0 (no limit) or positive"),
        (d.tokenizer in TOKENIZERS,
         f"data.tokenizer must be spacy or sentencepiece, got {d.tokenizer!r}"),
        (d.spm_model_type in ("unigram", "bpe"),
         f"data.spm_model_type must be unigram or bpe, got {d.spm_model_type!r}"),
        (d.vocab_size > 4 + 256,
         f"data.vocab_size ({d.vocab_size}) must be more than 260 (4 specials and 256 bytes)"),
        (d.spm_max_sentences == 0 or d.spm_max_sentences > 100,
         "data.spm_max_sentences must be 0 (all lines) or more than 100"),
        (t.max_tokens > 0, "train.max_tokens must be positive"),
        (t.max_epochs > 0, "train.max_epochs must be positive"),
        (t.max_steps >= 0, "train.max_steps must be 0 (no limit) or positive"),
        (t.lr > 0, "train.lr must be positive"),
        (t.warmup >= 0, "train.warmup must be 0 or positive"),
        (t.schedule in SCHEDULES,
         f"train.schedule must be one of {', '.join(SCHEDULES)}, got {t.schedule!r}"),
        (t.schedule == "inverse_sqrt" or t.max_steps > t.warmup or t.max_minutes > 0,
         f"train.schedule: {t.schedule} decays to zero at train.max_steps or train.max_minutes: "
         "set max_steps above train.warmup, or max_minutes"),
        (0.0 <= t.label_smoothing < 1.0, "train.label_smoothing must be in [0, 1)"),
        (t.clip_norm >= 0, "train.clip_norm must be 0 (off) or positive"),
        (t.eval_every > 0, "train.eval_every must be positive"),
        (t.log_every > 0, "train.log_every must be positive"),
        (t.patience >= 0, "train.patience must be 0 (off) or positive"),
        (t.metric in ("bleu", "loss"), f"train.metric must be 'bleu' or 'loss', got {t.metric!r}"),
        (t.metric != "bleu" or t.eval_bleu, "train.metric: bleu needs train.eval_bleu: true"),
        (t.amp in ("auto", "bf16", "fp16", "none"),
         f"train.amp must be auto, bf16, fp16 or none, got {t.amp!r}"),
        (t.threads >= 0, "train.threads must be 0 (default) or positive"),
        (t.accum_steps >= 1, "train.accum_steps must be at least 1"),
        (t.keep_checkpoints >= 0, "train.keep_checkpoints must be 0 (off) or positive"),
        (t.max_minutes >= 0, "train.max_minutes must be 0 (no budget) or positive"),
        (dec.beam >= 1, "decode.beam must be at least 1"),
        (1 <= dec.nbest <= dec.beam,
         f"decode.nbest ({dec.nbest}) must be between 1 and decode.beam ({dec.beam})"),
        (dec.length_norm in LENGTH_NORMS,
         f"decode.length_norm must be gnmt, average or none, got {dec.length_norm!r}"),
        (dec.length_penalty >= 0, "decode.length_penalty must be 0 or positive"),
        (dec.min_len >= 0, "decode.min_len must be 0 or positive"),
        (dec.max_len_a >= 0 and dec.max_len_b >= 0,
         "decode.max_len_a and decode.max_len_b must be non-negative"),
        (dec.max_len_a > 0 or dec.max_len_b > 0,
         "decode.max_len_a and decode.max_len_b are both 0; make one positive"),
        (dec.batch_tokens > 0, "decode.batch_tokens must be positive"),
        (dec.dtype in DECODE_DTYPES,
         f"decode.dtype must be one of {', '.join(DECODE_DTYPES)}, got {dec.dtype!r}"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(f"{_blame(message, where, overrides)}: {message}")
    if d.tokenizer == "spacy":  # SentencePiece needs no language support (nor spaCy)
        from mt.tokenizers.spacy_words import has_tokenizer

        for key, lang in (("data.src_lang", d.src_lang), ("data.tgt_lang", d.tgt_lang)):
            if not has_tokenizer(lang):
                raise ConfigError(f"{_blame(key, where, overrides)}: {key}: no spaCy tokenizer "
                                  f"for language {lang!r}; use a spaCy language code such as en, "
                                  "de, fr, or xx (multi-language)")
