"""benchmarks/: the shared harness, and every benchmark run in its --smoke mode (seconds on the toy
corpus), so that a change to mt cannot break one unseen. What they measure is not checked."""

import importlib.util
import os
import re
import sys

import pytest
import torch

from benchmarks.harness import alternate, markdown
from conftest import ROOT, THREADS, own_signals

# benchmark -> a line its smoke run must print
SMOKE = {
    "bench_attention": "| dtype | call | shape (B, T, L) |",
    "bench_cache_load": "|  | page cache, ms | cold, ms |",
    "bench_checkpoint": "ratio load_run with / without:",
    "bench_data": "| 1x | 6,000 | - |",
    "bench_formats": "| format | MiB | read, s | cache, s | cache CPU, s |",
    "bench_hf": "| 1 | greedy |",
    "bench_hugepages": "| amp | tok/s, off | tok/s, on |",
    "bench_memory": "| pairs | build, s | pairs/s | file, MiB | lookup p50, ms |",
    "bench_software": "| TM suggestion | < 0.7 | 1 |",
    "bench_tokenize": "| de | toy.test | 300 |",
    "bench_train": "| mt fp32 / naive, tok/s |",
}


@pytest.fixture
def run_benchmark(capfd, monkeypatch):
    """run(NAME, *ARGS): `python -m benchmarks.NAME --smoke ARGS` run in this process (which has
    torch and mt imported: a benchmark's own start-up, seconds of CPU, not paid again), its
    output and its children's as the stdout it returns. What a benchmark sets for itself is
    put back after it: torch's threads, the environment, signal handlers, the compiled step."""
    from mt.decoding import compiled

    def run(name: str, *args: str) -> str:
        module = importlib.import_module(f"benchmarks.{name}")
        monkeypatch.chdir(ROOT)
        monkeypatch.setattr(sys, "argv", [f"{name}.py", "--smoke", *args])
        monkeypatch.setattr(compiled, "_step", None)
        for variable, value in THREADS.items():  # its child processes', as the suite's
            monkeypatch.setenv(variable, value)
        environ, threads = dict(os.environ), torch.get_num_threads()
        capfd.readouterr()
        try:
            with own_signals():
                code = module.main()
        except SystemExit as stop:  # sys.exit(main()), or a benchmark's one-line refusal
            code = stop.code
        finally:
            os.environ.clear()
            os.environ.update(environ)
            torch.set_num_threads(threads)
            if "torch._dynamo" in sys.modules:
                torch._dynamo.reset()
        out = capfd.readouterr()
        assert not code, f"{code}\n{out.err[-3000:]}"
        return out.out
    return run


def test_alternate_takes_turns_and_keeps_each_best():
    calls = []

    def contender(name, measures):
        return lambda r: calls.append((r, name)) or measures[r]

    best = alternate({"a": contender("a", [3.0, 1.0, 2.0]), "b": contender("b", [5, 6, 4])}, 3)
    assert calls == [(0, "a"), (0, "b"), (1, "a"), (1, "b"), (2, "a"), (2, "b")]
    assert best == {"a": 1.0, "b": 4}
    assert alternate({"a": contender("a", [3.0, 1.0])}, 2, keep=max) == {"a": 3.0}


def test_alternate_can_rotate_the_order_each_round():
    calls = []
    best = alternate({n: (lambda r, n=n: calls.append((r, n)) or r) for n in "abc"}, 4,
                     rotate=True)
    assert calls == [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a"),
                     (2, "c"), (2, "a"), (2, "b"), (3, "a"), (3, "b"), (3, "c")]
    assert best == {"a": 0, "b": 0, "c": 0}


def test_markdown_table():
    table = markdown(["a", "b"], [[1, ""], ["x", 2.5]])
    assert table == "| a | b |\n|---|---|\n| 1 |  |\n| x | 2.5 |"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMOKE))
def test_benchmark_runs_in_smoke_mode(run_benchmark, name):
    assert SMOKE[name] in run_benchmark(name)


@pytest.mark.slow
def test_bench_buckets_runs_in_smoke_mode_against_mt_as_of_a_commit(run_benchmark):
    out = run_benchmark("bench_buckets", "--rev", "HEAD")
    assert "none: buckets / exact lengths: tok/s" in out
    assert "none: buckets here / mt at HEAD: tok/s" in out


def test_bench_decode_runs_in_smoke_mode(run_benchmark, tiny_run):
    ct2 = ["--ct2", "float32"] if importlib.util.find_spec("ctranslate2") else []
    out = run_benchmark("bench_decode", str(tiny_run), "--bf16", "--shortlist", "--profile", *ct2)
    assert "greedy / naive speed" in out and "mt greedy, 1 thread(s)" in out
    assert "shortlist / full greedy   speed" in out and "mt beam 2 shortlist" in out
    assert "top-p 0.9 / greedy time" in out and "ensemble 2 / one model time" in out
    assert "with itself (no --second" in out



