"""Glossaries through the Translator, the Python API, `mt translate --glossary` and `mt eval
--glossary` on the toy model: every active target term in every output (random glossaries),
no active entry the same bytes as no glossary, ordered terms in order, a batch equal to each
line alone, and bad glossaries refused in one line, nothing written."""

from __future__ import annotations

import json
import random

import pytest

from conftest import TOY, assert_user_error
from mt.errors import ConfigError, DataError
from mt.glossary import occurrences
from mt.translator import Translator
from mt.vocab import PAD

LINES = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:24]
WORDS = ["Katzen", "Hunde", "rote", "alte", "neue", "Häuser", "sieben", "Autos", "Vögel"]


@pytest.fixture(scope="module")
def translator(tiny_run):
    return Translator.load(tiny_run, beam=4)


def random_glossary(rng: random.Random) -> list[list[str]]:
    """Source words of the toy input, each mapped to one or two German words, mostly wrong."""
    sources = sorted({w.strip(".") for line in LINES for w in line.split()})
    return [[s, " ".join(rng.sample(WORDS, rng.randint(1, 2)))]
            for s in rng.sample(sources, 6)]


def holds(translator, text: str, term: str) -> bool:
    tok = translator.tgt_tok.tokenize
    return bool(occurrences(tok(text), tok(term)))


@pytest.mark.parametrize("seed", range(4))
def test_every_active_term_is_in_every_output(translator, seed):
    glossary = random_glossary(random.Random(seed))
    found = translator.translate_nbest(LINES, glossary=glossary)
    changed = 0
    for line, (best,), plain in zip(LINES, found, translator.translate(LINES), strict=True):
        assert best.missing == []
        for src, tgt in best.terms:
            assert src in line and holds(translator, best.text, tgt), (line, best.text, tgt)
        changed += best.text != plain
    assert changed > 0


def test_no_active_entry_is_the_same_output(translator):
    glossary = [["zebra", "Zebra"], ["Katze", "Kater"]]  # the toy says cats, never "Katze"
    plain = translator.translate_nbest(LINES, nbest=2)
    found = translator.translate_nbest(LINES, nbest=2, glossary=glossary)
    assert [[(t.text, t.score) for t in ts] for ts in found] == \
        [[(t.text, t.score) for t in ts] for ts in plain]


def test_ordered_terms_come_in_source_order(translator):
    line = "Yesterday we bought seven red dogs."
    glossary = [["red", "Vögel"], ["dogs", "Häuser"], ["Yesterday", "Autos"]]
    (best,), = translator.translate_nbest([line], glossary=glossary, glossary_ordered=True)
    toks = translator.tgt_tok.tokenize(best.text)
    at = [toks.index(t) for t in ("Autos", "Vögel", "Häuser")]
    assert at == sorted(at), best.text


def test_a_batch_equals_each_line_alone(translator):
    glossary = random_glossary(random.Random(7))
    batch = translator.translate(LINES, glossary=glossary)
    assert batch == [translator.translate([line], glossary=glossary)[0] for line in LINES]


def test_lines_of_many_batches_that_lack_a_term_are_searched_again_together(translator,
                                                                           monkeypatch):
    """A small batch budget splits the lines into many groups; the lines that miss a term
    are searched again batched among themselves (a search holding lines of several groups),
    not group by group, and give what each line gives alone."""
    import mt.translator as module

    glossary = random_glossary(random.Random(3))
    plain, constrained = [], []
    real = module.search_with

    def recorded(engine, request):
        lines = {tuple(row[row != PAD].tolist()) for row in request.src}
        (plain if request.terms is None else constrained).append(lines)
        return real(engine, request)

    monkeypatch.setattr(module, "search_with", recorded)
    batch = translator.translate(LINES, glossary=glossary, batch_tokens=128)
    group = {line: g for g, lines in enumerate(plain) for line in lines}
    assert len(plain) > 3 and constrained
    assert any(len({group[line] for line in lines}) > 1 for lines in constrained)
    assert len(constrained) < len({group[line] for lines in constrained for line in lines})
    assert batch == [translator.translate([line], glossary=glossary)[0] for line in LINES]


