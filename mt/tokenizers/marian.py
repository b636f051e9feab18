"""Marian (OPUS-MT) tokenizers: two SentencePiece models and the model's vocab.json.

The layout of a Hugging Face Marian model (and of an OPUS-MT download): `source.spm` segments
the source, `target.spm` the target, and `vocab.json` ({piece: id}) gives the ids of both sides
(`target_vocab.json` the target's, for separate vocabularies). The SentencePiece models' own ids
are never used. A source ends with `</s>`, which the model was trained to see; a target's `</s>`
is mt's <eos>. A leading language token (`>>fra<<`, for multilingual models) is kept whole.

Ids. mt's vocabulary is Marian's in one fixed order (`mt_order`): `<pad>`, `<unk>`, Marian's
first ordinary token and `</s>` at ids 0-3, then the rest in Marian's order; there is no <bos>
(the decoder starts from <pad>: model.decoder_start). mt.hf permutes the weights' rows to match,
and back on export.

Reversible as SentencePiece is: `detokenize(tokenize(line)) == line` for a line in the models'
normal form (their normalizer, usually NFKC with single spaces, leaves it unchanged) whose
characters the models know; text outside it comes back normalized, unknown characters as
`<unk>`.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import sentencepiece as spm

from mt.errors import CheckpointError, ConfigError
from mt.tokenizers import DataSection, Text, TokenizerKind, TokenizerSettings

SOURCE_SPM, TARGET_SPM, VOCAB, TARGET_VOCAB = ("source.spm", "target.spm", "vocab.json",
                                               "target_vocab.json")
PAD, UNK, EOS = "<pad>", "<unk>", "</s>"  # Marian's specials, as mt's vocabulary keeps them
SPACE = "\u2581"  # ▁, SentencePiece's mark for a space
LANGUAGE_CODE = re.compile(r">>[^<>\s]+<<")  # >>fra<<: the target language of a multilingual model


@dataclass
class MarianSettings(TokenizerSettings):
    """data.tokenizer: {kind: marian, files: DIR}. `mt import hf` writes runs of this kind."""

    kind: str = "marian"
    # For `mt train` without --init-from: a directory with a Marian tokenizer (source.spm,
    # target.spm, vocab.json; target_vocab.json for separate vocabularies), copied into the run
    files: str = ""


def mt_order(marian: Sequence[str]) -> list[str]:
    """A Marian vocabulary (its tokens by id) in mt's order: <pad>, <unk>, the first other
    token, </s>, then the rest as they came (mt.vocab's fixed ids 0, 1 and 3)."""
    missing = [t for t in (PAD, UNK, EOS) if t not in marian]
    if missing:
        raise CheckpointError(f"the Marian vocabulary lacks {', '.join(missing)}; mt needs "
                              f"{PAD}, {UNK} and {EOS}")
    rest = [t for t in marian if t not in (PAD, UNK, EOS)]
    if not rest:
        raise CheckpointError("the Marian vocabulary holds nothing but its special tokens")
    return [PAD, UNK, rest[0], EOS, *rest[1:]]


def parse_vocab(data: bytes, where: str) -> list[str]:
    """A vocab.json ({token: id}, ids 0..V-1 each once) as its tokens by id."""
    try:
        table = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"{where}: not a JSON vocabulary ({e})") from None
    if not isinstance(table, dict) or not all(isinstance(i, int) for i in table.values()):
        raise CheckpointError(f"{where}: not a vocabulary (expected {{token: id}})")
    tokens: list[str | None] = [None] * len(table)
    for token, i in table.items():
        if not 0 <= i < len(tokens) or tokens[i] is not None:
            raise CheckpointError(f"{where}: id {i} of {token!r} is out of range or taken "
                                  f"twice; the ids must be 0..{len(tokens) - 1}, each once")
        tokens[i] = token
    return tokens  # type: ignore[return-value]