def test_bench_fast_runs_in_smoke_mode(run_benchmark, tiny_run):
    out = run_benchmark("bench_fast", str(tiny_run))
    assert "| search | lever | sentences/s | / eager | BLEU |" in out
    assert "| beam 2 | compiled |" in out and "graph(s) compiled" in out
    out = run_benchmark("bench_fast", str(tiny_run), "--levers", "eager,confidence,align,glossary")
    assert "| greedy | align |" in out and "| beam 2 | glossary |" in out
    assert "| greedy | glossary |" not in out  # a glossary's terms are kept by beam search


@pytest.mark.slow  # mt translate and mt serve processes, per mode
def test_bench_latency_runs_in_smoke_mode(run_benchmark, tiny_run):
    out = run_benchmark("bench_latency", str(tiny_run), "--modes", "float32,auto")
    assert re.search(r"\| auto \| \d+\.\d \| \d+\.\d \| \d+\.\d \| \d+\.\d \| \d+\.\d \|", out)


def test_bench_confidence_runs_in_smoke_mode(run_benchmark, tiny_run):
    out = run_benchmark("bench_confidence", str(tiny_run))
    assert "| signal | Pearson | Spearman |" in out and "| kept X% | 100 | 90 |" in out
    assert "confidence off -> on:" in out and "  CPU time: " in out
    assert "plain + teacher-forced pass: " in out  # the search alone, too


def test_bench_terminology_runs_in_smoke_mode(run_benchmark, tiny_run, tmp_path):
    out = run_benchmark("bench_terminology", str(tiny_run), "--glossaries", str(tmp_path))
    assert "| hard constraints | 100.00% |" in out and "Dice >= " in out
    assert "hard constraints / no glossary time" in out and out.count("- src: ") == 5


def test_the_training_lexicon_keeps_aligned_words_with_their_alternatives():
    from benchmarks.bench_terminology import lexicon

    src = ["Ein Mann läuft."] * 90 + ["Der Mann, der läuft."] * 10
    ref = ["A man runs."] * 90 + ["The guy who runs."] * 10
    aligned = (["x\t0-0 1-1 2-2"] * 90 + ["x\t0-0 1-1 3-3 9-3"] * 6  # 9: out of range
               + ["x\t0-0 1-1 3-2"] * 4)
    # "Mann," and "runs." lose their punctuation; Mann -> guy is 10% of Mann's links and all
    # of guy's; läuft -> who, 4 links, is under MIN_PAIRS
    entries = lexicon(src, ref, aligned).entries
    assert entries == (("Der", "The"), ("Ein", "A"), ("Mann", "man"), ("Mann", "guy"),
                       ("läuft", "runs"))


def test_bench_workers_runs_in_smoke_mode(run_benchmark, tiny_run):
    out = run_benchmark("bench_workers", str(tiny_run))
    assert "--workers 2 / --workers 1 speed:" in out and "outputs byte-identical: yes" in out


def test_bench_documents_runs_in_smoke_mode(run_benchmark, tiny_run, tmp_path):
    out = run_benchmark("bench_documents", str(tiny_run), "--examples",
                        str(tmp_path / "examples.txt"))
    assert "| paragraphs, split (mt.document) |" in out and "| toy | 30 | 30 (100.0%) |" in out
    assert "| toy | alignment | " in out and "| HTML snippets (Document, one batch) |" in out
    # the first 50 (EXAMPLES) snippets, here all of the 30 that smoke mode makes
    assert (tmp_path / "examples.txt").read_text().count("\nsource: ") == 30


def test_bench_serve_runs_in_smoke_mode(run_benchmark, tiny_run):
    out = run_benchmark("bench_serve", str(tiny_run))
    assert "| 4 clients at once |" in out and "| one client, one request at a time |" in out
    assert "| 4 clients at once, DeepL POST /v2/translate |" in out
    assert re.search(r"lines/s under load, LibreTranslate / mt's own: \d+\.\d\dx", out)
    # 4 server contenders: mt's own, LibreTranslate's and DeepL's under load, one client
    assert "responses correct: all of 48 " in out and "lost 0; server exit code 0" in out


def test_bench_contention_runs_in_smoke_mode(run_benchmark, tiny_run):
    # one setting, translation only (--steps 0): 2 processes, idle and beside a neighbour; a
    # training is the same harness with another command (and 2 processes more)
    out = run_benchmark("bench_contention", str(tiny_run), "--env", "GOMP_SPINCOUNT=300000",
                        "--threads", "0", "--steps", "0")
    assert "| mt's default, `GOMP_SPINCOUNT=300000` | translate |" in out
    assert "| train |" not in out


