"""Lineage: how a checkpoint's weights were made, recorded in every checkpoint as plain data.

A checkpoint's "lineage" is {"how", "data", "from"}:
  how    "trained" (from random weights), "fine-tuned" (mt train --init-from), "averaged"
         (mt average), "imported" (mt import hf: then "source" says from where, below) or
         "distilled" (mt distill: then "distilled" names the teachers, below)
  data   the training data: {"train": the split's path, "fingerprint": the token cache entry's
         name (split, languages, settings hash, files hash)}; an average: its inputs' run's
  from   the checkpoints it was made from, each {"sha256" of the file, "step", "path" it had,
         "lineage": its own (None if it predates lineages)}: none for a trained run, the parent
         for a fine-tuned one, the inputs (oldest first) for an average
  source an import's origin: {"format": "hf-marian", "path": the directory or Hub id given,
         "sha256": of its weights file, "revision": the Hub's, if any}
  distilled a student's teachers and corpora: {"teachers": [record() of each checkpoint],
         "corpora": [{"name", "sha256" of its distilled target file}], "original_weight"}
so that it chains back to the first model. Checkpoints without one (older) still load.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from mt.config import Config
from mt.data import corpus_sources

CHUNK = 1 << 20


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def record(path: Path, state: dict | None = None, *, step: int | None = None,
           lineage: dict | None = None) -> dict:
    """What a child records of a checkpoint it was made from (state: the file as loaded)."""
    if state is not None:
        step, lineage = state.get("step"), state.get("lineage")
    return {"sha256": sha256_of(path), "step": step, "path": str(path), "lineage": lineage}


def trained(cfg: Config, fingerprint: str, parent: dict | None = None,
            mix: list[dict] | None = None, distilled: dict | None = None) -> dict:
    """The lineage of a training run's checkpoints; parent: record() of the checkpoint it was
    initialised from; mix: what each training corpus gives an epoch
    (mt.train.run_data.mix_shares); distilled: a student's teachers (mt.commands.distill)."""
    out = {"how": "fine-tuned" if parent else "distilled" if distilled else "trained",
           "data": {"train": " + ".join(c.label for c in corpus_sources(cfg.data)),
                    "fingerprint": fingerprint, "mix": mix or []},
           "from": [parent] if parent else []}
    if distilled:
        out["distilled"] = distilled
    return out


def imported(source: dict) -> dict:
    """The lineage of a model imported from elsewhere (mt.hf): its source record."""
    return {"how": "imported", "data": None, "from": [], "source": source}


def averaged(inputs: list[dict]) -> dict:
    """The lineage of an average of these checkpoints' records (oldest first)."""
    newest = inputs[-1]["lineage"] or {}
    return {"how": "averaged", "data": newest.get("data"), "from": inputs}


def chain(lineage: dict | None, sha256: str | None, step: int | None) -> list[dict]:
    """The checkpoints back to the first one, base first, each {"how", "train", "fingerprint",
    "sha256", "step"} (an average adds "averaged": the steps of its inputs); the last is the
    checkpoint of `lineage` itself (its sha256 and step given). An average is followed back
    through its newest input (its inputs are one run's); "how": "unknown" where a checkpoint
    holds no lineage."""
    links = []
    while True:
        if lineage is None:
            links.append({"how": "unknown", "sha256": sha256, "step": step})
            break
        data = lineage.get("data") or {}
        link = {"how": lineage["how"], "train": data.get("train"),
                "fingerprint": data.get("fingerprint"), "sha256": sha256, "step": step}
        if lineage["how"] == "averaged":
            link["averaged"] = [r["step"] for r in lineage["from"]]
        if lineage["how"] == "imported":
            link["source"] = lineage.get("source") or {}
        if "distilled" in lineage:
            link["teachers"] = lineage["distilled"]["teachers"]
        links.append(link)
        if not lineage["from"]:
            break
        parent = lineage["from"][-1]
        lineage, sha256, step = parent["lineage"], parent["sha256"], parent["step"]
    return links[::-1]


def format_chain(links: list[dict]) -> str:
    """One line: base -> fine-tuned -> averaged, each with its data, step and file hash."""
    def show(link: dict) -> str:
        what = "no lineage recorded" if link["how"] == "unknown" else link["how"]
        if "averaged" in link:
            what += f" steps {', '.join(map(str, link['averaged']))}"
        elif "source" in link:
            source = link["source"]
            what += (f" from {source.get('path')} (weights sha256 "
                     f"{(source.get('sha256') or '')[:12]})")
        elif "teachers" in link:
            what += " from " + " + ".join(
                f"{t['path']} (step {t['step']}, sha256 {t['sha256'][:12]})"
                for t in link["teachers"])
            what += f" on {link['train']}" if link.get("train") else ""
        elif link.get("train"):
            what += f" on {link['train']}"
        sha = (link["sha256"] or "")[:12]
        return f"{what} (step {link['step']}" + (f", sha256 {sha})" if sha else ")")

    return " -> ".join(show(link) for link in links)
