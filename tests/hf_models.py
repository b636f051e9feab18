"""Tiny Marian models built here, in the layout of an OPUS-MT download (no Hub needed).

`build_marian` trains SentencePiece models on the toy corpus, makes vocab.json as the Marian
conversion does (</s> 0, <unk> 1, the pieces, <pad> last), and saves a `MarianMTModel` with
random weights (larger than transformers' default init, so outputs are not near-ties) beside
them with `save_pretrained`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import sentencepiece as spm
import torch

from conftest import TOY

CONTROL = ("<unk>", "<s>", "</s>")  # SentencePiece's own specials: not in a Marian vocabulary


def train_spm(lines: list[str], vocab_size: int) -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model,
                                   vocab_size=vocab_size, character_coverage=1.0,
                                   hard_vocab_limit=False, minloglevel=2, num_threads=1)
    return model.getvalue()


def pieces(proto: bytes) -> list[str]:
    sp = spm.SentencePieceProcessor(model_proto=proto)
    return [p for p in (sp.id_to_piece(i) for i in range(sp.get_piece_size()))
            if p not in CONTROL]


def marian_vocab(*piece_lists: list[str], extra: tuple[str, ...] = ()) -> dict[str, int]:
    tokens = ["</s>", "<unk>"]
    for p in (*piece_lists, list(extra)):
        tokens += [t for t in p if t not in tokens]
    return {t: i for i, t in enumerate(tokens + ["<pad>"])}


def build_marian(dest: Path, *, shared: bool = True, d_model: int = 32, layers=(2, 2),
                 heads: int = 4, ffn: int = 64, activation: str = "swish",
                 scale_embedding: bool = True, seed: int = 0, vocab_size: int = 300,
                 max_positions: int = 256, lines: int = 600, languages=("en", "de"),
                 extra: tuple[str, ...] = (), init_std: float = 0.3) -> Path:
    """A saved MarianMTModel with its tokenizer files in dest; returns dest."""
    from transformers import MarianConfig, MarianMTModel

    dest.mkdir(parents=True, exist_ok=True)
    src_lines = (TOY / f"toy.train.{languages[0]}").read_text(encoding="utf-8").splitlines()
    tgt_lines = (TOY / f"toy.train.{languages[1]}").read_text(encoding="utf-8").splitlines()
    src_spm, tgt_spm = train_spm(src_lines[:lines], vocab_size), train_spm(tgt_lines[:lines],
                                                                          vocab_size)
    (dest / "source.spm").write_bytes(src_spm)
    (dest / "target.spm").write_bytes(tgt_spm)
    if shared:
        vocab = tgt_vocab = marian_vocab(pieces(src_spm), pieces(tgt_spm), extra=extra)
    else:
        vocab = marian_vocab(pieces(src_spm), extra=extra)
        tgt_vocab = marian_vocab(pieces(tgt_spm))
        # one <pad> id for both sides, as config.json has one pad_token_id
        size = max(len(vocab), len(tgt_vocab))
        vocab, tgt_vocab = (_padded(v, size) for v in (vocab, tgt_vocab))
        (dest / "target_vocab.json").write_text(json.dumps(tgt_vocab), encoding="utf-8")
    (dest / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (dest / "tokenizer_config.json").write_text(json.dumps({
        "source_lang": languages[0], "target_lang": languages[1], "separate_vocabs": not shared,
        "model_max_length": max_positions}), encoding="utf-8")
    pad = vocab["<pad>"]
    config = MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(tgt_vocab), d_model=d_model,
        encoder_layers=layers[0], decoder_layers=layers[1], encoder_attention_heads=heads,
        decoder_attention_heads=heads, encoder_ffn_dim=ffn, decoder_ffn_dim=ffn,
        activation_function=activation, scale_embedding=scale_embedding,
        max_position_embeddings=max_positions, pad_token_id=pad, decoder_start_token_id=pad,
        eos_token_id=0, forced_eos_token_id=0, share_encoder_decoder_embeddings=shared,
        init_std=init_std, dropout=0.1, attention_dropout=0.0, activation_dropout=0.0)
    torch.manual_seed(seed)
    model = MarianMTModel(config)
    with torch.no_grad():  # a logits bias that matters, and a trained-looking <pad> row
        model.final_logits_bias.normal_(0, 0.5)
    model.generation_config.bad_words_ids = [[pad]]
    model.save_pretrained(dest)
    return dest


def _padded(vocab: dict[str, int], size: int) -> dict[str, int]:
    """vocab with filler tokens before <pad>, so that <pad> is id size - 1."""
    tokens = [t for t in vocab if t != "<pad>"]
    tokens += [f"<filler{i}>" for i in range(size - 1 - len(tokens))]
    return {t: i for i, t in enumerate(tokens + ["<pad>"])}


def hf_model(directory: Path):
    from transformers import MarianMTModel
    return MarianMTModel.from_pretrained(directory).eval()


def hf_tokenizer(directory: Path):
    from transformers import MarianTokenizer
    return MarianTokenizer.from_pretrained(directory)