def test_bench_int8_runs_in_smoke_mode(run_benchmark, tiny_run):
    out = run_benchmark("bench_int8", str(tiny_run), "--students", str(tiny_run),
                        "--threads", "2", "--streams", "--processes", "--shortlist",
                        "--batch-tokens", "64,4096")
    assert "greedy @64: int8 - float32 BLEU" in out and "| 2 | mt int8 beam 2 @4096 |" in out
    assert "| 2 | mt bf16 listed greedy @64 |" in out  # over the run's shortlist, each size
    assert "| 2 | mt int8 beam 2 @64 x2 processes |" in out  # and in two processes
    assert "fastest of 1 rounds; " in out  # and the CPU's name
    assert "teacher beam 2 float32: speed" in out and "| tiny | 2 | 2 | 64 |" in out


def test_bench_int8_processes_get_parts_of_about_equal_characters():
    from benchmarks.bench_int8 import balanced

    lines = ["a" * n for n in (30, 1, 1, 1, 10, 10, 10, 1, 2, 40, 3)]
    for parts in (2, 3, 4):
        bounds = balanced(lines, parts)
        assert bounds[0] == 0 and bounds[-1] == len(lines) and len(bounds) == parts + 1
        assert all(a < z for a, z in zip(bounds, bounds[1:]))  # none empty
        sizes = [sum(len(line) + 1 for line in lines[a:z]) for a, z in zip(bounds, bounds[1:])]
        assert max(sizes) - min(sizes) <= 2 * 41, (parts, sizes)  # within two longest lines
    # the cut nearest half the characters: 4 / 13, not the first past it (15 / 2)
    assert balanced(["a", "b", "c" * 10, "d"], 2) == [0, 2, 4]
    assert balanced(["x"], 4) == [0, 1]  # fewer lines than parts: one each


def test_bench_software_suggests_the_closest_training_msgid():
    from benchmarks.bench_software import memory, suggestions

    tm = memory(["Open file", "Open file", "Open file", "Close window", "Quit"],
                ["Datei öffnen", "Öffne Datei", "Datei öffnen", "Fenster schließen", "Beenden"])
    assert tm["Open file"] == "Datei öffnen"  # the most frequent of its translations
    found = suggestions(tm, ["Open file", "Open files", "Close windows now", "Qui"])
    assert found[0] == ("Datei öffnen", 1.0)
    assert found[1] == ("Datei öffnen", pytest.approx(1 - 1 / 10))  # one insertion in 10
    assert found[2] == ("Fenster schließen", pytest.approx(1 - 5 / 17))
    assert found[3] == ("Beenden", pytest.approx(1 - 1 / 4))


def test_bench_software_tests_each_band_against_mt():
    """A system that gets one band right and the other wrong: better there at a small p, worse
    here; a copy of mt is said to be one (sacreBLEU's test would give it the smallest p)."""
    from benchmarks.bench_software import against_mt

    ref = [f"Die Datei {i} wurde nicht gefunden" for i in range(60)]
    mt = [f"Datei {i} nicht gefunden" for i in range(60)]
    fixed = ref[:30] + ["Fehler"] * 30
    rows = against_mt({"mt": mt, "fixed": fixed, "copy": list(mt)},
                      [("close", list(range(30))), ("far", list(range(30, 60)))], ref, "de", 200)
    cells = {(r[0], r[1]): r for r in rows}
    assert float(cells["fixed", "close"][3].split()[0]) > 30
    assert float(cells["fixed", "close"][3].split("p ")[1].rstrip(")")) < 0.05
    assert float(cells["fixed", "far"][3].split()[0]) < 0
    assert cells["copy", "close"][3] == "+0.00 (same outputs)"
    assert cells["fixed", "close"][2] == "30"


@pytest.mark.slow  # two benchmark processes
def test_bench_software_checks_po_files_mt_wrote(run_benchmark, tmp_path):
    """--po: msgfmt's verdict per file, and the entries mt translated that lost a directive."""
    demo = (ROOT / "tests/data/po/demo.de.po").read_text(encoding="utf-8")
    (tmp_path / "good.po").write_text(demo, encoding="utf-8")
    assert "| 1 | 1 (100%) | 5 | 5 (100.00%) |" in run_benchmark("bench_software", "--po",
                                                                 str(tmp_path))
    broken = demo.replace('OPEN %s"', 'OPEN"')  # a directive dropped from a translation mt wrote
    assert broken != demo
    (tmp_path / "bad.po").write_text(broken, encoding="utf-8")
    out = run_benchmark("bench_software", "--po", str(tmp_path))
    assert "| 2 | 1 (50%) | 10 | 9 (90.00%) |" in out and "bad.po: " in out


def test_bench_software_times_a_po_file_against_its_msgids(run_benchmark, tiny_run):
    out = run_benchmark("bench_software", "--speed", str(tiny_run), "--pot",
                        str(ROOT / "tests/data/po/demo.pot"), "--threads", "1", "--beam", "1")
    assert "| PO document |" in out and "| its msgids as plain lines |" in out
    assert re.search(r"PO document / plain lines time: \d+\.\d\dx", out)
