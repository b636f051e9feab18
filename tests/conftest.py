"""Shared fixtures and helpers: the toy corpus, tiny models trained once per session for all
xdist workers (shared_run), `mt` run in this process (the cli fixture; mt_here outside a test:
the way to run it unless a test needs a process of its own) or in a subprocess (run_mt), and
the checks on what a failed command leaves behind (snapshot, leftovers), and Trainers small
enough to build in a test (toy300, exact_trainer) for the tests of mt/train/.

Tiers (markers registered in pyproject.toml): plain `python -m pytest` runs the fast tier;
`scripts/test.sh` runs everything. A test that uses a fixture in TRAINED (a model trained for
real) is marked slow here, so that a new test using one is slow without being told.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import shutil
import signal
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from mt.cli import main
from mt.textio import Undecoded

# One thread per process: tests start several processes, and oversubscribed OpenMP threads
# spin against each other on a small CI machine.
torch.set_num_threads(1)
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "data" / "toy"
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
CONFIG = ROOT / "configs" / "toy.yaml"
TWO_LINES = "Yesterday we saw forty two red dogs.\nI need seven hundred eleven books.\n"

# A model small enough to train in seconds on the toy corpus and still learn it.
TINY = [
    "model.d_model=64", "model.n_heads=4", "model.n_enc_layers=2", "model.n_dec_layers=2",
    "model.d_ff=128", "model.dropout=0.0", "train.max_tokens=2048", "train.lr=3e-3",
    "train.warmup=100", "train.eval_every=100", "train.log_every=20", "train.max_epochs=4",
]
# Fixtures that train a model (seconds to a minute each): every test using one is slow.
TRAINED = {"tiny_run", "spm_run", "unk_run", "reverse_run"}


def pytest_collection_modifyitems(items):
    for item in items:
        if TRAINED & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True, scope="session")
def _token_cache(tmp_path_factory):
    """Training data is cached (mt.token_cache) in a temporary directory, not the user's
    ~/.cache/mt; subprocesses inherit it."""
    os.environ["MT_CACHE_DIR"] = str(tmp_path_factory.mktemp("token-cache"))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_mt(*args: str, input: str | bytes | None = None, cwd: Path = ROOT, env: dict | None = None,
           timeout: float = 600) -> Result:
    """Run `python -m mt ARGS` as a user would, returning exit code, stdout and stderr."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **THREADS, **(env or {})}
    full_env.pop("MT_DEBUG", None)
    if isinstance(input, str):
        input = input.encode("utf-8")
    p = subprocess.run([sys.executable, "-m", "mt", *args], input=input, capture_output=True,
                       cwd=cwd, env=full_env, timeout=timeout)
    return Result(p.returncode, p.stdout.decode("utf-8", "replace"),
                  p.stderr.decode("utf-8", "replace"))


def assert_user_error(r: Result, code: int | None = None, *needles: str) -> None:
    """A one-line error on stderr, a non-zero exit, and no traceback."""
    assert r.code != 0, r
    if code is not None:
        assert r.code == code, r
    assert "Traceback" not in r.err, r.err
    errors = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, r.err
    for n in needles:
        assert n in errors[0], (n, errors[0])


def train_toy(out: Path, *sets: str) -> None:
    """`mt train` of the toy config with `sets` into out, in a subprocess."""
    args = ["train", str(CONFIG), "--out", str(out), "--device", "cpu"]
    for s in sets:
        args += ["--set", s]
    r = run_mt(*args)
    assert r.code == 0, r.err


# A tiny joint SentencePiece model (tests/test_pipeline_subword.py, tests/test_decoding_align.py).
SPM = [*TINY, "data.tokenizer=sentencepiece", "data.shared_vocab=true", "data.vocab_size=330",
       "train.max_steps=150", "train.eval_every=50"]
# Models trained once per test session, whatever the number of xdist workers (shared_run):
# fixture -> the --set values of its training (in the directory named without "_run").
SHARED_RUNS = {"tiny_run": TINY, "other_run": [*TINY, "train.seed=2", "train.max_epochs=2"],
               "spm_run": SPM,
               # vocabularies of 70 tokens a side: the model learns to write <unk>
               "unk_run": [*TINY, "data.max_size=70", "train.max_epochs=2"],
               # the toy corpus the other way, German to English: a second pair to serve (its
               # quality does not matter)
               "reverse_run": [*TINY, "data.src_lang=de", "data.tgt_lang=en",
                               "train.max_epochs=2"]}
