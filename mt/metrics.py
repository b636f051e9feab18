"""Scoring translations: corpus BLEU and chrF with sacreBLEU, used by training and `mt eval`."""

from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF

from mt.errors import DataError


def score(hyps: list[str], refs: list[str]) -> dict:
    """Corpus BLEU and chrF with sacreBLEU's default settings, and their signatures.

    hyps are detokenized outputs, refs the raw references, one per hypothesis.
    """
    if len(hyps) != len(refs):
        raise DataError(f"{len(hyps)} hypotheses but {len(refs)} references")
    bleu, chrf = BLEU(), CHRF()
    b, c = bleu.corpus_score(hyps, [refs]), chrf.corpus_score(hyps, [refs])
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2), "sentences": len(hyps),
            "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature())}
