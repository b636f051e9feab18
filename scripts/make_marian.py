"""Build a small Marian model in the Hugging Face layout, here, with no download: a directory
`mt import hf OUT` takes as it takes an OPUS-MT model (docs/hf.md, without the Hub).

    python scripts/make_marian.py OUT [--corpus data/toy/toy.train] [--langs en de]
        [--vocab-size 300] [--d-model 64] [--ffn 128] [--layers 2] [--heads 4] [--seed 0]

OUT gets what an OPUS-MT download holds: source.spm and target.spm (SentencePiece models
trained on the corpus's first --lines lines), vocab.json as the Marian conversion makes it
(</s> 0, <unk> 1, the pieces, <pad> last), tokenizer_config.json, config.json,
generation_config.json and model.safetensors. The weights are random (normal, std --init-std):
a model that knows nothing yet, for trying the commands on, not for translating. Needs
safetensors (pip install "mt[hf]"); transformers loads the result but is not needed.

mt's tests build their Marian models with the same tokenizer files and config.json
(tests/hf_models.py), but the weights with transformers' MarianMTModel.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import sentencepiece as spm
import torch

from mt.hf.export import orders
from mt.hf.files import write_model
from mt.hf.marian import model_config, to_hf
from mt.model import make_model
from mt.tokenizers.marian import SOURCE_SPM, TARGET_SPM, TARGET_VOCAB, VOCAB

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


def padded(vocab: dict[str, int], size: int) -> dict[str, int]:
    """vocab with filler tokens before <pad>, so that <pad> is id size - 1."""
    tokens = [t for t in vocab if t != "<pad>"]
    tokens += [f"<filler{i}>" for i in range(size - 1 - len(tokens))]
    return {t: i for i, t in enumerate(tokens + ["<pad>"])}


def tokenizer_files(src_lines: list[str], tgt_lines: list[str], *, shared: bool = True,
                    vocab_size: int = 300, extra: tuple[str, ...] = ()) -> dict[str, bytes]:
    """The tokenizer's files by name: the two SentencePiece models and the vocabularies
    (target_vocab.json too when not shared); extra: tokens added to the source vocabulary
    (a multilingual model's >>fra<<)."""
    src_spm, tgt_spm = train_spm(src_lines, vocab_size), train_spm(tgt_lines, vocab_size)
    files = {SOURCE_SPM: src_spm, TARGET_SPM: tgt_spm}
    if shared:
        vocab = marian_vocab(pieces(src_spm), pieces(tgt_spm), extra=extra)
    else:
        vocab, tgt_vocab = marian_vocab(pieces(src_spm), extra=extra), \
            marian_vocab(pieces(tgt_spm))
        # one <pad> id for both sides, as config.json has one pad_token_id
        size = max(len(vocab), len(tgt_vocab))
        vocab, tgt_vocab = padded(vocab, size), padded(tgt_vocab, size)
        files[TARGET_VOCAB] = json.dumps(tgt_vocab).encode()
    files[VOCAB] = json.dumps(vocab).encode()
    return files


def tokenizer_config(languages: tuple[str, str], shared: bool, max_positions: int) -> dict:
    return {"tokenizer_class": "MarianTokenizer", "source_lang": languages[0],
            "target_lang": languages[1], "separate_vocabs": not shared,
            "model_max_length": max_positions}


def marian_config(files: dict[str, bytes], *, d_model: int = 64, layers=(2, 2),
                  heads: int = 4, ffn: int = 128, activation: str = "swish",
                  scale_embedding: bool = True, max_positions: int = 256) -> dict:
    """config.json of a MarianMTModel on these tokenizer files (as MarianConfig's keys)."""
    vocab = json.loads(files[VOCAB])
    tgt_vocab = json.loads(files.get(TARGET_VOCAB, files[VOCAB]))
    pad, eos = vocab["<pad>"], vocab["</s>"]
    return {"model_type": "marian", "architectures": ["MarianMTModel"],
            "vocab_size": len(vocab), "decoder_vocab_size": len(tgt_vocab), "d_model": d_model,
            "encoder_layers": layers[0], "decoder_layers": layers[1],
            "encoder_attention_heads": heads, "decoder_attention_heads": heads,
            "encoder_ffn_dim": ffn, "decoder_ffn_dim": ffn, "activation_function": activation,
            "scale_embedding": scale_embedding, "max_position_embeddings": max_positions,
            "pad_token_id": pad, "decoder_start_token_id": pad, "eos_token_id": eos,
            "forced_eos_token_id": eos, "share_encoder_decoder_embeddings": TARGET_VOCAB
            not in files, "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0}


def random_weights(config: dict, files: dict[str, bytes], init_std: float) -> dict:
    """The Hugging Face state dict of a model of config with random weights: mt's model of
    the same architecture (mt.hf.marian.model_config), its matrices drawn from N(0, init_std)
    as MarianMTModel's are, converted by mt's export (to_hf)."""
    m = model_config(config, "make_marian")
    shared = TARGET_VOCAB not in files
    src, tgt, _ = orders(files, shared)
    model = make_model(m, len(src), len(tgt))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.normal_(0, init_std)
            elif name.endswith(".bias"):
                p.zero_()
    return to_hf(model.state_dict(), m, src, tgt)


def build(dest: Path, src_lines: list[str], tgt_lines: list[str], *,
          languages: tuple[str, str] = ("en", "de"), vocab_size: int = 300, seed: int = 0,
          init_std: float = 0.05, **sizes) -> Path:
    """The model directory in dest (made if missing); sizes: marian_config's."""
    dest.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    files = tokenizer_files(src_lines, tgt_lines, vocab_size=vocab_size)
    config = marian_config(files, **sizes)
    generation = {k: config[k] for k in ("pad_token_id", "eos_token_id",
                                         "decoder_start_token_id", "forced_eos_token_id")}
    generation.update(bad_words_ids=[[config["pad_token_id"]]],
                      max_length=config["max_position_embeddings"])
    write_model(dest, config, random_weights(config, files, init_std), files,
                tokenizer_config(languages, True, config["max_position_embeddings"]),
                generation)
    return dest


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="the model directory to write")
    ap.add_argument("--corpus", default="data/toy/toy.train",
                    help="PREFIX of the parallel corpus PREFIX.SRC, PREFIX.TGT")
    ap.add_argument("--langs", nargs=2, default=["en", "de"], metavar=("SRC", "TGT"))
    ap.add_argument("--lines", type=int, default=600, help="corpus lines the spm models learn")
    ap.add_argument("--vocab-size", type=int, default=300)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--ffn", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2, help="encoder and decoder layers, each")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--init-std", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    src, tgt = ([line for line in Path(f"{args.corpus}.{lang}").read_text(
        encoding="utf-8").splitlines()[:args.lines]] for lang in args.langs)
    build(args.out, src, tgt, languages=tuple(args.langs), vocab_size=args.vocab_size,
          seed=args.seed, init_std=args.init_std, d_model=args.d_model, ffn=args.ffn,
          layers=(args.layers, args.layers), heads=args.heads)
    print(args.out)


if __name__ == "__main__":
    main()
