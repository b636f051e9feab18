"""Tiny Marian models built here, in the layout of an OPUS-MT download (no Hub needed).

`build_marian` makes the tokenizer files and config.json as scripts/make_marian.py does
(SentencePiece models trained on the toy corpus, vocab.json as the Marian conversion makes
it), and saves a `MarianMTModel` with random weights beside them with transformers'
`save_pretrained`: the files mt imports are then transformers' own, not mt's export's. Its
weights are larger than transformers' default init, so outputs are not near-ties.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from conftest import TOY
from scripts.make_marian import marian_config, tokenizer_config, tokenizer_files


def build_marian(dest: Path, *, shared: bool = True, d_model: int = 32, layers=(2, 2),
                 heads: int = 4, ffn: int = 64, activation: str = "swish",
                 scale_embedding: bool = True, seed: int = 0, vocab_size: int = 300,
                 max_positions: int = 256, lines: int = 600, languages=("en", "de"),
                 extra: tuple[str, ...] = (), init_std: float = 0.3) -> Path:
    """A saved MarianMTModel with its tokenizer files in dest; returns dest."""
    from transformers import MarianConfig, MarianMTModel

    dest.mkdir(parents=True, exist_ok=True)
    src, tgt = ((TOY / f"toy.train.{lang}").read_text(encoding="utf-8").splitlines()[:lines]
                for lang in languages)
    files = tokenizer_files(src, tgt, shared=shared, vocab_size=vocab_size, extra=extra)
    for name, data in files.items():
        (dest / name).write_bytes(data)
    (dest / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(
        languages, shared, max_positions)), encoding="utf-8")
    config = marian_config(files, d_model=d_model, layers=layers, heads=heads, ffn=ffn,
                           activation=activation, scale_embedding=scale_embedding,
                           max_positions=max_positions)
    kwargs = {k: v for k, v in config.items() if k not in ("model_type", "architectures")}
    torch.manual_seed(seed)
    model = MarianMTModel(MarianConfig(**kwargs, init_std=init_std))
    with torch.no_grad():  # a logits bias that matters
        model.final_logits_bias.normal_(0, 0.5)
    model.generation_config.bad_words_ids = [[config["pad_token_id"]]]
    model.save_pretrained(dest)
    return dest


def hf_model(directory: Path):
    from transformers import MarianMTModel
    return MarianMTModel.from_pretrained(directory).eval()


def hf_tokenizer(directory: Path):
    from transformers import MarianTokenizer
    return MarianTokenizer.from_pretrained(directory)