class MarianTokenizer:
    """One side: its SentencePiece model and mt's vocabulary (mt_order of vocab.json)."""

    def __init__(self, proto: bytes, vocab: list[str], source: bool, lowercase: bool,
                 where: str):
        try:
            self._sp = spm.SentencePieceProcessor(model_proto=proto)
        except RuntimeError:
            raise CheckpointError(f"{where}: truncated or corrupted SentencePiece model; copy "
                                  "it again from the Marian model") from None
        self.fixed_vocab = vocab
        self.source, self.lowercase = source, lowercase
        self._whole = {t for t in vocab if LANGUAGE_CODE.fullmatch(t)} | {UNK}

    def tokenize(self, line: str) -> list[str]:
        return self.tokenize_many([line])[0]

    def tokenize_many(self, lines: Iterable[str]) -> list[list[str]]:
        codes, texts = [], []
        for line in lines:
            line = line.lower() if self.lowercase else line
            code = LANGUAGE_CODE.match(line) if self.source else None
            codes.append([code[0]] if code else [])
            texts.append(line[code.end():] if code else line)
        end = [EOS] if self.source else []
        return [code + pieces + end
                for code, pieces in zip(codes, self._sp.encode(texts, out_type=str))]

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Pieces back into text, as MarianTokenizer.decode does: </s> and <pad> dropped, a
        language code and <unk> kept as they are, and every ▁ a space (a piece of the shared
        vocabulary that this side's model lacks is copied as it is)."""
        out, run = "", []
        for t in tokens:
            if t in (EOS, PAD):
                continue
            if t in self._whole:
                out += self._sp.decode_pieces(run) + t + " "
                run = []
            else:
                run.append(t)
        out += self._sp.decode_pieces(run)
        return out.replace(SPACE, " ").strip()


def file_names(d: DataSection) -> tuple[str, ...]:
    return (SOURCE_SPM, TARGET_SPM, VOCAB) + (() if d.shared_vocab else (TARGET_VOCAB,))


class MarianKind(TokenizerKind):
    """The `marian` kind: a Marian model's tokenizer files, kept in the run as they came."""

    settings = MarianSettings

    def load(self, d: DataSection, directory: Path, files: Mapping[str, bytes]
             ) -> tuple[MarianTokenizer, MarianTokenizer]:
        data = {}
        for name in file_names(d):
            try:
                data[name] = files[name] if name in files else (directory / name).read_bytes()
            except OSError as e:
                raise CheckpointError(f"{directory / name}: cannot read the Marian tokenizer's "
                                      f"file ({e.strerror or e}); copy it back from the "
                                      "model, or import it again") from None
        src_vocab = mt_order(parse_vocab(data[VOCAB], VOCAB))
        tgt_vocab = src_vocab if d.shared_vocab else mt_order(
            parse_vocab(data[TARGET_VOCAB], TARGET_VOCAB))
        return (MarianTokenizer(data[SOURCE_SPM], src_vocab, True, d.lowercase, SOURCE_SPM),
                MarianTokenizer(data[TARGET_SPM], tgt_vocab, False, d.lowercase, TARGET_SPM))

    def train(self, d: DataSection, dest_dir: Path, src: Text, tgt: Text) -> None:
        if not d.tokenizer.files:
            raise ConfigError("data.tokenizer.files: give the directory of a Marian tokenizer "
                              f"({', '.join(file_names(d))}); mt import hf makes a run with one")
        for name in file_names(d):
            source = Path(d.tokenizer.files) / name
            if not source.is_file():
                raise ConfigError(f"data.tokenizer.files: {source} not found (a Marian "
                                  f"tokenizer has {', '.join(file_names(d))})")
            shutil.copyfile(source, Path(dest_dir) / name)

    def files(self, d: DataSection) -> tuple[str, ...]:
        return file_names(d)

    def cache_settings(self) -> dict[str, str]:
        return {"sentencepiece": version("sentencepiece")}

    def info(self, d: DataSection) -> dict:
        return {"joint": d.shared_vocab}

    def describe(self, info: dict) -> str:
        return "one vocabulary" if info["joint"] else "separate vocabularies"

    def check(self, d: DataSection) -> Iterator[tuple[str, str]]:
        return iter(())


KIND = MarianKind()