def test_each_line_its_own_glossary_as_if_translated_alone_with_it(translator):
    rng = random.Random(11)
    own = [random_glossary(rng) if i % 3 else None for i in range(len(LINES))]
    base = [["cats", "Vögel"], ["dogs", "Autos"]]
    found = translator.translate_nbest(LINES, glossary=base, glossaries=own)
    for line, g, (best,) in zip(LINES, own, found, strict=True):
        merged = dict(base) | dict(g or [])  # the line's target wins for a source term
        (alone,), = translator.translate_nbest([line], glossary=list(merged.items()))
        assert (best.text, best.terms, best.missing) == (alone.text, alone.terms, alone.missing)
        assert best.score == pytest.approx(alone.score, abs=1e-5)
    # streams take them as prefixes are taken; a line without any glossary is the plain output
    assert list(translator.translate_stream(iter(LINES), glossaries=iter(own))) == \
        translator.translate(LINES, glossaries=own)
    plain = translator.translate_nbest(LINES)
    none = translator.translate_nbest(LINES, glossaries=[None] * len(LINES))
    assert [(t.text, t.score, t.terms) for t, in none] == [(t.text, t.score, None) for t, in plain]


def test_per_line_glossaries_refused_as_the_glossary_is(translator):
    with pytest.raises(DataError, match="the glossaries end after 1 of the input's lines"):
        translator.translate(LINES[:2], glossaries=[None])
    with pytest.raises(DataError, match=r"glossaries\[1\]: entry 1: empty target term"):
        translator.translate(LINES[:2], glossaries=[None, [["cats", " "]]])
    with pytest.raises(DataError, match=r"glossaries\[1\]: entry 1: .* not null"):
        translator.translate(LINES[:2], glossaries=[None, [None]])
    with pytest.raises(ConfigError, match="give --beam 2 or more"):
        translator.translate(LINES[:2], glossaries=[None, [["cats", "Hunde"]]], beam=1)
    assert translator.translate(LINES[:2], glossaries=[None, []], beam=1)  # none: greedy is fine


@pytest.mark.parametrize("glossary, needle", [
    ([None], "glossary: entry 1: an entry is two strings, [source term, target term], not null"),
    ([1, 2], "glossary: entry 1: an entry is two strings, [source term, target term], not 1"),
    (7, "glossary: 7 is not a list of pairs"),
])
def test_a_glossary_entry_that_is_not_a_pair_is_a_data_error(translator, glossary, needle):
    with pytest.raises(DataError) as e:
        translator.translate(LINES[:2], glossary=glossary)
    assert needle in str(e.value)


def test_a_glossary_file_with_a_byte_order_mark_keeps_its_first_term(translator, tmp_path):
    g = tmp_path / "g.tsv"
    g.write_bytes("\ufeffcats\tHunde\n".encode())
    [found] = translator.translate_nbest(["We have two cats."], glossary=g)
    assert found[0].terms == [["cats", "Hunde"]] and found[0].missing == []


def test_a_term_the_vocabulary_lacks_is_named_when_read_and_written_through_unk(tiny_run,
                                                                             capsys):
    translator = Translator.load(tiny_run, beam=2)
    glossary = [["dogs", "Zebras"], ["cats", "Katzen"]]
    translator.matcher(glossary)  # read: the vocabulary decides, no translation needed
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1 target term(s) have a word the model's target " \
        "vocabulary lacks, written where the search puts <unk> for it" in err and "'Zebras'" in err
    found = translator.translate_nbest(["You see dogs.", "Two cats."], glossary=glossary)
    assert found[0][0].missing == [] and "Zebras" in found[0][0].text
    found = translator.translate_nbest(["You see dogs.", "Two cats."], glossary=glossary,
                                       unk="show")
    assert found[0][0].missing == ["Zebras"]  # no output can hold it: reported per line
    translator.report()
    assert capsys.readouterr().err == ""  # named once, at load; not "a line misses a term"
    own = [[["cats", "Elefantenrüssel"]], None]  # a line's own glossary: named as it is read
    translator.translate(["Two cats.", "Two cats."], glossaries=own)
    assert "'Elefantenrüssel'" in capsys.readouterr().err


