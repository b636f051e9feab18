"""mt/translator.py: batch translation keeps order and empty lines, n-best lists and their
format, decoding options and dtypes, and streaming without reading ahead; the Python API
(Translator.load, per-call options, `from mt import Translator` and the README's example)."""

import contextlib
import io
import re
import subprocess
import sys
import threading

import pytest
import torch
from test_decoding_rules import beam_search

from conftest import ROOT, TOY, assert_user_error
from mt.checkpoint import load_run
from mt.config import DecodeConfig
from mt.data import pad
from mt.errors import ConfigError
from mt.records import Translation
from mt.threads import Streams
from mt.translator import CHUNK_LINES, Translator


@pytest.fixture(scope="session")
def tiny(tiny_run):
    return load_run(tiny_run)


def test_translate_stream_never_reads_ahead_more_than_a_chunk(tiny):
    consumed = 0

    def endless():
        nonlocal consumed
        while True:
            consumed += 1
            yield "one two three"

    first = next(iter(Translator(tiny).translate_stream(endless())))
    assert first and consumed <= CHUNK_LINES


LINES = ["Today you have eight hundred seventy nine cats.", "", "Yesterday we had sixty houses.",
         "   ", "Today they buy three hundred fifty two cars.", "We have two dogs.",
         "Yesterday you had seven hundred old cars and nine cats.", ""]


def test_translator_keeps_order_and_empty_lines_through_sorted_batches(tiny_run):
    run = load_run(tiny_run)
    cfg = DecodeConfig(beam=3, nbest=2, max_len_b=5, batch_tokens=60)  # several batches
    translator = Translator(run, cfg)
    sizes = []
    search = translator.engine.search
    translator.engine.search = lambda r: sizes.append(r.src.numel()) or search(r)
    together = translator.translate_nbest(LINES)
    assert len(sizes) > 1 and max(sizes) * 3 <= 60  # the budget counts tokens x beam
    for line, got in zip(LINES, together, strict=True):
        alone = Translator(run, cfg).translate_nbest([line])[0]
        assert [t.text for t in got] == [t.text for t in alone]
        assert [t.score for t in got] == pytest.approx([t.score for t in alone], abs=1e-4)
        if line.strip():
            assert len(got) == 2 and got[0].text and got[0].score >= got[1].score
        else:
            assert [(t.text, t.score) for t in got] == [("", 0.0)]
    assert translator.translate(LINES) == [t[0].text for t in together]


def test_streams_translate_as_one_thread_does(tiny_run):
    """Batches decoded in three streams at once (mt.threads.Streams): the same translations,
    scores and alignments, in input order, the batches spread over the streams' threads."""
    run = load_run(tiny_run)
    cfg = DecodeConfig(beam=3, nbest=2, max_len_b=5, batch_tokens=60, align=True)
    lines = LINES * 5
    want = Translator(run, cfg).translate_nbest(lines)
    translator = Translator(run, cfg, streams=Streams(3, 1))
    threads = set()
    search = translator.engine.search
    translator.engine.search = lambda *a: threads.add(threading.get_ident()) or search(*a)
    got = translator.translate_nbest(lines)
    assert len(threads) > 1 and threading.get_ident() not in threads
    assert [[(t.text, t.alignment) for t in ts] for ts in got] == \
        [[(t.text, t.alignment) for t in ts] for ts in want]
    assert [t.score for ts in got for t in ts] == pytest.approx(
        [t.score for ts in want for t in ts], abs=1e-5)


def test_greedy_translator_scores_match_beam_of_one(tiny_run):
    run = load_run(tiny_run)
    greedy_cfg = DecodeConfig(beam=1, length_norm="none", max_len_b=5)
    got = Translator(run, greedy_cfg).translate_nbest(LINES[:3])
    scores = [t[0].score for t in got]
    assert scores[1] == 0.0 and all(s < 0 for s in scores[::2])
    run.model.eval()
    src = pad([run.src_vocab.encode(Translator(run).src_tok.tokenize(LINES[0]))])
    want = beam_search(run.model, src, greedy_cfg)[0][0].score
    assert scores[0] == pytest.approx(want, abs=1e-4)


