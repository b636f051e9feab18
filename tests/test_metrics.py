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
