"""mt/metrics.py: the scores of `mt eval`: the comparable BLEU variants, the tokenizer per target
language, TER."""

from mt.metrics import bleu_tokenizer, full_score, score

REFS = ["A man in a blue shirt is standing on a ladder.", "Two dogs play in the snow."]


def test_identical_text_scores_100_everywhere():
    r = full_score(REFS, REFS, "en", ("ter",))
    assert r["bleu"] == r["bleu_lc"] == r["bleu_tok_lc"] == 100.0 and r["ter"] == 0.0, r
    assert "case:lc" in r["bleu_lc_signature"] and "spacy-en-lc" in r["bleu_tok_lc_signature"]


def test_case_counts_only_in_cased_bleu():
    hyps = [h.upper() for h in REFS]
    r = full_score(hyps, REFS, "en")
    assert r["bleu"] < 20 and r["bleu_lc"] == 100.0 and r["bleu_tok_lc"] == 100.0, r
    assert "ter" not in r  # only when asked


def test_spacy_tokens_split_what_13a_keeps_whole():
    # 13a leaves "father-figure" one token; spaCy splits it, as the tutorials' metric does.
    hyps, refs = ["the father figure smiles ."], ["the father-figure smiles ."]
    r = full_score(hyps, refs, "en")
    assert r["bleu_tok_lc"] > r["bleu_lc"], r


def test_moses_tokens_split_punctuation_but_keep_hyphenated_words():
    """The Moses metric (tokenizer.perl's rules, the Multi30k papers' convention) splits
    punctuation off words, as spaCy does, but keeps "father-figure" whole, as spaCy does not."""
    r = full_score(REFS, REFS, "de")
    assert r["bleu_moses_lc"] == 100.0 and "moses-de-lc" in r["bleu_moses_lc_signature"], r
    hyps, refs = ["the father figure smiles."], ["the father-figure smiles."]
    r = full_score(hyps, refs, "en")
    assert r["bleu_moses_lc"] < r["bleu_tok_lc"], r
    r = full_score(["Zwei Hunde, im Schnee."], ["zwei hunde , im schnee ."], "de")
    assert r["bleu_moses_lc"] == 100.0, r  # against text tokenized and lowercased already


def test_target_language_picks_the_tokenizer():
    assert bleu_tokenizer("de") == bleu_tokenizer(None) == "13a"
    assert bleu_tokenizer("zh") == "zh"
    assert bleu_tokenizer("ja") in ("ja-mecab", "char")  # characters without sacrebleu[ja]
    # Chinese without spaces: 13a would see one word per sentence.
    hyp, ref = ["我们在公园里散步"], ["我们在公园散步"]
    assert score(hyp, ref, "zh")["bleu"] > score(hyp, ref, "de")["bleu"]


def test_compare_equals_sacrebleus_own_paired_bootstrap(tmp_path):
    import os
    import re
    import subprocess
    import sys

    from mt.metrics import compare

    refs = ["The cat sat on the mat.", "A dog runs in the park.", "He is here today.",
            "It rains a lot in April.", "Two men play football.", "A woman reads a book."] * 5
    a = ["The cat sat on a mat.", "A dog ran in a park.", "He is here.", "It rains.",
         "Two men play soccer.", "A woman is reading."] * 5
    b = ["The cat sat on the mat.", "The dog runs in the park.", "He is here today.",
         "Rain.", "Two men play football.", "A woman reads books."] * 5
    files = {}
    for name, lines in (("ref", refs), ("a", a), ("b", b)):
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_text("".join(line + "\n" for line in lines))
    ours = compare([(str(files["a"]), a), (str(files["b"]), b)], refs, "en", samples=300,
                   seed=7)
    env = {**os.environ, "SACREBLEU_SEED": "7"}
    p = subprocess.run([sys.executable, "-m", "sacrebleu", str(files["ref"]), "-i",
                        str(files["a"]), str(files["b"]), "-m", "bleu", "chrf", "--paired-bs",
                        "--paired-bs-n", "300", "-f", "text"],
                       capture_output=True, text=True, env=env, check=True)
    # sacreBLEU's table: "score (mean ± ci)" per metric, one decimal; "(p = 0.0033)" below
    cells = [tuple(map(float, c)) for c in re.findall(r"([\d.]+) \(([\d.]+) ± ([\d.]+)\)",
                                                      p.stdout)]
    pvalues = [float(v) for v in re.findall(r"\(p = ([\d.]+)\)", p.stdout)]
    mine = [(round(s[k]["score"], 1), round(s[k]["mean"], 1), round(s[k]["ci"], 1))
            for s in ours["systems"] for k in ("bleu", "chrf")]
    assert cells == mine and len(cells) == 4
    assert pvalues == [round(ours["systems"][1][k]["p_value"], 4) for k in ("bleu", "chrf")]
    assert ours["systems"][0]["bleu"]["p_value"] is None
    assert "seed:7" in ours["bleu_signature"] and "bs:300" in ours["chrf_signature"]
    assert "SACREBLEU_SEED" not in os.environ  # set for the test only, then restored
    again = compare([("a", a), ("b", b)], refs, "en", samples=300, seed=7)
    assert again["systems"][1]["bleu"] == ours["systems"][1]["bleu"]  # seeded: the same
    other = compare([("a", a), ("b", b)], refs, "en", samples=300, seed=8)
    assert other["systems"][1]["bleu"]["mean"] != ours["systems"][1]["bleu"]["mean"]
