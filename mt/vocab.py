"""Token <-> id maps with fixed special ids, built from the training split only, saved as text."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

from mt.errors import VocabError

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>"]
# Marian's end of sentence: an imported vocabulary (mt.hf) keeps its own spelling
EOS_NAMES = (SPECIALS[EOS], "</s>")


def start_id(decoder_start: str) -> int:
    """The decoder's first input for model.decoder_start (bos, or pad as in Marian)."""
    return PAD if decoder_start == "pad" else BOS


class Vocab:
    """Ids 0, 1, 3 are <pad>, <unk> and the end of sentence (<eos> or </s>); id 2 is <bos>,
    or, in a vocabulary without one (imported from Marian, whose decoder starts from <pad>:
    model.decoder_start), an ordinary token."""

    def __init__(self, tokens: list[str]):
        head = list(tokens[:len(SPECIALS)])
        if len(head) < len(SPECIALS) or head[PAD] != SPECIALS[PAD] or head[UNK] != SPECIALS[UNK] \
                or head[EOS] not in EOS_NAMES:
            raise VocabError(f"a vocabulary must start with {SPECIALS} (or <bos> replaced by "
                             "a token and </s> for <eos>)")
        self.itos = list(tokens)
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise VocabError("duplicate tokens in vocabulary")
        self.has_bos = head[BOS] == SPECIALS[BOS]

    @functools.cached_property
    def has_digits(self) -> bool:
        """Whether a token holds a digit (asked at every document request by
        mt.document.reads_digits: scanned once)."""
        return any(any(c.isdigit() for c in t) for t in self.itos)

    @classmethod
    def build(cls, sentences: Iterable[list[str]], min_freq: int = 1, max_size: int = 0) -> Vocab:
        """Count the tokens of `sentences` (a tokenizer's fixed vocabulary is taken as it is by
        mt.cached_mix instead)."""
        return cls.from_counts(Counter(tok for sent in sentences for tok in sent), min_freq,
                               max_size)

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], min_freq: int = 1, max_size: int = 0
                    ) -> Vocab:
        # Most frequent first; ties broken alphabetically so builds are reproducible.
        kept = (t for t, c in counts.items() if c >= min_freq and t not in SPECIALS)
        ranked = sorted(kept, key=lambda t: (-counts[t], t))
        if max_size > 0:
            ranked = ranked[:max_size]
        return cls(SPECIALS + ranked)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: list[str]) -> list[int]:
        return [self.stoi.get(t, UNK) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Ids to tokens, stopping at <eos> and skipping the other specials."""
        out = []
        for i in ids:
            if i == EOS:
                break
            if i == UNK:
                out.append(SPECIALS[UNK])
            elif i != PAD and not (i == BOS and self.has_bos):
                out.append(self.itos[i])
        return out

    def save(self, path: Path) -> None:
        Path(path).write_text("\n".join(self.itos) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Vocab:
        path = Path(path)
        try:
            tokens = path.read_text(encoding="utf-8").split("\n")
        except FileNotFoundError:
            raise VocabError(f"{path}: vocabulary file missing from the run directory; "
                             "copy it from the run the checkpoint came from") from None
        except (OSError, UnicodeDecodeError) as e:
            raise VocabError(f"{path}: cannot read vocabulary ({e}); copy it again from "
                             "its run") from None
        if tokens and tokens[-1] == "":
            tokens.pop()
        try:
            return cls(tokens)
        except VocabError as e:
            raise VocabError(f"{path}: not a valid vocabulary ({e}); copy it again from "
                             "its run") from None
