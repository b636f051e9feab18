"""SentencePiece subword tokenizers, trained on the training split and kept in the run directory.

Exactly reversible: lines are normalized (`mt.tokenizers.text.normalize`) and a literal ▁ (which
SentencePiece uses for the space) is escaped before encoding; byte fallback covers any character
the training text lacked. So `detokenize(tokenize(line)) == normalize(line)` for every line.
Ids 0-3 are mt's specials <pad> <unk> <bos> <eos>: mt's Vocab is the model's piece list.
"""

from __future__ import annotations

import functools
import io
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import ClassVar, Literal

import sentencepiece as spm

from mt.errors import CheckpointError, ConfigError, DataError
from mt.textio import atomic_write
from mt.tokenizers import DataSection, Text, TokenizerKind, TokenizerSettings
from mt.tokenizers.text import ESCAPE, escape, normalize, unescape
from mt.vocab import BOS, EOS, PAD, SPECIALS, UNK

JOINT, SRC, TGT = "spm.model", "spm.src.model", "spm.tgt.model"  # files in the run directory
SPACE = "\u2581"  # ▁, SentencePiece's mark for a space


@dataclass
class SentencePieceSettings(TokenizerSettings):
    """data.tokenizer: {kind: sentencepiece, ...}; the old form's keys were data.spm_model_type,
    data.vocab_size, data.spm_max_sentences, data.spm_alpha, spm_nbest and spm_samples."""

    kind: str = "sentencepiece"
    model_type: Literal["unigram", "bpe"] = "unigram"
    vocab_size: int = 8000  # pieces per model, specials and 256 bytes included
    max_sentences: int = 1000000  # train on a sample this big; 0 = all lines
    # subword regularization: > 0 samples segmentations of the training pairs (smoothing alpha;
    # BPE-dropout's probability for bpe); `samples` of them are cached, epoch e uses number
    # e mod samples
    alpha: float = 0.0
    nbest: int = -1  # sample from the nbest best segmentations; -1 = all
    samples: int = 8
    SAMPLING: ClassVar[tuple[str, ...]] = ("alpha", "nbest", "samples")

    def problems(self) -> Iterator[tuple[str, str]]:
        k = "data.tokenizer."
        checks = [
            (k + "vocab_size", self.vocab_size > 4 + 256,
             f"{k}vocab_size ({self.vocab_size}) must be more than 260 (4 specials and 256 "
             "bytes)"),
            (k + "max_sentences", self.max_sentences == 0 or self.max_sentences > 100,
             f"{k}max_sentences must be 0 (all lines) or more than 100"),
            (k + "alpha", self.alpha >= 0, f"{k}alpha must be 0 (off) or positive"),
            ((k + "alpha", k + "model_type"), self.model_type == "unigram" or self.alpha < 1,
             f"{k}alpha is BPE-dropout's probability for a bpe model: it must be below 1"),
            (k + "nbest", self.nbest == -1 or self.nbest > 1,
             f"{k}nbest must be -1 (all segmentations) or more than 1"),
            (k + "samples", self.samples >= 1, f"{k}samples must be at least 1"),
        ]
        return iter([(keys, message) for keys, ok, message in checks if not ok])


def model_files(data_cfg: DataSection) -> tuple[str, str]:
    """File names of the (source, target) models: one joint model with a shared vocabulary."""
    return (JOINT, JOINT) if data_cfg.shared_vocab else (SRC, TGT)


class SentencePieceTokenizer:
    """A model's pieces; with sampling settings (alpha > 0), also a Sampling tokenizer."""

    def __init__(self, path: Path, lowercase: bool = False, proto: bytes | None = None,
                 sampling: SentencePieceSettings | None = None):
        """The model at path, or its content `proto` (from a one-file checkpoint); sampling:
        the alpha, nbest and samples that sample_many uses."""
        path = Path(path)
        try:
            proto = path.read_bytes() if proto is None else proto
        except FileNotFoundError:
            raise CheckpointError(f"{path}: SentencePiece model missing from the run "
                                  "directory (mt train writes it there); copy it back or train "
                                  "again") from None
        except OSError as e:
            raise CheckpointError(f"{path}: cannot read the SentencePiece model "
                                  f"({e.strerror or e})") from None
        try:
            self._sp = spm.SentencePieceProcessor(model_proto=proto)
        except RuntimeError:
            raise CheckpointError(f"{path}: truncated or corrupted SentencePiece model; copy it "
                                  "back from where the run was trained, or train again") from None
        self.fixed_vocab = [self._sp.id_to_piece(i) for i in range(self._sp.get_piece_size())]
        if self.fixed_vocab[: len(SPECIALS)] != SPECIALS:
            raise CheckpointError(f"{path}: not a SentencePiece model trained by mt (ids 0-3 "
                                  f"are {self.fixed_vocab[:4]}, not {SPECIALS})")
        self.lowercase = lowercase
        sampling = sampling or SentencePieceSettings()
        self.alpha, self.nbest = sampling.alpha, sampling.nbest
        self.samples = sampling.samples if sampling.alpha > 0 else 0  # Sampling's

    def _prep(self, line: str) -> str:
        return escape(normalize(line.lower() if self.lowercase else line), SPACE)

    def tokenize(self, line: str) -> list[str]:
        return self.tokenize_many([line])[0]

    def tokenize_many(self, lines: Iterable[str]) -> list[list[str]]:
        return self._sp.encode([self._prep(line) for line in lines], out_type=str)

    def sample_many(self, lines: Iterable[str], seed: int) -> list[list[str]]:
        """A sampled segmentation of each line (subword regularization: unigram sampling, or
        BPE-dropout for a bpe model), the same for the same seed. One thread: the generator
        is global to SentencePiece, and threads would draw from it in any order."""
        spm.set_random_generator_seed(seed)
        return self._sp.encode([self._prep(line) for line in lines], out_type=str,
                               enable_sampling=True, alpha=self.alpha, nbest_size=self.nbest,
                               num_threads=1)

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Pieces back into one line. Strings that are not pieces are copied as they are."""
        return normalize(unescape(self._sp.decode_pieces(list(tokens)), SPACE))

    @functools.cached_property
    def _plain(self) -> frozenset[str]:
        """The pieces that decode as themselves, their marks as spaces (token_words')."""
        sp = self._sp
        return frozenset(p for i, p in enumerate(self.fixed_vocab) if ESCAPE not in p and not (
            sp.is_byte(i) or sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i)))

    def token_words(self, tokens: Sequence[str]) -> list[int] | None:
        """mt.decoding.align.token_words for this detokenize, in one pass, where every token is
        a plain piece (decoded as itself, its marks as spaces): the text grows by each piece.
        None where one is not (a byte, an escape, a string that is no piece)."""
        if not all(t in self._plain for t in tokens):
            return None
        out: list[int] = []
        words, in_word = 0, False
        for t in tokens:
            for c in t.replace(SPACE, " "):
                if c.isspace():
                    in_word = False
                elif not in_word:
                    words, in_word = words + 1, True
            out.append(max(0, words - 1))
        return out


