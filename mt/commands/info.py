"""`mt info`: what a run directory or checkpoint file holds, as text or JSON."""

from __future__ import annotations

from pathlib import Path

from mt.checkpoint import LAST, find_checkpoint, load_checkpoint, load_run
from mt.confidence import CALIBRATION, Calibration
from mt.config import DataConfig
from mt.data import corpus_sources, split_source
from mt.tokenizers import tokenizer_kind
from mt.train.lineage import chain, format_chain, sha256_of
from mt.train.memory import MEMORY_KEYS, format_peak
from mt.train.metrics_log import read_metrics
from mt.train.run_data import format_mix


def run_info(path: Path) -> dict:
    """Config summary, parameters, vocabularies, tokenizer, steps, best metric, checkpoints,
    and the lineage: the chain of checkpoints it was made from, base first, itself last.

    A run directory describes its best checkpoint (else last.pt) and lists every *.pt in it;
    a checkpoint file describes itself (with the best metric from a metrics.jsonl beside it).
    A missing, damaged or foreign file: CheckpointError.
    """
    path = Path(path)
    ckpt = find_checkpoint(path)
    run = load_run(ckpt)
    run_dir = path if path.is_dir() else None
    cfg, m, d = run.cfg, run.cfg.model, run.cfg.data
    checkpoints = []
    for file in sorted(run_dir.glob("*.pt")) if run_dir else [ckpt]:
        step = run.step if file == ckpt else load_checkpoint(file).get("step")
        checkpoints.append({"name": file.name, "bytes": file.stat().st_size, "step": step})
    last = next((c["step"] for c in checkpoints if c["name"] == LAST), None)
    info = {
        "path": str(path),
        "checkpoint": str(ckpt),
        "format": run.format,  # 0: weights only (config and vocab beside it)
        "self_contained": run.format > 0,
        "step": run.step,
        "steps_trained": max(run.step, last or 0),
        "parameters": sum(p.numel() for p in run.model.parameters()),
        "model": {k: getattr(m, k) for k in ("d_model", "n_heads", "n_enc_layers",
                                             "n_dec_layers", "d_ff", "activation", "pre_norm",
                                             "tie_output", "tie_all", "positions",
                                             "scale_embedding", "logits_bias",
                                             "decoder_start")},
        "vocab": {"src": len(run.src_vocab), "tgt": len(run.tgt_vocab),
                  "shared": run.src_vocab.itos == run.tgt_vocab.itos},
        "tokenizer": tokenizer_info(d),
        "data": data_info(d, run.lineage),
        "best": best_metric(ckpt.parent, cfg.train.metric),
        "peak_memory": peak_record(ckpt.parent),
        "checkpoints": checkpoints,
        "lineage": chain(run.lineage, sha256_of(ckpt), run.step),
        "calibration": calibration_info(ckpt, run.step),
        "starters": run.starters,
        "reads": reads_info(d, run),
    }
    return info


def reads_info(d: DataConfig, run) -> dict:
    """What the run was trained to read beside a source, so what to translate it with: a
    memory's best match (data.memory), glossary terms written in (data.terminology); and the
    size of its lexical shortlist (--shortlist on)."""
    m = d.memory
    return {"memory": None if m is None else {"threshold": m.threshold, "prob": m.prob,
                                              "mask": m.mask},
            "terminology": bool(d.terminology.glossary),
            "shortlist": None if run.shortlist is None else
            int(len(run.shortlist.ids) / max(1, len(run.shortlist.offsets) - 1))}


def data_info(d: DataConfig, lineage: dict | None) -> dict | None:
    """The data the run trained on; None for an imported model: its config's data section is
    mt's default (data/toy), not what its makers trained it on."""
    if (lineage or {}).get("how") == "imported":
        return None
    return {"dir": d.dir, "train": [c.label for c in corpus_sources(d)],
            "val": held_label(d, "val"), "test": held_label(d, "test"),
            "mix": ((lineage or {}).get("data") or {}).get("mix") or []}


def held_label(d, split: str) -> str:
    """data.val or data.test as `mt info` shows it: its split name, or a corpus's files."""
    value = getattr(d, split)
    return value if isinstance(value, str) else split_source(d, split).label


def calibration_info(ckpt: Path, step: int) -> dict | None:
    """The calibration in the checkpoint's directory (mt calibrate), checked, and whether it
    was fitted for this checkpoint; None without one."""
    path = ckpt.parent / CALIBRATION
    if not path.is_file():
        return None
    cal = Calibration.load(path)
    return {"path": str(path), "threshold": cal.threshold, "lines": cal.lines,
            "positives": cal.positives, "data": cal.data, "checkpoint": cal.checkpoint,
            "step": cal.step, "applies": (cal.checkpoint, cal.step) == (ckpt.name, step)}


def tokenizer_info(d: DataConfig) -> dict:
    """The tokenizer the run's config names, with what its kind adds (SentencePiece: what it
    was trained with)."""
    return {"kind": d.tokenizer.kind, "src_lang": d.src_lang, "tgt_lang": d.tgt_lang,
            "lowercase": d.lowercase, **tokenizer_kind(d.tokenizer.kind).info(d)}


