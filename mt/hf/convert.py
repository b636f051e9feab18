"""A Marian model directory's files as what an mt run holds: config, vocabularies, weights."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mt.config import Config, config_from_dict
from mt.errors import CheckpointError
from mt.hf.export import orders
from mt.hf.files import MarianFiles, open_weights
from mt.hf.marian import model_config, to_mt
from mt.model import make_model
from mt.tokenizers import load_tokenizers
from mt.tokenizers.marian import EOS, PAD, MarianSettings
from mt.vocab import Vocab


@dataclass
class Converted:
    cfg: Config
    src_vocab: Vocab
    tgt_vocab: Vocab
    weights: dict[str, torch.Tensor]  # mt's state dict


def from_marian(files: MarianFiles, src_lang: str, tgt_lang: str) -> Converted:
    """The run of a Marian model; CheckpointError for what mt cannot represent (the key named)."""
    hf, where = files.config, files.where
    m = model_config(hf, where)
    shared = not files.separate_vocabs
    raw = Config().to_dict()
    raw["data"].update(src_lang=src_lang, tgt_lang=tgt_lang, shared_vocab=shared,
                       tokenizer={"kind": MarianSettings.kind})
    raw["model"] = Config(model=m).to_dict()["model"]
    # what the model holds, not mt's default: a longer data.max_len would not fit its positions
    raw["data"]["max_len"] = min(raw["data"]["max_len"], m.max_positions - 2)
    beam = files.generation.get("num_beams", hf.get("num_beams"))
    if isinstance(beam, int) and beam > 0:  # the beam its makers decode with
        raw["decode"]["beam"] = beam
    cfg = config_from_dict(raw, f"{where} (as an mt config)")
    src_tok, tgt_tok = load_tokenizers(cfg.data, files.weights.parent, files.tokenizer_files)
    src_vocab, tgt_vocab = Vocab(src_tok.fixed_vocab), Vocab(tgt_tok.fixed_vocab)
    src_order, tgt_order, marian = orders(files.tokenizer_files, shared)
    sizes = {"vocab_size": len(src_order),
             "decoder_vocab_size": len(src_order) if shared else len(tgt_order),
             "pad_token_id": marian.index(PAD), "eos_token_id": marian.index(EOS)}
    for key, value in sizes.items():
        if hf.get(key, value) != value:
            raise CheckpointError(f"{where}: config.json {key} is {hf[key]}, its vocabulary "
                                  f"says {value}; the tokenizer files are another model's")
    weights = to_mt(open_weights(files.weights, where), m, src_order, tgt_order)
    with torch.device("meta"):  # the shapes mt's model expects, at no cost
        expected = make_model(m, len(src_vocab), len(tgt_vocab)).state_dict()
    for name, t in expected.items():
        if name not in weights or weights[name].shape != t.shape:
            got = tuple(weights[name].shape) if name in weights else "missing"
            raise CheckpointError(f"{where}: {name} would be {got}, mt's model needs "
                                  f"{tuple(t.shape)}; the weights do not fit config.json")
    return Converted(cfg, src_vocab, tgt_vocab, weights)