class SentencePieceKind(TokenizerKind):
    """The `sentencepiece` kind: model(s) trained on the training split, kept as files."""

    settings = SentencePieceSettings

    def load(self, d: DataSection, directory: Path, files: Mapping[str, bytes]
             ) -> tuple[SentencePieceTokenizer, SentencePieceTokenizer]:
        src_name, tgt_name = model_files(d)
        src = SentencePieceTokenizer(directory / src_name, d.lowercase, files.get(src_name),
                                     d.tokenizer)
        tgt = src if tgt_name == src_name else SentencePieceTokenizer(
            directory / tgt_name, d.lowercase, files.get(tgt_name), d.tokenizer)
        return src, tgt

    def train(self, d: DataSection, dest_dir: Path, src: Text, tgt: Text) -> None:
        src_name, tgt_name = model_files(d)
        if src_name == tgt_name:
            _train([src, tgt], dest_dir / src_name, d)
        else:
            _train([src], dest_dir / src_name, d)
            _train([tgt], dest_dir / tgt_name, d)

    def files(self, d: DataSection) -> tuple[str, str]:
        return model_files(d)

    def cache_settings(self) -> dict[str, str]:
        return {"sentencepiece": version("sentencepiece")}

    def info(self, d: DataSection) -> dict:
        return {"model_type": d.tokenizer.model_type, "vocab_size": d.tokenizer.vocab_size,
                "joint": d.shared_vocab}

    def describe(self, info: dict) -> str:
        return (f"{'joint ' if info['joint'] else ''}{info['model_type']}, "
                f"{info['vocab_size']:,} pieces")


KIND = SentencePieceKind()


def _train(texts: list[Text], model_path: Path, d: DataSection) -> None:
    s: SentencePieceSettings = d.tokenizer
    where = " and ".join(str(t) for t in texts)
    failed: list[BaseException] = []  # raised while reading: SentencePiece would hide it
    count = 0

    def sentences() -> Iterator[str]:
        nonlocal count
        try:
            for source in texts:
                for line in source:
                    text = normalize(line.lower() if d.lowercase else line)
                    if text:
                        count += 1
                        yield escape(text, SPACE)
        except BaseException as e:  # an error or Ctrl-C: stop feeding, raise it afterwards
            failed.append(e)

    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=sentences(), model_writer=model, model_type=s.model_type,
            vocab_size=s.vocab_size, input_sentence_size=s.max_sentences,
            shuffle_input_sentence=True, character_coverage=1.0, byte_fallback=True,
            normalization_rule_name="identity", pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS,
            pad_piece=SPECIALS[PAD], unk_piece=SPECIALS[UNK], bos_piece=SPECIALS[BOS],
            eos_piece=SPECIALS[EOS], num_threads=min(os.cpu_count() or 1, 8), minloglevel=2)
    except RuntimeError as e:
        if failed:
            raise failed[0] from None
        if count == 0:
            raise DataError(f"{where}: no text to train SentencePiece on (the training split "
                            "is empty or blank)") from None
        message = str(e)
        if m := re.search(r"Vocabulary size too high \(\d+\)\. Please set it to a value <= (\d+)",
                          message):
            raise ConfigError(f"data.tokenizer.vocab_size {s.vocab_size} is too large for the "
                              f"training text ({where}); the largest usable size is {m[1]}"
                              ) from None
        if m := re.search(r"smaller than required_chars\. \d+ vs (\d+)", message):
            raise ConfigError(f"data.tokenizer.vocab_size {s.vocab_size} is too small for the "
                              f"characters of the training text ({where}); use at least {m[1]}"
                              ) from None
        raise
    if failed:
        raise failed[0]
    atomic_write(model_path, lambda tmp: Path(tmp).write_bytes(model.getvalue()))