def test_greedy_refuses_a_glossary_to_constrain_and_a_plain_model_to_annotate(translator):
    with pytest.raises(ConfigError, match="give --beam 2 or more"):
        translator.translate(LINES, glossary=[["cats", "Hunde"]], beam=1)
    with pytest.raises(ConfigError, match="trained without data.terminology"):
        translator.translate(LINES, glossary=[["cats", "Hunde"]], glossary_mode="annotate")


def test_ctranslate2_refuses_a_glossary_to_constrain(cli, ct2_export, tmp_path):
    from mt.ct2.search import NO_TERMS

    ct2 = Translator.load(ct2_export, engine="ctranslate2", beam=2)
    with pytest.raises(ConfigError, match=NO_TERMS[:40]):
        ct2.translate(LINES, glossary=[["cats", "Hunde"]])
    g, out = tmp_path / "g.tsv", tmp_path / "out.de"
    g.write_text("cats\tHunde\n", encoding="utf-8")
    r = cli("translate", "--engine", "ctranslate2", str(ct2_export), "--beam", "2",
            "--glossary", str(g), "-i", str(TOY / "toy.test.en"), "-o", str(out))
    assert_user_error(r, 3, "CTranslate2 has no lexically constrained search")
    assert not out.exists()


@pytest.mark.parametrize("seed", range(2))
def test_an_ensemble_keeps_every_active_term(tiny_run, other_run, seed):
    glossary = random_glossary(random.Random(seed))
    ensemble = Translator.load([tiny_run, other_run], beam=4)
    found = ensemble.translate_nbest(LINES, glossary=glossary)
    assert all(best.missing == [] for best, in found)
    for line, (best,) in zip(LINES, found, strict=True):
        for src, tgt in best.terms:
            assert src in line and holds(ensemble, best.text, tgt), (line, best.text, tgt)
    assert sum(len(best.terms) for best, in found) > len(LINES) // 2


def test_translate_and_eval_with_a_glossary_file(cli, tiny_run, tmp_path):
    g = tmp_path / "g.tsv"
    g.write_text("# wrong on purpose\ncats\tHunde\ndogs\tVögel\n", encoding="utf-8")
    src = tmp_path / "in.en"
    src.write_text("We have two cats.\nYou see four dogs.\n\n", encoding="utf-8")
    r = cli("translate", str(tiny_run), "-i", str(src), "--beam", "3", "--glossary", str(g),
            "--format", "jsonl")
    assert r.code == 0, r.err
    records = [json.loads(line) for line in r.out.splitlines()]
    assert [rec["terms"] for rec in records] == [[["cats", "Hunde"]], [["dogs", "Vögel"]], []]
    assert all(rec["missing"] == [] for rec in records)
    assert "Hunde" in records[0]["text"] and "Vögel" in records[1]["text"]
    r = cli("eval", str(tiny_run), "--beam", "3", "--glossary", str(g), "--json")
    assert r.code == 0, r.err
    result = json.loads(r.out)
    assert result["term_use"] == 100.0 and result["terms_active"] > 0


@pytest.mark.parametrize("content,flags,code,needle", [
    (b"cats\tHunde\tx\n", [], 4, "g.tsv:1: 2 tabs"),
    (b"cats\t\xffHunde\n", [], 4, "g.tsv:1: invalid UTF-8"),
    (b"cats\t" + b"x" * 300 + b"\n", [], 4, "at most 200"),
    (b"cats\tHunde\n", ["--beam", "1"], 3, "give --beam 2 or more"),
])
def test_a_bad_glossary_is_one_line_and_nothing_written(cli, tiny_run, tmp_path, content, flags,
                                                        code, needle):
    g = tmp_path / "g.tsv"
    g.write_bytes(content)
    out = tmp_path / "out.de"
    r = cli("translate", str(tiny_run), "-i", str(TOY / "toy.test.en"), "-o", str(out),
            "--glossary", str(g), *flags)
    assert_user_error(r, code, needle)
    assert not out.exists()