def test_bf16_decoding_translates_like_float32_and_leaves_the_run_model_alone(cli, tiny_run):
    """decode.dtype bf16 decodes with a bf16 copy of the weights: the run's model stays float32,
    and on a trained model the outputs mostly agree with float32's (rounding may flip a few)."""
    run = load_run(tiny_run)
    lines = (TOY / "toy.test.en").read_text().splitlines()[:40]
    for beam in (1, 3):
        f32 = Translator(run, DecodeConfig(beam=beam)).translate(lines)
        tr = Translator(run, DecodeConfig(beam=beam, dtype="bf16"))
        bf16 = tr.translate(lines)
        assert next(tr.model.parameters()).dtype == torch.bfloat16
        assert next(run.model.parameters()).dtype == torch.float32
        assert sum(a == b for a, b in zip(f32, bf16, strict=True)) >= 0.8 * len(lines)
    r = cli("translate", str(tiny_run), "--dtype", "bf16", "--device", "cpu",
            stdin=("\n".join(lines[:3]) + "\n").encode())
    assert r.code == 0 and r.out.count("\n") == 3, r.err
    assert_user_error(cli("translate", str(tiny_run), "--dtype", "fp8", stdin=b"x\n"),
                      3, "decode.dtype")


def test_cli_nbest_format(cli, tiny_run):
    text = "\n".join(LINES) + "\n"
    r = cli("translate", str(tiny_run), "--beam", "3", "--nbest", "2", "--device", "cpu",
            stdin=text.encode())
    assert r.code == 0, r.err
    rows = [line.split("\t") for line in r.out.splitlines()]
    assert all(len(row) == 3 for row in rows)
    index = [int(row[0]) for row in rows]
    assert index == sorted(index) and set(index) == set(range(len(LINES)))
    for i, line in enumerate(LINES):
        mine = [row for row in rows if int(row[0]) == i]
        scores = [float(row[1]) for row in mine]
        if line.strip():
            assert len(mine) == 2 and scores[0] >= scores[1] and mine[0][2] != mine[1][2]
        else:
            assert mine == [[str(i), "0.0000", ""]]
    # without --nbest: exactly one line per input line, the best of the n-best
    plain = cli("translate", str(tiny_run), "--beam", "3", "--device", "cpu", stdin=text.encode())
    assert plain.code == 0, plain.err
    assert plain.out.split("\n")[:-1] == [[row[2] for row in rows if int(row[0]) == i][0]
                                         for i in range(len(LINES))]


