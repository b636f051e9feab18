"""Scoring translations with sacreBLEU, used by training (validation) and `mt eval`.

Every score is on detokenized output against the raw references. `score` gives what training
follows: cased BLEU and chrF. `mt eval` adds scores comparable with results published under
other conventions (docs/results.md): lowercased BLEU, and BLEU over lowercased spaCy tokens
(the metric of the pytorch-seq2seq tutorials), BLEU over lowercased Moses tokens (with the
`moses` extra); and TER when asked.
"""

from __future__ import annotations

import functools
import os

from sacrebleu.metrics import BLEU, CHRF, TER

from mt.errors import DataError

EXTRA_METRICS = ("ter",)  # what `mt eval --metrics` may add


def bleu_tokenizer(lang: str | None) -> str:
    """sacreBLEU's tokenizer for a target language: its own for Chinese, Japanese and Korean
    (the last two need `pip install "sacrebleu[ja]"` / `"sacrebleu[ko]"`, else characters),
    13a (sacreBLEU's default) for the rest."""
    if lang == "zh":
        return "zh"
    if lang in ("ja", "ko"):
        try:
            BLEU(tokenize=f"{lang}-mecab")
            return f"{lang}-mecab"
        except (RuntimeError, ImportError):
            return "char"
    return "13a"


def score(hyps: list[str], refs: list[str], lang: str | None = None) -> dict:
    """Corpus BLEU (cased, tokenized for `lang` as sacreBLEU does) and chrF, with signatures."""
    _check(hyps, refs)
    bleu, chrf = BLEU(tokenize=bleu_tokenizer(lang)), CHRF()
    b, c = bleu.corpus_score(hyps, [refs]), chrf.corpus_score(hyps, [refs])
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2), "sentences": len(hyps),
            "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature())}


def full_score(hyps: list[str], refs: list[str], lang: str | None = None,
               extra: tuple[str, ...] = ()) -> dict:
    """`score`, plus lowercased BLEU; BLEU over lowercased spaCy tokens where spaCy knows the
    language (`bleu_tok_lc`: hypotheses and references split by `spacy.blank(lang)`, tokens
    joined by spaces, sacreBLEU adding no tokenization); the same over lowercased Moses tokens
    where sacremoses is installed (`bleu_moses_lc`, the metric of most Multi30k papers); and
    the `extra` metrics (ter)."""
    result = score(hyps, refs, lang)
    lc = BLEU(tokenize=bleu_tokenizer(lang), lowercase=True)
    result["bleu_lc"] = round(lc.corpus_score(hyps, [refs]).score, 2)
    result["bleu_lc_signature"] = str(lc.get_signature())
    for key, words, split in (("bleu_tok_lc", "spacy", _spacy_words(lang)),
                              ("bleu_moses_lc", "moses", _moses_words(lang))):
        if split is not None:
            tok = BLEU(tokenize="none", force=True)
            s = tok.corpus_score(split(hyps), [split(refs)])
            result[key] = round(s.score, 2)
            result[key + "_signature"] = f"{tok.get_signature()}|words:{words}-{lang}-lc"
    if "ter" in extra:
        ter = TER()
        result["ter"] = round(ter.corpus_score(hyps, [refs]).score, 2)
        result["ter_signature"] = str(ter.get_signature())
    return result


def _check(hyps: list[str], refs: list[str]) -> None:
    if len(hyps) != len(refs):
        raise DataError(f"{len(hyps)} hypotheses but {len(refs)} references; give one "
                        "reference line per source line")


@functools.cache
def _spacy_words(lang: str | None):
    """lines -> lines of lowercased spaCy tokens joined by spaces; None without spaCy's lang."""
    if lang is None:
        return None
    try:
        import spacy

        nlp = spacy.blank(lang)
    except (ImportError, KeyError, ValueError):
        return None

    def split(lines: list[str]) -> list[str]:
        docs = nlp.tokenizer.pipe(line.lower() for line in lines)
        return [" ".join(t.text for t in doc if not t.is_space) for doc in docs]

    return split


@functools.cache
def _moses_words(lang: str | None):
    """lines -> lines of lowercased Moses tokens (tokenizer.perl's rules: no aggressive hyphen
    splitting, no escaping); None without sacremoses (the `moses` extra) or a language."""
    if lang is None:
        return None
    try:
        from sacremoses import MosesTokenizer
    except ImportError:
        return None
    moses = MosesTokenizer(lang=lang)

    def split(lines: list[str]) -> list[str]:
        return [moses.tokenize(line.lower(), escape=False, return_str=True) for line in lines]

    return split


def compare(systems: list[tuple[str, list[str]]], refs: list[str], lang: str | None = None,
            samples: int = 1000, seed: int = 12345) -> dict:
    """Several systems' outputs of one test set: each one's cased BLEU and chrF with the mean
    and 95% confidence interval (half-width) of sacreBLEU's bootstrap, and the paired bootstrap
    p-value against the first system (sacreBLEU's `PairedTest`, as `sacrebleu --paired-bs`
    computes it; seed as its SACREBLEU_SEED, 1 or more: sacreBLEU reads 0 as "unseeded")."""
    from sacrebleu.significance import PairedTest

    for _, hyps in systems:
        _check(hyps, refs)
    metrics = {"bleu": BLEU(tokenize=bleu_tokenizer(lang)), "chrf": CHRF()}
    saved = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)  # sacreBLEU's only way to seed its test
    try:
        test = PairedTest(systems, metrics, [refs], test_type="bs", n_samples=samples)
        signatures, table = test()
    finally:
        if saved is None:
            os.environ.pop("SACREBLEU_SEED")
        else:
            os.environ["SACREBLEU_SEED"] = saved
    names = [n for n in table if n != "System"]  # BLEU, chrF2, as sacreBLEU names them
    rows = []
    for i, name in enumerate(table["System"]):
        row: dict = {"name": name}
        for key, metric in zip(metrics, names, strict=True):
            r = table[metric][i]
            row[key] = {"score": float(r.score), "mean": float(r.mean), "ci": float(r.ci),
                        "p_value": None if r.p_value is None else float(r.p_value)}
        rows.append(row)
    return {"systems": rows, "sentences": len(refs), "samples": samples, "seed": seed,
            **{f"{k}_signature": str(signatures[m]) for k, m in zip(metrics, names, strict=True)}}