NEEDED: set[str] = set()  # those the session's tests use (pytest_collection_finish)
TRIED: set[str] = set()  # those this process trained while it waited for another


def pytest_collection_finish(session):
    NEEDED.update(f for item in session.items for f in getattr(item, "fixturenames", ())
                  if f in SHARED_RUNS)


def shared_run(tmp_path_factory, fixture: str) -> Path:
    """SHARED_RUNS[fixture], trained once in a test session for all xdist workers: the first to
    ask trains it under a lock in the session's base directory (above the workers' own), and
    the others read it. One that asks while another trains it first trains one of the session's
    other shared runs that nobody has started, if there is one, rather than wait idle. For
    fixtures that only read the run; a training that failed is tried again by the next to ask."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's: each worker's is a popen-gwN inside it
    shared /= "shared-runs"
    shared.mkdir(exist_ok=True)
    while True:
        with open(shared / f"{fixture}.lock", "w") as lock:  # an flock: freed when closed
            if _try_lock(lock) or not _train_meanwhile(shared, fixture):
                fcntl.flock(lock, fcntl.LOCK_EX)
                return _trained(shared, fixture)


def _try_lock(lock) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _trained(shared: Path, fixture: str) -> Path:
    """The run, trained now if no one has yet (its lock held)."""
    out, done = shared / fixture.removesuffix("_run"), shared / f"{fixture}.done"
    if not done.exists():
        shutil.rmtree(out, ignore_errors=True)
        train_toy(out, *SHARED_RUNS[fixture])
        done.touch()
    return out


def _train_meanwhile(shared: Path, wanted: str) -> bool:
    """Train a shared run the session needs that nobody has trained or is training; False if
    there is none."""
    for fixture in sorted(NEEDED - TRIED - {wanted}):
        if (shared / f"{fixture}.done").exists():
            continue
        with open(shared / f"{fixture}.lock", "w") as lock:
            if _try_lock(lock):
                TRIED.add(fixture)
                with contextlib.suppress(Exception):  # its own tests train it again, and fail
                    _trained(shared, fixture)
                return True
    return False


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """A tiny model trained for real on the toy corpus (shared by all tests that only read it)."""
    return shared_run(tmp_path_factory, "tiny_run")


@pytest.fixture(scope="session")
def reverse_run(tmp_path_factory) -> Path:
    """The tiny model trained the other way, German to English (mt serve's second pair)."""
    return shared_run(tmp_path_factory, "reverse_run")


@pytest.fixture(scope="session")
def spm_run(tmp_path_factory) -> Path:
    """The toy corpus trained for real with SPM (SentencePiece)."""
    return shared_run(tmp_path_factory, "spm_run")


def make_weights_only(run_dir: Path) -> None:
    """Rewrite a run's best.pt as checkpoints were before they carried config, vocabularies and
    tokenizer files: weights and step only, so mt reads those from the run directory."""
    from mt.checkpoint import load_checkpoint, save_checkpoint

    state = load_checkpoint(run_dir / "best.pt")
    save_checkpoint(run_dir / "best.pt", {"model": state["model"], "step": state["step"]})



@pytest.fixture
def cli(capsys, monkeypatch):
    """Run `mt ARGS` in this process: exit code, stdout and stderr, as a user would see them."""
    monkeypatch.chdir(ROOT)  # as run_mt: configs name data/toy relative to the repository

    def run(*args: str, stdin: bytes | None = None) -> Result:
        monkeypatch.setattr(sys, "argv", ["mt", *map(str, args)])
        monkeypatch.setenv("MT_DEBUG", "")
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = 0
        try:
            with own_signals():
                main()
        except SystemExit as e:
            code = e.code
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run


def mt_here(*args: str, stdin: bytes | None = None, cwd: Path = ROOT) -> Result:
    """`mt ARGS` in this process, as the cli fixture runs it, for what cannot take that fixture
    (a module or session fixture): main() with its own stdin, stdout and stderr, in cwd."""
    streams = [io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8"),
               *(io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="") for _ in "12")]
    code = 0
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        mp.setattr(sys, "argv", ["mt", *map(str, args)])
        mp.setenv("MT_DEBUG", "")
        for name, stream in zip(("stdin", "stdout", "stderr"), streams):
            mp.setattr(sys, name, stream)
        try:
            with own_signals():
                main()
        except SystemExit as e:
            code = e.code
        finally:
            for stream in streams[1:]:
                stream.flush()
    out, err = (s.buffer.getvalue().decode("utf-8", "replace") for s in streams[1:])
    return Result(code, out, err)