def test_cli_decoding_options_override_the_run_config(cli, tiny_run, tmp_path):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("\n".join(LINES[::2]) + "\n", encoding="utf-8")
    ref.write_text("\n".join(LINES[::2]) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    r = cli("eval", str(tiny_run), "--src", str(src), "--ref", str(ref), "--output", str(out),
            "--beam", "2", "--max-len-a", "0", "--max-len-b", "2", "--min-len", "2",
            "--length-penalty", "1.5", "--batch-tokens", "8", "--device", "cpu")
    assert r.code == 0, r.err
    words = [len(line.split()) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(words) == 4 and all(1 <= w <= 2 for w in words)
    bad = cli("translate", str(tiny_run), "--beam", "2", "--nbest", "3", stdin=b"a\n")
    assert_user_error(bad, 3, "decode.nbest")


@pytest.mark.slow  # a fresh interpreter, which imports torch
def test_import_mt_is_cheap_and_the_translator_comes_on_first_use():
    code = ("import sys, mt; print('torch' in sys.modules); from mt import Translator, "
            "Translation; import mt.translator as t; print('torch' in sys.modules, "
            "Translator is t.Translator, Translation is t.Translation)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert p.stdout.split() == ["False", "True", "True", "True"], p.stderr
    with pytest.raises(AttributeError, match="no attribute 'Translater'"):
        import mt

        mt.Translater  # noqa: B018


def test_load_takes_decoding_options_once_and_per_call(tiny_run):
    beam3 = Translator.load(tiny_run, beam=3, nbest=2)
    assert (beam3.decoding.beam, beam3.decoding.nbest) == (3, 2)
    want = Translator(load_run(tiny_run), DecodeConfig(beam=3, nbest=2)).translate_nbest(LINES)
    got = beam3.translate_nbest(LINES)
    assert all(isinstance(t, Translation) for ts in got for t in ts)
    assert [[t.text for t in ts] for ts in got] == [[t.text for t in ts] for ts in want]
    plain = Translator.load(str(tiny_run))  # a str path too
    assert plain.decoding == load_run(tiny_run).cfg.decode
    per_call = plain.translate_nbest(LINES, beam=3, nbest=2)
    assert [[t.text for t in ts] for ts in per_call] == [[t.text for t in ts] for ts in got]
    assert plain.decoding.beam == 1 and plain.translate(LINES, beam=3) == [
        ts[0].text for ts in got]
    assert list(plain.translate_stream(iter(LINES), beam=3)) == [ts[0].text for ts in got]
    for options, needle in (({"beam": 0}, "decode.beam must be at least 1"),
                            ({"nbest": 2}, "decode.nbest (2) must be between 1 and decode.beam"),
                            ({"bem": 2}, "did you mean 'beam'"),
                            ({"beam": "wide"}, "'decode.beam' must be int"),
                            ({"dtype": "bf16"}, "give it to Translator.load")):
        with pytest.raises(ConfigError, match=re.escape(needle)):
            plain.translate(LINES, **options)
    with pytest.raises(ConfigError, match="decode.length_norm must be"):
        Translator.load(tiny_run, length_norm="bogus")
    with pytest.raises(ConfigError, match="expected mt or ctranslate2"):
        Translator.load(tiny_run, engine="marian")


def test_the_readme_python_example_runs(tiny_run):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("```python\n")[1].split("```")[0]
    assert '"runs/toy"' in block
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(block.replace('"runs/toy"', repr(str(tiny_run))), {})
    printed = out.getvalue().splitlines()
    assert printed[0].startswith("['") and printed[0].endswith("', '']")
    assert 1 <= len(printed[1:]) <= 2 and all(float(line.split()[0]) < 0 for line in printed[1:])


def _translator_class():
    import ast

    source = (ROOT / "mt" / "translator.py").read_text(encoding="utf-8")
    return next(n for n in ast.walk(ast.parse(source))
                if isinstance(n, ast.ClassDef) and n.name == "Translator")


def _outside_the_translator() -> list:
    """Every module of mt/ but mt/translator.py, and the benchmarks."""
    return [p for p in [*(ROOT / "mt").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
            if p != ROOT / "mt" / "translator.py"]


def test_no_command_assigns_an_attribute_of_a_translator():
    """Translator.load sets up what a command needs (streams, chunk size, decoding defaults):
    no module above the translator assigns one of a Translator's attributes afterwards."""
    import ast

    cls = _translator_class()
    own = {t.attr for n in ast.walk(cls) if isinstance(n, ast.Assign | ast.AugAssign)
           for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
           if isinstance(t, ast.Attribute)}
    assert {"streams", "chunk_lines", "_truncated", "_decoding", "engine"} <= own
    found = []
    for path in [*(ROOT / "mt" / "commands").glob("*.py"), *(ROOT / "mt" / "serve").glob("*.py"),
                 ROOT / "mt" / "cli.py"]:
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = (n.targets if isinstance(n, ast.Assign) else [n.target]
                       if isinstance(n, ast.AugAssign) else [])
            found += [f"{path.name}:{n.lineno} .{t.attr}" for t in targets
                      if isinstance(t, ast.Attribute) and t.attr in own
                      and not (isinstance(t.value, ast.Name) and t.value.id == "self")]
    assert found == []


def private_uses(paths, names: set[str]) -> list[str]:
    """Each read or assignment of an attribute in names of something other than self or cls,
    as `path:line .name`."""
    import ast

    return [f"{p.relative_to(p.parents[1])}:{n.lineno} .{n.attr}" for p in paths
            for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(n, ast.Attribute) and n.attr in names
            and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))]


def test_nothing_outside_the_translator_reads_or_assigns_its_inside(tmp_path):
    """A Translator's private attributes and methods, and decode_cfg (now the read-only
    `decoding`), are read or set by no module of mt/ outside mt/translator.py nor by a benchmark:
    what they need is a public method or property. The check finds a planted use."""
    import ast

    cls = _translator_class()
    names = {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute)
             and isinstance(n.value, ast.Name) and n.value.id == "self"}
    names |= {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    private = {x for x in names if x.startswith("_") and not x.endswith("__")} | {"decode_cfg"}
    assert {"_decoding", "_truncated", "_unkept", "_cfg", "_translate", "_dropout_twin"} <= private
    assert private_uses(_outside_the_translator(), private) == []
    planted = tmp_path / "mt" / "planted.py"
    planted.parent.mkdir()
    planted.write_text("def f(translator, d):\n    n = translator._unkept\n"
                       "    translator.decode_cfg = d\n    return self._cfg(n)\n")
    assert private_uses([planted], private) == ["mt/planted.py:2 ._unkept",
                                                "mt/planted.py:3 .decode_cfg"]


def test_one_string_instead_of_a_list_of_lines_is_a_type_error_naming_the_fix(tiny_run):
    translator = Translator(load_run(tiny_run))
    for call in (lambda: translator.translate("We have two dogs."),
                 lambda: translator.translate_nbest("We have two dogs."),
                 lambda: list(translator.translate_stream("We have two dogs.")),
                 lambda: translator.translate(["We have two dogs."], prefix="Wir")):
        with pytest.raises(TypeError, match=r"not one string.*translate\(\[text\]\)"):
            call()
    assert len(translator.translate(["We have two dogs."])) == 1
