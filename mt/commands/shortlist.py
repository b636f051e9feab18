"""`mt shortlist RUN [--corpus DIR]`: a run's lexical shortlist (mt.shortlist) learned and
written into its checkpoints, for a run that has none (trained before mt train learned one,
or imported: `mt import hf`), or learned again with other settings (`--set
train.shortlist.k=50`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mt.checkpoint import BEST, LAST, find_checkpoint, load_checkpoint, open_run, save_checkpoint
from mt.train.shortlist import learn_for


def shortlist_run(run_path: Path, corpus: Path | None = None, overrides: Sequence[str] = ()
                  ) -> dict:
    """Learn RUN's shortlist from its training corpora (or the plain files DIR/train.SRC and
    DIR/train.TGT) and write it into the checkpoint given, or a run directory's best.pt and
    last.pt; each file is replaced whole (atomically) or not at all."""
    run_path = Path(run_path)
    run = open_run(run_path, overrides)
    table = learn_for(run, corpus)
    if table is None:
        return {"checkpoints": [], "entries": 0}
    files = ([run_path / name for name in (BEST, LAST) if (run_path / name).is_file()]
             if run_path.is_dir() else [find_checkpoint(run_path)])
    for path in files:
        state = load_checkpoint(path)
        state["shortlist"] = table.to_state()
        save_checkpoint(path, state)
    return {"checkpoints": [str(p) for p in files], "entries": len(table.ids),
            "frequent": len(table.frequent), "source_tokens": len(table.offsets) - 1}