@contextlib.contextmanager
def own_signals():
    """main() installs SIGINT/SIGTERM handlers; give pytest its own back."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and modification time, to show that nothing was touched."""
    return {str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def corpus(root: Path, n: int = 60, edit=None) -> Path:
    """A small copy of the toy corpus; edit(src_lines, tgt_lines) may change the training pair."""
    d = root / "corpus"
    d.mkdir()
    for split, count in (("train", n), ("val", 20)):
        src = (TOY / f"toy.{split}.en").read_bytes().split(b"\n")[:count]
        tgt = (TOY / f"toy.{split}.de").read_bytes().split(b"\n")[:count]
        if split == "train" and edit:
            edit(src, tgt)
        (d / f"toy.{split}.en").write_bytes(b"".join(line + b"\n" for line in src))
        (d / f"toy.{split}.de").write_bytes(b"".join(line + b"\n" for line in tgt))
    return d


def write_as(fmt: str, path: Path, pairs: list[tuple[str, str]], langs=("en", "de")) -> dict:
    """pairs written as a corpus of format fmt at path (plain: path.en and path.de); returns
    its data.train entry. jsonl writes Hugging Face's {"translation": {...}} records, parquet a
    column per language, xliff an XLIFF 1.2 trans-unit per pair, tmx a TMX unit per pair."""
    import gzip
    import json

    if fmt == "plain":
        for k, lang in enumerate(langs):
            Path(f"{path}.{lang}").write_text("".join(p[k] + "\n" for p in pairs), "utf-8")
        return {"src": f"{path}.{langs[0]}", "tgt": f"{path}.{langs[1]}"}
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.table({lang: [p[k] for p in pairs] for k, lang in enumerate(langs)}),
                       path)
    else:
        lines = ["\t".join(p) if fmt == "tsv" else
                 json.dumps({"translation": dict(zip(langs, p))}, ensure_ascii=False)
                 for p in pairs]
        text = ("".join(line + "\n" for line in lines) if fmt in ("tsv", "jsonl") else
                localization_file(fmt, pairs, langs)).encode("utf-8")
        Path(path).write_bytes(gzip.compress(text) if str(path).endswith(".gz") else text)
    return {"format": fmt, "path": str(path)}


def localization_file(fmt: str, pairs: list[tuple[str, str]], langs=("en", "de")) -> str:
    """pairs as an XLIFF 1.2 file (fmt "xliff") or a TMX (fmt "tmx")."""
    from xml.sax.saxutils import escape

    src, tgt = (escape(s) for s in langs)
    if fmt == "xliff":
        units = "".join(f'<trans-unit id="{i}"><source>{escape(a)}</source>'
                        f"<target>{escape(b)}</target></trans-unit>\n"
                        for i, (a, b) in enumerate(pairs, 1))
        return ('<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">\n'
                f'<file original="x" source-language="{src}" target-language="{tgt}" '
                f'datatype="plaintext"><body>\n{units}</body></file></xliff>\n')
    units = "".join(f'<tu><tuv xml:lang="{src}"><seg>{escape(a)}</seg></tuv>'
                    f'<tuv xml:lang="{tgt}"><seg>{escape(b)}</seg></tuv></tu>\n'
                    for a, b in pairs)
    return f'<tmx version="1.4"><header srclang="{src}"/><body>\n{units}</body></tmx>\n'


def small_config(data_dir: Path, *sets: str) -> list[str]:
    """--set options: the tiny model on a small corpus, validating by loss only (no BLEU)."""
    options = [*TINY, f"data.dir={data_dir}", "train.eval_bleu=false", "train.metric=loss", *sets]
    return [arg for s in options for arg in ("--set", s)]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """A token cache of the test's own (MT_CACHE_DIR), to look into."""
    path = tmp_path / "cache"
    monkeypatch.setenv("MT_CACHE_DIR", str(path))
    return path


