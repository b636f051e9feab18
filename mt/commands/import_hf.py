"""`mt import hf SOURCE --out RUN`: a Marian (OPUS-MT) model in the Hugging Face format, from a
directory or the Hub, as an mt run directory (written whole or not at all)."""

from __future__ import annotations

from pathlib import Path

from mt import log
from mt.checkpoint import BEST, CONFIG, SRC_VOCAB, TGT_VOCAB, run_state, save_checkpoint
from mt.commands.export import check_out, write_directory
from mt.download import UnsafePath
from mt.errors import UsageError
from mt.hf.convert import from_marian
from mt.hf.files import HUB_ID, fetch, read_model
from mt.token_cache.keys import cache_root
from mt.train.lineage import imported, sha256_of


def import_hf(source: str, out: Path, src_lang: str | None = None,
              tgt_lang: str | None = None, revision: str = "main", force: bool = False) -> dict:
    """Convert the model at source (a directory; else a Hub id, owner/name, fetched into
    the cache) into the run directory out; returns what `mt import hf` prints."""
    out = Path(out)
    check_out(out, force)
    hub = not Path(source).exists() and HUB_ID.fullmatch(source) is not None
    if hub:
        try:
            directory = fetch(source, revision, cache_root() / "hf",
                              lambda name: log.info(f"import: downloading {source} {name}"))
        except UnsafePath as e:  # HUB_ID lets no other part through
            raise UsageError("import hf", "'--revision'", f"{e}; give a branch, tag or commit "
                             "of the model") from None
        files = read_model(directory, where=source)
    else:
        files = read_model(Path(source))
    langs = {"--src-lang": src_lang or files.tokenizer_config.get("source_lang"),
             "--tgt-lang": tgt_lang or files.tokenizer_config.get("target_lang")}
    for option, lang in langs.items():
        if not isinstance(lang, str) or not lang:
            raise UsageError("import hf", f"'{option}'", "needed: the model's "
                             "tokenizer_config.json names no language for that side")
    run = from_marian(files, langs["--src-lang"], langs["--tgt-lang"])
    origin = {"format": "hf-marian", "path": source if hub else str(Path(source).resolve()),
              "sha256": sha256_of(files.weights), "file": files.weights.name}
    if hub:
        origin["revision"] = revision
    state = run_state(run.weights, run.cfg, run.src_vocab, run.tgt_vocab, 0,
                      files.tokenizer_files)
    state["lineage"] = imported(origin)

    def write(tmp: Path) -> None:
        run.cfg.save(tmp / CONFIG)
        run.src_vocab.save(tmp / SRC_VOCAB)
        run.tgt_vocab.save(tmp / TGT_VOCAB)
        for name, data in files.tokenizer_files.items():
            (tmp / name).write_bytes(data)
        save_checkpoint(tmp / BEST, state)

    write_directory(out, write)
    tensors = {t.data_ptr(): t.numel() for name, t in run.weights.items()
               if name != "logits_bias"}  # tied names share one tensor: counted once
    return {"out": str(out), "source": origin["path"], "sha256": origin["sha256"],
            "parameters": sum(tensors.values()),
            "vocab": {"src": len(run.src_vocab), "tgt": len(run.tgt_vocab)},
            "languages": f"{run.cfg.data.src_lang}-{run.cfg.data.tgt_lang}"}