def best_metric(run_dir: Path, metric: str) -> dict | None:
    """The best validation result in run_dir/metrics.jsonl by train.metric, and its step."""
    key, sign = ("val_bleu", 1) if metric == "bleu" else ("val_loss", -1)
    valid = [r for r in read_metrics(run_dir) if r.get("event") == "valid"
             and isinstance(r.get(key), (int, float))]
    if not valid:
        return None
    best = max(valid, key=lambda r: (sign * r[key], -r["step"]))  # the first of equals
    return {"metric": key, "value": best[key], "step": best["step"]}


def peak_record(run_dir: Path) -> dict | None:
    """The validation record of run_dir/metrics.jsonl with the highest peak memory: {key: MiB,
    "step": step}, or None (no record has one: a run from before they were kept)."""
    best = None
    for r in read_metrics(run_dir):
        for key in MEMORY_KEYS:
            if r.get("event") == "valid" and isinstance(r.get(key), (int, float)) and (
                    best is None or r[key] > best[key]):
                best = {key: r[key], "step": r["step"]}
    return best


def format_info(info: dict) -> str:
    """The text `mt info` prints: one `name: value` line per item."""
    m, v, t = info["model"], info["vocab"], info["tokenizer"]
    kind = tokenizer_kind(t["kind"]).describe(t)
    norm = "pre-norm" if m["pre_norm"] else "post-norm"
    tied = "all embeddings tied" if m["tie_all"] else ("tied output" if m["tie_output"]
                                                       else "untied")
    best, data = info["best"], info["data"]
    lines = [
        ("checkpoint", f"{info['checkpoint']} (step {info['step']}, format {info['format']}"
                       + (", self-contained)" if info["self_contained"] else
                          ", weights only: config and vocab read from its directory)")),
        ("model", f"Transformer {m['n_enc_layers']}+{m['n_dec_layers']} layers, d_model "
                  f"{m['d_model']}, {m['n_heads']} heads, d_ff {m['d_ff']} {m['activation']}, "
                  f"{norm}, {tied}" + (", Marian positions" if m["positions"] == "marian"
                                       else "")),
        ("parameters", f"{info['parameters']:,} ({info['parameters'] / 1e6:.2f}M)"),
        ("vocab", f"src {v['src']:,}, tgt {v['tgt']:,}" + (" (shared)" if v["shared"] else "")),
        ("tokenizer", f"{t['kind']} {t['src_lang']} -> {t['tgt_lang']}"
                      + (f" ({kind})" if kind else "")
                      + (", lowercased" if t["lowercase"] else "")),
        ("data", "none: an imported model, trained elsewhere (mt train --init-from RUN "
                 "fine-tunes it on yours)" if data is None else
                 f"{data['dir']} (train {' + '.join(data['train'])}, val {data['val']}, test "
                 f"{data['test']})"),
        *([("mix", format_mix(data["mix"]))] if data and len(data["mix"]) > 1 else []),
        ("steps trained", str(info["steps_trained"])),
        ("best", f"{best['metric']} {best['value']} at step {best['step']}" if best
                 else "unknown (no validation in metrics.jsonl)"),
        *([("peak memory", f"{format_peak(info['peak_memory'])}, by step "
                           f"{info['peak_memory']['step']}")] if info["peak_memory"] else []),
    ]
    lines.append(("lineage", format_chain(info["lineage"])))
    cal = info.get("calibration")
    if cal:
        lines.append(("calibration", f"P(sentence chrF >= {cal['threshold']:g}), fitted on "
                      f"{cal['lines']} lines ({cal['data']})" + (
                          "" if cal["applies"] else f"; for {cal['checkpoint']} at step "
                          f"{cal['step']}, not this checkpoint: not used")))
    reads = info.get("reads") or {}
    if mem := reads.get("memory"):
        lines.append(("reads", f"a memory's best match of {mem['threshold']:g}% or more "
                      f"(data.memory, prob {mem['prob']:g}"
                      + (", unrelated words masked" if mem["mask"] else "")
                      + "): translate with --memory"))
    if reads.get("terminology"):
        lines.append(("reads", "glossary terms written into its sources (data.terminology): "
                      "translate with --glossary FILE --glossary-mode annotate (or both)"))
    if reads.get("shortlist"):
        lines.append(("shortlist", f"{reads['shortlist']} target tokens per source "
                      "token on average, learned from its training pairs (--shortlist on)"))
    if info["starters"]:
        shown = info["starters"][:10]
        lines.append(("starters", ", ".join(shown) + (
            f", ... ({len(info['starters'])})" if len(info["starters"]) > len(shown) else "")))
    for c in info["checkpoints"]:
        lines.append((c["name"], f"{c['bytes'] / 2**20:.1f} MiB, step {c['step']}"))
    width = max(len(name) for name, _ in lines)
    return "\n".join(f"{name + ':':<{width + 1}} {value}" for name, value in lines)