@pytest.fixture
def opus_host(monkeypatch, tmp_path):
    """start(moses=BYTES, tmx=BYTES, **how) -> public_corpora.OpusServer: OPUS's API and a
    corpus's files on loopback, MT_OPUS_API pointing at it, the cache (MT_CACHE_DIR) in
    tmp_path."""
    from public_corpora import OpusServer

    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "cache"))
    servers = []

    def start(**how) -> OpusServer:
        servers.append(OpusServer(**how))
        monkeypatch.setenv("MT_OPUS_API", servers[-1].url + "/opusapi")
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def sacrebleu_host(monkeypatch, tmp_path):
    """start(files, md5s, **how) -> loopback.FileServer serving files (URL path -> bytes), with
    sacreBLEU's entries of the test sets in md5s (name -> MD5) and FLORES-200 pointing at it
    (public_corpora.host_test_sets), sacreBLEU's cache in tmp_path."""
    import sacrebleu.dataset.base

    from loopback import FileServer
    from public_corpora import host_test_sets

    monkeypatch.setattr(sacrebleu.dataset.base, "SACREBLEU_DIR", str(tmp_path / "sacrebleu"))
    servers = []

    def start(files: dict, md5s: dict, **how) -> FileServer:
        servers.append(FileServer(files, **how))
        host_test_sets(monkeypatch, servers[-1], md5s)
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def run_copy(tiny_run, tmp_path) -> Path:
    return Path(shutil.copytree(tiny_run, tmp_path / "run"))


@pytest.fixture(scope="session")
def other_run(tiny_run, tmp_path_factory) -> Path:
    """A second toy model, for ensembles: another seed, half the epochs (so a worse one)."""
    return shared_run(tmp_path_factory, "other_run")


@pytest.fixture(scope="session")
def ct2_export(tiny_run, tmp_path_factory) -> Path:
    """The tiny model exported to CTranslate2 (mt export), shared by the tests that only read
    it; skipped without the ctranslate2 extra."""
    pytest.importorskip("ctranslate2")
    from mt.commands.export import export

    out = tmp_path_factory.mktemp("ct2") / "model"
    export(tiny_run, out)
    return out



