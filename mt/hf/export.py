"""An mt run as a Marian model directory that transformers loads (`mt export --to hf`).

Only a model Marian can express goes: a run with a marian tokenizer (an import, or a run
fine-tuned from one or trained on its tokenizer files). mt's own SentencePiece and spaCy
vocabularies are not Marian's: its tokenizer puts </s> at the end of every source, which mt's
models never saw. Whatever stands in the way is named in one line.
"""

from __future__ import annotations

from pathlib import Path

import torch

from mt.checkpoint import Run
from mt.errors import ConfigError
from mt.hf.files import write_model
from mt.hf.marian import exportable, hf_config, to_hf
from mt.tokenizers.marian import EOS, PAD, TARGET_VOCAB, VOCAB, mt_order, parse_vocab


def orders(files: dict[str, bytes], shared: bool) -> tuple[torch.Tensor, torch.Tensor,
                                                            list[str]]:
    """The Marian id of each mt id, source and target (mt.tokenizers.marian.mt_order), and
    the target's Marian tokens by id."""
    def order(name: str) -> tuple[torch.Tensor, list[str]]:
        marian = parse_vocab(files[name], name)
        at = {t: i for i, t in enumerate(marian)}
        return torch.tensor([at[t] for t in mt_order(marian)]), marian

    src, _ = order(VOCAB)
    tgt, marian = (src, _) if shared else order(TARGET_VOCAB)
    return src, tgt, marian


def write_export(run: Run, dest: Path) -> None:
    """The Marian model directory of run (its model loaded) in dest, new and empty."""
    d, m = run.cfg.data, run.cfg.model
    problems = list(exportable(m))
    if d.tokenizer.kind != "marian":
        problems.insert(0, f"data.tokenizer is {d.tokenizer.kind} (Marian's tokenizer is "
                           "`marian`: runs imported with mt import hf, or fine-tuned from one)")
    if problems:
        raise ConfigError(f"{run.checkpoint}: cannot be expressed as a Marian model: "
                          f"{'; '.join(problems)}")
    src, tgt, marian = orders(run.files, d.shared_vocab)
    state = {k: v.detach().float().cpu() for k, v in run.model.state_dict().items()}
    config = hf_config(m, len(src), len(tgt), marian.index(PAD), marian.index(EOS))
    generation = {k: config[k] for k in ("pad_token_id", "eos_token_id",
                                         "decoder_start_token_id", "forced_eos_token_id")}
    generation.update(bad_words_ids=[[config["pad_token_id"]]], num_beams=run.cfg.decode.beam,
                      max_length=m.max_positions)
    tokenizer_config = {"tokenizer_class": "MarianTokenizer", "source_lang": d.src_lang,
                        "target_lang": d.tgt_lang, "separate_vocabs": not d.shared_vocab,
                        "model_max_length": m.max_positions}
    write_model(dest, config, to_hf(state, m, src, tgt), run.files, tokenizer_config,
                generation)