def png_size(path) -> tuple[int, int]:
    """(width, height) from a PNG's header, after checking it is one."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    assert data[-8:-4] == b"IEND"  # complete, not cut short
    return struct.unpack(">II", data[16:24])


# A corpus with one defect per planted line (mt.filters, mt.audit): {finding: line numbers}.
PLANTED_PAIRS = [
    ("A small dog runs .", "Ein kleiner Hund läuft ."),                # 1
    ("Two men sit on a bench .", "Zwei Männer sitzen auf einer Bank ."),  # 2
    ("A  small dog runs . ", "Ein kleiner Hund\tläuft ."),             # 3 repeats 1 (whitespace)
    ("Adrian Coles , BSA", "Adrian  Coles , BSA"),                     # 4 copy
    ("Ein Hund", "a dog that runs across a field of very tall green grass at noon"),  # 5 ratio
    ("Hallo", "hello there friend"),                                   # 6 clean: under the floor
    (Undecoded("Ein b\ufffdser Hund ."), "An angry dog ."),            # 7 invalid UTF-8
    ("Mal sehen .", "Let's see\x85"),                                  # 8 control character
    ("Nur Quelle .", ""),                                              # 9 empty side
    (" ".join(["wort"] * 101), " ".join(["word"] * 101)),              # 10 over 100 words
    ("Two men sit on a bench .", "Zwei Männer sitzen auf einer Bank ."),  # 11 repeats 2
    ("Ein Mann liest .", "A man is reading ."),                        # 12 source in val
    ("Eine Frau singt .", "A woman sings ."),                          # 13 pair in test
    ("", ""),                                                          # 14 empty (no duplicate)
    ("", ""),                                                          # 15 empty (no duplicate)
    ("Kinder spielen .", "Children play ."),                           # 16 clean
    ("Das Zeichen \ufffd .", "The sign \ufffd ."),                      # 17 clean: valid U+FFFD
]
PLANTED = {"empty": [9, 14, 15], "too_long": [10], "ratio": [5], "duplicate": [3, 11],
           "copy": [4], "invalid_utf8": [7], "control": [8]}
PLANTED_VAL = [("Ein Mann liest .", "A man reads a book ."), ("Hunde bellen .", "Dogs bark .")]
PLANTED_TEST = [("Eine  Frau singt .", "A woman sings ."), ("Ein Mann liest .", "One man reads .")]


def write_pairs(directory: Path, split: str, pairs, src: str = "de", tgt: str = "en"
                ) -> tuple[Path, Path]:
    """{split}.{src} and {split}.{tgt} in directory; the U+FFFD of an Undecoded side is written
    as the invalid byte \\xff (what reading it back makes Undecoded), any other as UTF-8."""
    paths = directory / f"{split}.{src}", directory / f"{split}.{tgt}"
    for path, side in zip(paths, zip(*pairs)):
        path.write_bytes(b"".join((s.encode().replace("\ufffd".encode(), b"\xff")
                                   if isinstance(s, Undecoded) else s.encode()) + b"\n"
                                  for s in side))
    return paths


def straight_and_resumed(tmp_path: Path, sets: list[str], steps: int, split: int
                         ) -> tuple[dict, dict]:
    """last.pt of `steps` steps trained straight, and of `split` steps then --resume to
    `steps` (the toy config with sets): what an exact resume must make equal."""
    from mt.checkpoint import load_checkpoint
    from mt.commands.train import train

    for run, n, resume in (("straight", steps, False), ("split", split, False),
                           ("split", steps, True)):
        train(CONFIG, [*sets, f"train.max_steps={n}"], tmp_path / run, "cpu", resume)
    return tuple(load_checkpoint(tmp_path / run / "last.pt") for run in ("straight", "split"))


# Trainers built in this process (tests of mt/train/): small and fast; dropout off, so that
# ranks (which share the seed) and micro-batches draw the same (no) random masks; fp32, so that
# sums split differently agree to rounding.
SMALL_EXACT = [*TINY, "model.d_model=32", "model.d_ff=64", "train.max_tokens=400",
               "train.amp=none", "train.eval_bleu=false", "train.metric=loss",
               "train.eval_every=1000", "train.log_every=1", "train.warmup=10"]


@pytest.fixture(scope="module")
def toy300(tmp_path_factory) -> Path:
    """300 training pairs of the toy corpus (about 25 batches of 400 tokens)."""
    d = tmp_path_factory.mktemp("corpus")
    for split, count in (("train", 300), ("val", 30)):
        for lang in ("en", "de"):
            lines = (TOY / f"toy.{split}.{lang}").read_text().splitlines()[:count]
            (d / f"toy.{split}.{lang}").write_text("\n".join(lines) + "\n")
    return d


def exact_sets(data: Path, *more: str) -> list[str]:
    """The config's --set values: SMALL_EXACT on the corpus in `data` (toy300), then `more`."""
    return [*SMALL_EXACT, f"data.dir={data}", *more]


def exact_trainer(data: Path, run: Path, *more: str):
    """A Trainer of exact_sets(data, *more) in `run`, its data loaded and model built."""
    from mt.config import load_config
    from mt.train.loop import Trainer

    t = Trainer(load_config(CONFIG, exact_sets(data, *more)), run, "cpu")
    t.prepare_run_dir()
    t.load_data()
    t.build()
    return t


def saved_run(run: Path) -> Path:
    """A run directory as far as a resume reads it before the data: config and vocabularies
    (last.pt is not opened before then)."""
    from mt.config import load_config

    run.mkdir()
    load_config(CONFIG, TINY).save(run / "config.yaml")
    for name in ("vocab.src.txt", "vocab.tgt.txt"):
        (run / name).write_text("<pad>\n<unk>\n<bos>\n<eos>\n")
    (run / "last.pt").write_bytes(b"not read before the data")
    return run


def register(monkeypatch, registry: dict, name: str, attr: str, value) -> None:
    """Register value as `attr` of a new module under `name` in one of mt's registries (a name
    -> module path dict: tokenizer KINDS, corpus FORMATS), for this test only: what a new
    module and its one registry line do."""
    import types

    module = types.ModuleType(f"{name}_registered_module")
    setattr(module, attr, value)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(registry, name, module.__name__)
