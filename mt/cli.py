"""The `mt` command line: parse, dispatch, and turn user errors into one line and an exit code."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import signal
import sys
import traceback
import typing
from pathlib import Path

import typer

from mt.errors import (
    ConfigError,
    FileSystemError,
    MTError,
    OutputClosed,
    UsageError,
    os_error_message,
)
from mt.threads import KERNEL_CACHES

# Bounds of the options that are not config keys (docs/configuration.md#bounds): beyond, exit 2.
MAX_THREADS, MAX_WORKERS = 1024, 256
MAX_RESAMPLES = 10_000  # mt eval --bootstrap: sacreBLEU holds an index per sentence per resample

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train Transformer translation models, translate files, score with BLEU.")
data_app = typer.Typer(no_args_is_help=True, help="Fetch public corpora and test sets; audit a "
                       "corpus.")
app.add_typer(data_app, name="data")
import_app = typer.Typer(no_args_is_help=True, help="Bring in models trained elsewhere.")
memory_app = typer.Typer(no_args_is_help=True, help="Translation memories: pairs added from "
                         "TMX, PO, XLIFF and corpus files, searched by fuzzy match, exported.")
app.add_typer(memory_app, name="memory")
app.add_typer(import_app, name="import")

# Options several commands take, each declared once (the help where it differs is the
# command's own part).
DEVICE = typer.Option("auto", "--device", help="auto (CUDA if present), cpu or cuda.")
JSON = typer.Option(False, "--json", help="Print one JSON object.")


def set_option(help: str = "Override a value of the run's config: --set decode.beam=4 (any "
               "key, as for mt train; the options below are shortcuts for decode.KEY)."):
    return typer.Option([], "--set", help=help)


def threads_option(help: str):
    return typer.Option(0, "--threads", min=0, max=MAX_THREADS, help=help)


def workers_option(default: int, help: str):
    """--workers, at least default (0: a command's own choice; else 1, this process alone)."""
    return typer.Option(default, "--workers", min=default, max=MAX_WORKERS, help=help)


def _version(asked: bool) -> None:
    if asked:
        from mt import __version__

        print(f"mt {__version__}")
        raise typer.Exit()


@app.callback()
def _global(debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors "
                                        "(or set MT_DEBUG=1)."),
            version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                         help="Print mt's version and exit.")) -> None:
    if debug:
        os.environ["MT_DEBUG"] = "1"


def _device(name: str) -> str:
    from mt.device import pick_device

    return str(pick_device(name))


@app.command()
def train(
    config: Path = typer.Argument(None, help="YAML config (see configs/); optional with --resume."),
    set_: list[str] = set_option("Override a config value: --set train.lr=3e-4"),
    out: Path = typer.Option(None, "--out", help="Run directory (default: runs/CONFIG_NAME)."),
    device: str = DEVICE,
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out from last.pt."),
    init_from: Path = typer.Option(None, "--init-from", help="Fine-tune: start from this run's "
                                   "(or checkpoint's) weights, vocabularies and tokenizer; "
                                   "optimizer, schedule, step and best score start afresh."),
) -> None:
    """Train a model; writes config, vocab, checkpoints and metrics.jsonl to the run directory."""
    from mt.commands.train import train as run_training

    result = run_training(config, set_, out, device, resume, init_from)
    if int(os.environ.get("RANK", 0)) == 0:  # under torchrun, one summary
        print(json.dumps(result))


@app.command()
def prepare(
    config: Path = typer.Argument(..., help="YAML config whose training split to prepare."),
    set_: list[str] = set_option("Override a config value: --set data.min_freq=2"),
    workers: int = workers_option(0, "Tokenizer processes (default: one per available core)."),
) -> None:
    """Tokenize the training corpora into the token cache now (docs/data.md);
    `mt train` on the same data then starts at once. Prints each corpus's cache entry."""
    from mt.commands.prepare import prepare as build

    for entry in build(config, set_, workers).entries:
        print(entry.path)


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


class Decoding(typer.core.TyperCommand):
    """A command that opens runs to translate. After its --set, it takes a flag --KEY for each
    DecodeConfig field whose metadata names the command (as --set decode.KEY, typed as the
    field; docs/decoding.md#options). The command reads those given as one dict,
    `decoding(ctx)`; a value's ConfigError names its flag."""

    def __init__(self, name: str, *, params: list, **kwargs):
        at = [p.name for p in params].index("set_") + 1
        super().__init__(name, params=params[:at] + _decoding_flags(name) + params[at:],
                         **kwargs)

    def invoke(self, ctx):
        from mt.config import DecodeConfig

        given = {f.name: ctx.params.pop(f.name) for f in dataclasses.fields(DecodeConfig)
                 if f.name in ctx.params}
        ctx.meta["decode"] = {key: value for key, value in given.items() if value is not None}
        with _flags_named(ctx.meta["decode"]):
            return super().invoke(ctx)


def decoding(ctx: typer.Context) -> dict[str, object]:
    """The decoding options given to a Decoding command, {"beam": 5}."""
    return ctx.meta["decode"]


def _decoding_flags(command: str) -> list:
    """The flags of the DecodeConfig fields that name command, made as Typer makes an option
    from a parameter `KEY: TYPE | None = typer.Option(None, "--KEY", help=...)`."""
    from typer.models import ParamMeta

    from mt.config import DecodeConfig, option_help

    types = typing.get_type_hints(DecodeConfig)
    make = getattr(typer.main, "_get_param", None) or (  # its name before Typer 0.2x
        lambda meta: typer.main.get_click_param(meta)[0])
    flags = []
    for f in dataclasses.fields(DecodeConfig):
        if command in f.metadata["commands"]:
            # a Literal's values are checked by mt.config, as any --set item's (exit 3)
            kind = str if typing.get_origin(types[f.name]) is typing.Literal else types[f.name]
            # a bool is a flag, and its --no- form turns off what the run's config turns on
            names = f"{_flag(f.name)}/--no-{_flag(f.name)[2:]}" if kind is bool else _flag(f.name)
            flags.append(make(ParamMeta(name=f.name, annotation=kind | None, default=typer.Option(
                None, names, help=option_help(f, command)))))
    return flags


@contextlib.contextmanager
def _flags_named(decode: dict[str, object]):
    """An OptionError about an option given as a flag names the flag: `--beam 0: ...`."""
    from mt.config import OptionError

    try:
        yield
    except OptionError as e:
        if e.key not in decode:
            raise
        raise ConfigError(f"{_flag(e.key)} {decode[e.key]}: {e.problem}") from None


def _one_of(allowed: str):
    """A Typer callback refusing values outside a tuple, as a usage error (exit 2) naming them.

    allowed is "module:NAME", the tuple's home (the command or library that uses the values),
    imported only when a value is checked: those modules load torch, `mt --help` should not.
    NAME may be a function giving the tuple (a registry that grows).
    """
    def check(value):
        module, name = allowed.split(":")
        choices = getattr(importlib.import_module(module), name)
        choices = choices() if callable(choices) else choices
        listed = " or ".join(choices) if len(choices) < 3 else "one of " + ", ".join(choices)
        for v in value if isinstance(value, list) else [value]:
            if v is not None and v not in choices:
                raise typer.BadParameter(f"{v!r}: expected {listed}")
        return value

    return check


RUNS_HELP = ("Run directory (uses best.pt) or checkpoint file; several: an ensemble, averaging "
             "the models' log-probabilities (docs/decoding.md).")
ENGINE = typer.Option("mt", "--engine", callback=_one_of("mt.decoding.engines:ENGINES"),
                      help="mt, or ctranslate2: RUN may then be an `mt export` directory (a run "
                      "is exported on the fly); see docs/ctranslate2.md.")


GLOSSARY_HELP = ("A glossary, source term<TAB>target term a line: each output holds the "
                 "target term of every source term in its line (beam search; "
                 "docs/terminology.md).")


@app.command(cls=Decoding)
def distill(
    ctx: typer.Context,
    config: Path = typer.Argument(..., help="The student's YAML config: its data.train corpora "
                                  "are translated by the teachers and replaced by the "
                                  "translations.", metavar="STUDENT.yaml"),
    teachers: list[Path] = typer.Argument(..., help="Teacher run(s) or checkpoint(s); several: "
                                          "an ensemble.", metavar="TEACHER..."),
    out: Path = typer.Option(..., "--out", help="The student's run directory; the distilled "
                             "corpora go in OUT/distilled. Run again to resume."),
    set_: list[str] = set_option("Override a value of the student's config: --set "
                                 "train.max_minutes=60"),
    original: float = typer.Option(0.0, "--original", min=0.0, max=100.0,
                                   help="Also train on the original corpora, at this weight "
                                   "times theirs (0: the distilled corpora only)."),
    device: str = DEVICE,
    workers: int = workers_option(1, "Processes translating chunks of the corpora (as mt "
                                  "translate --workers)."),
    threads: int = threads_option("torch threads of each translating process (as mt "
                                  "translate --threads)."),
) -> None:
    """Distil teachers into a student: translate the student's training sources with the
    teachers (beam search), audit the translations, train the student on them
    (docs/distill.md). Prints the training summary as mt train does."""
    from mt.commands.distill import distill as run_distill
    from mt.commands.options import TranslateOptions

    options = TranslateOptions(device=_device(device), decode=decoding(ctx), threads=threads,
                               workers=workers)
    print(json.dumps(run_distill(config, teachers, out, options, set_, original)))


@app.command("eval", cls=Decoding)
def evaluate(
    ctx: typer.Context,
    runs: list[Path] = typer.Argument(..., help=RUNS_HELP, metavar="RUN..."),
    split: str = typer.Option("test", "--split", callback=_one_of("mt.commands.evaluate:SPLITS"),
                              help="val or test split of the run's data."),
    src: str = typer.Option(None, "--src", help="Source file to translate instead of a split."),
    ref: str = typer.Option(None, "--ref", help="Reference translations for --src."),
    pairs: str = typer.Option(None, "--pairs", help="One file of sources and references "
                              "instead of a split: .tsv, .jsonl or .parquet (its name says its "
                              "format; .gz allowed but for parquet), keyed by the run's "
                              "languages."),
    output: str = typer.Option(None, "--output", help="Also write the translations here."),
    as_json: bool = JSON,
    device: str = DEVICE,
    set_: list[str] = set_option(),
    engine: str = ENGINE,
    metrics: list[str] = typer.Option([], "--metrics", callback=_one_of("mt.metrics:EXTRA_METRICS"),
                                      help="Add a metric: ter."),
    threads: int = threads_option("torch threads, fixed, in one stream; 0: one stream of one "
                                  "thread per core, decoding batches side by side."),
    glossary: str = typer.Option(None, "--glossary", help=GLOSSARY_HELP + " Adds the term "
                                 "use rate."),
    compare: bool = typer.Option(False, "--compare", help="Each RUN a system (not an "
                                 "ensemble): a table of BLEU and chrF with 95% confidence "
                                 "intervals and the paired bootstrap p-value against the "
                                 "first RUN."),
    resamples: int = typer.Option(1000, "--bootstrap", min=1, max=MAX_RESAMPLES,
                                  help="--compare: bootstrap resamples."),
    bootstrap_seed: int = typer.Option(12345, "--bootstrap-seed", min=1, help="--compare: "
                                       "the bootstrap's seed (sacreBLEU's SACREBLEU_SEED)."),
    hyps: list[str] = typer.Option([], "--hyp", help="--compare: a system already "
                                   "translated, one line per source line (an ensemble, "
                                   "another beam, another toolkit's), after the RUNs."),
) -> None:
    """Translate a test set and score it with sacreBLEU (BLEU, chrF and variants).

    Cased BLEU and chrF, lowercased BLEU, BLEU on lowercased spaCy tokens and (with the moses
    extra) on lowercased Moses tokens, each with its signature; --metrics ter adds TER.
    Several RUNs are one ensemble; with --compare, each is a system of its own.
    """
    from mt.commands.evaluate import eval_command, report
    from mt.commands.options import TranslateOptions

    options = TranslateOptions(device=_device(device), engine=engine, overrides=tuple(set_),
                               decode=decoding(ctx), threads=threads, glossary=glossary)
    r = eval_command(runs, split, src, ref, pairs, output, options, metrics, compare,
                     resamples, bootstrap_seed, hyps)
    print(json.dumps(r) if as_json else report(r))


@app.command(cls=Decoding)
def calibrate(
    ctx: typer.Context,
    run: Path = typer.Argument(..., help="Run directory (uses best.pt) or checkpoint file."),
    src: str = typer.Option(..., "--src", help="Held-out source lines (not the test set)."),
    ref: str = typer.Option(..., "--ref", help="Their reference translations."),
    threshold: float = typer.Option(50.0, "--threshold", help="Sentence chrF a line must "
                                    "reach to count as good: the confidence is P(chrF >= "
                                    "this)."),
    as_json: bool = JSON,
    device: str = DEVICE,
    set_: list[str] = set_option(),
    threads: int = threads_option("torch threads, fixed, in one stream; 0: one stream of one "
                                  "thread per core."),
) -> None:
    """Fit the run's confidence on a held-out set and keep it in the run directory.

    Translates --src with the run's decode settings, scores each line's chrF against --ref and
    fits a logistic regression from the confidence features to P(chrF >= --threshold), saved
    as calibration.json beside the checkpoint (docs/confidence.md).
    """
    from mt.commands.calibrate import calibrate as run_calibrate
    from mt.commands.calibrate import report
    from mt.commands.options import TranslateOptions

    options = TranslateOptions(device=_device(device), overrides=tuple(set_),
                               decode=decoding(ctx), threads=threads)
    r = run_calibrate(run, src, ref, options, threshold)
    print(json.dumps(r) if as_json else report(r))


@app.command(cls=Decoding)
def translate(
    ctx: typer.Context,
    runs: list[Path] = typer.Argument(..., help=RUNS_HELP, metavar="RUN..."),
    input: str = typer.Option("-", "-i", "--input",
                              help="Source text, one sentence a line; - is stdin."),
    input_format: str = typer.Option("text", "--input-format",
                                     callback=_one_of("mt.commands.translate:INPUT_FORMATS"),
                                     help='text, or jsonl: one JSON object a line, {"src": ..., '
                                     '"glossary": [[source, target], ...], "prefix": ...} '
                                     "(glossary and prefix optional; a line's glossary is "
                                     "added to --glossary's, its target winning for a source "
                                     "term in both)."),
    output: str = typer.Option("-", "-o", "--output", help="Where translations go; - is stdout."),
    device: str = DEVICE,
    set_: list[str] = set_option(),
    attention: Path = typer.Option(None, "--attention", help="Also draw each line's "
                                   "cross-attention as DIR/NNNN.png (line NNNN; at most 100 "
                                   "lines; needs matplotlib)."),
    attention_layer: int = typer.Option(-1, "--attention-layer",
                                        help="Decoder layer to draw, from 0; -1 is the last."),
    attention_heads: str = typer.Option("mean", "--attention-heads",
                                        help="mean: heads averaged; all: one panel per head."),
    engine: str = ENGINE,
    output_format: str = typer.Option("text", "--format",
                                      callback=_one_of("mt.commands.translate:OUTPUT_FORMATS"),
                                      help="text, or jsonl: one JSON object per input line, "
                                      '{"src", "text", "score"} (and "nbest": [...] with '
                                      "--nbest); html: the input is one HTML document, as "
                                      "with --doc-format html (docs/documents.md)."),
    split_sentences: bool = typer.Option(False, "--split-sentences", help="Each input line is "
                                         "a paragraph: split into sentences, translated, put "
                                         "back together; URLs, numbers and the like kept as "
                                         "they are (docs/documents.md)."),
    keep: list[str] = typer.Option([], "--keep", help="A regular expression whose matches are "
                                   "not translated (repeatable; implies --split-sentences)."),
    doc_format: str = typer.Option(None, "--doc-format",
                                   callback=_one_of("mt.document.formats:cli_names"),
                                   help="The input is one document, written back in its format: "
                                   "txt, md, html, srt, docx (needs python-docx), po, xliff, or "
                                   "auto (by the input file's extension)."),
    prefix: str = typer.Option(None, "--prefix", help="A file of target prefixes, one per input "
                               "line (empty: none): each output starts with its prefix, "
                               "forced and scored (docs/decoding.md)."),
    glossary: str = typer.Option(None, "--glossary", help=GLOSSARY_HELP),
    workers: int = workers_option(1, "Processes translating chunks of the input, each with the "
                                  "available cores shared out as torch threads; output in "
                                  "order. Not with --engine ctranslate2."),
    min_confidence: float = typer.Option(None, "--min-confidence", min=0.0, max=1.0,
                                         help="Write an empty line for each line whose "
                                         "confidence (the run's calibration, mt calibrate) "
                                         "is below this; count them on stderr."),
    threads: int = threads_option("torch threads of each process, fixed; 0: with one process "
                                  "one stream of one thread per core, decoding batches side "
                                  "by side; with workers the cores shared out."),
) -> None:
    """Translate line by line: exactly one output line per input line, in order.

    With --nbest N (or --set decode.nbest=N, or decode.nbest > 1 in the run's config): up to
    N lines per input line, see docs/decoding.md. Typed at a terminal, each line is translated
    as it is entered (Ctrl-D ends).
    """
    from mt.commands.heatmap import Pictures
    from mt.commands.options import TranslateOptions
    from mt.commands.translate import translate as run_translate

    options = TranslateOptions(
        device=_device(device), engine=engine, overrides=tuple(set_), decode=decoding(ctx),
        threads=threads, workers=workers, output_format=output_format, prefix=prefix,
        glossary=glossary, split=split_sentences, keep=tuple(keep), doc_format=doc_format,
        min_confidence=min_confidence, input_format=input_format)
    pictures = None if attention is None else Pictures(attention, attention_layer,
                                                       attention_heads)
    run_translate(runs, input, output, options, pictures)


def _proxies(value: str) -> tuple[str, ...]:
    """--forwarded-allow-ips as its addresses, or a usage error (exit 2) naming a wrong one."""
    from mt.serve.access import proxies

    try:
        return proxies(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


@app.command(cls=Decoding)
def serve(
    ctx: typer.Context,
    runs: list[Path] = typer.Argument(None, help=RUNS_HELP + " One language pair, the "
                                      "run's; or leave out and give --model.",
                                      metavar="RUN...", show_default=False),
    model: list[str] = typer.Option([], "--model", metavar="SRC-TGT=RUN[,RUN]",
                                    help="A language pair and its run (several runs: an "
                                    "ensemble), e.g. de-en=runs/a; repeat for each pair "
                                    "served. Instead of RUN.", show_default=False),
    memories: list[str] = typer.Option(
        [], "--memory", metavar="[SRC-TGT=]MEMORY", show_default=False,
        help="A translation memory (a path, made if missing, or a postgresql:// URL): every "
        "translation reuses its exact matches, and POST /corrections and the page's Save "
        "write into it; of several pairs, one a pair: --memory en-de=tm.db."),
    state_dir: Path = typer.Option(None, "--state-dir", help="Where the DeepL API's "
                                   "glossaries are kept across restarts (default: in memory "
                                   "only)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; 0.0.0.0: "
                             "every interface (reachable from other machines)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535,
                             help="Port to listen on; 0: one the system picks (printed)."),
    device: str = DEVICE,
    set_: list[str] = set_option(),
    engine: str = ENGINE,
    threads: int = threads_option("torch threads, fixed; 0: the cores, fewer while other "
                                  "processes keep some busy."),
    max_lines: int = typer.Option(100, "--max-lines", min=1, max=10**6,
                                  help="Lines one request may hold (413 beyond)."),
    max_chars: int = typer.Option(20_000, "--max-chars", min=1, max=10**9,
                                  help="Characters one request may hold, its lines and "
                                  "prefixes together (413 beyond)."),
    batch_wait_ms: float = typer.Option(5.0, "--batch-wait-ms", min=0.0, max=60_000.0,
                                        help="How long the worker waits, after each request "
                                        "that arrives, for another to translate with it (ten "
                                        "waits at most)."),
    api_key_file: Path = typer.Option(None, "--api-key-file", help="API keys, one a line: "
                                      "every request but GET /health and the page must send "
                                      "`Authorization: Bearer KEY` (401 without)."),
    lines_per_minute: int = typer.Option(0, "--lines-per-minute", min=0, max=10**9,
                                         help="Lines each client (its key, else its address) "
                                         "may send per minute (429 with Retry-After beyond); "
                                         "0: no limit."),
    grace: float = typer.Option(10.0, "--grace", min=0.0, max=3600.0, help="Seconds the "
                                "requests in flight have to finish after SIGTERM or Ctrl-C; "
                                "then the connections still open are closed."),
    full_info: bool = typer.Option(False, "--full-info", help="GET /info and the page also "
                                   "tell where the model is on this host (its paths, data and "
                                   "lineage), as `mt info --json` does."),
    forwarded_allow_ips: str = typer.Option(
        "", "--forwarded-allow-ips", callback=_proxies, metavar="ADDRESSES",
        help="The proxies in front of the server, comma-separated (10.0.0.1,10.0.0.0/8; *: "
        "any): their X-Forwarded-For header names the client that --lines-per-minute counts. "
        "Default: none; every client is its connection's address."),
) -> None:
    """Keep the model loaded and translate over HTTP: POST /translate (JSON), GET /health,
    GET /info, and a page at / to try it (docs/serve.md); LibreTranslate's API (/translate,
    /languages, /translate_file) and DeepL's (/v2/...) too, for their clients.

    One run serves its language pair; --model serves several, e.g. --model de-en=runs/a
    --model en-de=runs/b,runs/c, each request routed by its source and target. --memory
    gives a pair a translation memory: its exact matches reused, corrections kept in it
    (POST /corrections, the page's Save).

    Requests that arrive together are translated together. The decoding options here are the
    server's defaults; a request may give its own. SIGTERM or Ctrl-C answers the requests in
    flight, then exits 0. Needs the serve extra: pip install "mt[serve]".
    """
    from mt.commands.options import TranslateOptions
    from mt.commands.serve import ServeOptions
    from mt.commands.serve import serve as run_server

    options = TranslateOptions(device=_device(device), engine=engine, overrides=tuple(set_),
                               decode=decoding(ctx), threads=threads)
    run_server(runs or None, options,
               ServeOptions(host, port, max_lines, max_chars, batch_wait_ms, api_key_file,
                            lines_per_minute, grace, full_info, forwarded_allow_ips,
                            tuple(model), state_dir, tuple(memories)))


@app.command("export")
def export_model(
    run: Path = typer.Argument(..., help="Run directory (uses best.pt) or checkpoint file."),
    out: Path = typer.Argument(..., help="Directory to create for the exported model."),
    to: str = typer.Option(..., "--to", callback=_one_of("mt.commands.export:EXPORT_FORMATS"),
                           help='Format: ctranslate2 (needs pip install "mt[ctranslate2]"), or '
                           'hf: a Marian model for transformers (needs "mt[hf]").'),
    quantization: str = typer.Option(None, "--quantization",
                                     callback=_one_of("mt.ct2.export:QUANTIZATIONS"),
                                     help="Weights as int8, int8_float32, bfloat16 or float16 "
                                     "(default: float32)."),
    force: bool = typer.Option(False, "--force", help="Replace OUT if it exists."),
) -> None:
    """Export a model for another engine: mt export RUN --to ctranslate2|hf OUT.

    ctranslate2: OUT gets the CTranslate2 model and the run's config, vocabularies and
    tokenizer files; translate with it: mt translate --engine ctranslate2 OUT. hf: OUT is a
    Marian model directory (MarianMTModel.from_pretrained(OUT)), for runs with a marian
    tokenizer (mt import hf, and runs fine-tuned from one). OUT is written whole or not at all.
    """
    from mt.commands.export import export

    print(json.dumps(export(run, out, to, quantization, force)))


@import_app.command("hf")
def import_hf(
    source: str = typer.Argument(..., help="A Marian model directory in the Hugging Face "
                                 "format (config.json, model.safetensors, source.spm, ...), or "
                                 "a Hub id such as Helsinki-NLP/opus-mt-de-en."),
    out: Path = typer.Option(..., "--out", help="Run directory to create."),
    src_lang: str = typer.Option(None, "--src-lang", help="Source language code (default: "
                                 "tokenizer_config.json's source_lang)."),
    tgt_lang: str = typer.Option(None, "--tgt-lang", help="Target language code (default: "
                                 "its target_lang)."),
    revision: str = typer.Option("main", "--revision", help="With a Hub id: the branch, tag "
                                 "or commit."),
    force: bool = typer.Option(False, "--force", help="Replace --out if it exists."),
) -> None:
    """Import a Marian (OPUS-MT) model: mt import hf DIR --out RUN.

    RUN is an ordinary run: mt translate, eval, serve, export and info take it, and mt train
    CONFIG --init-from RUN fine-tunes it. Needs safetensors (pip install "mt[hf]"), never
    transformers. A Hub id is fetched into the cache ($MT_CACHE_DIR/hf) through
    $HF_ENDPOINT (default https://huggingface.co); offline, download the model elsewhere and
    give its directory. Prints one JSON object.
    """
    from mt.commands.import_hf import import_hf as run_import

    print(json.dumps(run_import(source, out, src_lang, tgt_lang, revision, force)))


@app.command()
def tokenize(
    run: Path = typer.Argument(None, help="Run directory (or checkpoint) whose tokenizer to use; "
                               "or give --lang."),
    side: str = typer.Option("src", "--side", callback=_one_of("mt.commands.tokenize:SIDES"),
                             help="With RUN: src or tgt tokenizer."),
    lang: str = typer.Option(None, "--lang", help="spaCy language code (en, de, xx, ...), "
                             "instead of RUN."),
    lowercase: bool = typer.Option(False, "--lowercase", help="With --lang: lowercase first."),
    input: str = typer.Option("-", "-i", "--input", help="Text, one sentence a line; - is stdin."),
    output: str = typer.Option("-", "-o", "--output", help="Where to write; - is stdout."),
    detok: bool = typer.Option(False, "--detok", help="Join space-separated tokens back into "
                               "text instead."),
) -> None:
    """Split lines into space-separated tokens, or join them back into text (--detok).

    One output line per input line, empty lines kept. See docs/tokenization.md.
    """
    from mt.commands.tokenize import tokenize as run_tokenize

    run_tokenize(run, side, lang, lowercase, input, output, detok)


@app.command()
def average(
    run: Path = typer.Argument(..., help="Run directory trained with train.keep_checkpoints."),
    last: int = typer.Option(..., "--last", min=1, max=10**6,
                             help="Average the newest N ckpt.STEP.pt."),
    output: Path = typer.Option(None, "-o", "--output", help="Checkpoint to write (default "
                                "RUN/average.pt); it carries the run's config and vocabularies, "
                                "as best.pt does."),
) -> None:
    """Average the weights of a run's last N step checkpoints into one checkpoint file."""
    from mt.commands.average import average_run

    print(average_run(run, last, output))


@app.command()
def shortlist(
    run: Path = typer.Argument(..., help="Run directory (its best.pt and last.pt) or "
                               "checkpoint file."),
    corpus: Path = typer.Option(None, "--corpus", help="Learn from DIR/train.SRC and "
                                "DIR/train.TGT (plain or .gz) instead of the run's training "
                                "corpora."),
    sets: list[str] = set_option("Override a value of the run's config, e.g. --set "
                                 "train.shortlist.k=50."),
) -> None:
    """Learn a run's lexical shortlist and write it into its checkpoints (docs/decoding.md).

    mt train learns one itself; this is for a run trained before that, an imported one
    (mt import hf) or other settings. Prints what it wrote as JSON.
    """
    from mt.commands.shortlist import shortlist_run

    print(json.dumps(shortlist_run(run, corpus, sets)))


@app.command()
def plot(
    runs: list[Path] = typer.Argument(..., help="Run directories (or metrics.jsonl files)."),
    out: Path = typer.Option(Path("curves.png"), "-o", "--output", help="The PNG to write."),
) -> None:
    """Draw loss, validation BLEU, learning rate and peak memory against steps into one PNG.

    Four panels side by side, 2000 x 400 pixels. Several runs are overlaid, one colour each.
    Needs matplotlib (the plot extra).
    """
    from mt.commands.plot import plot_runs

    print(plot_runs(runs, out))


@app.command()
def info(
    run: Path = typer.Argument(..., help="Run directory (uses best.pt) or checkpoint file."),
    as_json: bool = JSON,
) -> None:
    """Describe a run or checkpoint: model, parameters, vocabularies, steps, best result.

    Also the tokenizer, the data and the checkpoints present with their sizes.
    """
    from mt.commands.info import format_info, run_info

    result = run_info(run)
    print(json.dumps(result) if as_json else format_info(result))


@data_app.command("multi30k")
def data_multi30k(
    dest: Path = typer.Option(Path("data/multi30k"), "--dest", help="Where the files go."),
    from_: Path = typer.Option(None, "--from", help="Copy from this directory instead of "
                               "downloading (e.g. ../shared/data/multi30k)."),
    langs: str = typer.Option("de,en", "--langs", help="Comma-separated: en, de, fr, cs."),
    splits: str = typer.Option("train,val,test_2016_flickr", "--splits",
                               help="Comma-separated: train, val, test_2016_flickr, "
                               "test_2017_flickr, test_2017_mscoco, test_2018_flickr; or all "
                               "(every split published in all of --langs)."),
) -> None:
    """Get Multi30k task 1 (default: de/en train, val, test_2016_flickr) and check its line
    counts."""
    from mt.commands.data import multi30k

    multi30k(dest, from_, splits.split(","), langs.split(","))


@data_app.command("opus")
def data_opus(
    corpus: str = typer.Argument(None, help="The corpus as OPUS names it: Europarl, ParaCrawl, "
                                 "News-Commentary, CCMatrix, OpenSubtitles, ... (--list shows "
                                 "those with the pair)."),
    langs: str = typer.Option(..., "-l", "--langs", help="SRC-TGT in OPUS's codes: de-en, "
                              "en-pt_br. The files are written in this direction."),
    version: str = typer.Option("latest", "--version", help="The release: latest, or one OPUS "
                                "lists (v8, v2018, ...)."),
    dest: Path = typer.Option(Path("data/opus"), "--dest", help="Where the files go."),
    max_pairs: int = typer.Option(0, "--max-pairs", min=0, help="Write the first N pairs only "
                                  "(0: all); the archive is still fetched whole."),
    form: str = typer.Option("moses", "--form", callback=_one_of("mt.corpora.opus:FORMS"),
                             help="moses (plain text in a zip) or tmx (gzipped XML)."),
    list_: bool = typer.Option(False, "--list", help="List the corpora OPUS has for the pair "
                               "(latest releases, largest first), and fetch nothing."),
) -> None:
    """Get a corpus from OPUS for a language pair, through the OPUS API.

    The archive goes to $MT_CACHE_DIR/opus/ (a cut download resumes, its size is checked); its
    pairs, streamed, go to DEST/{Corpus}-{version}.{src}-{tgt}.{src} and .{tgt}, beside the
    corpus's README and LICENSE and what OPUS lists of it (.opus.json). Prints a JSON summary.
    """
    from mt.commands.data import list_opus, opus_corpus

    if list_:
        print(list_opus(langs, form))
        return
    if corpus is None:
        raise UsageError("data opus", "CORPUS", "give the corpus's name, or --list")
    print(json.dumps(opus_corpus(corpus, langs, dest, version, form, max_pairs)))


@data_app.command("sacrebleu")
def data_sacrebleu(
    test_set: str = typer.Option(None, "-t", "--test-set", help="A test set sacreBLEU knows "
                                 "(wmt19, wmt23, iwslt17, ...), or flores200/dev, "
                                 "flores200/devtest."),
    langs: str = typer.Option(None, "-l", "--langs", help="SRC-TGT, as the test set names it "
                              "(de-en; FLORES-200: eng_Latn-deu_Latn)."),
    dest: Path = typer.Option(Path("data/sacrebleu"), "--dest", help="Where the files go."),
    list_: bool = typer.Option(False, "--list", help="List the test sets (with -l: those with "
                               "the pair), and fetch nothing."),
) -> None:
    """Get a test set's source and reference through sacreBLEU's own download, checksums and
    cache ($SACREBLEU, else ~/.sacrebleu).

    Written as DEST/{test set}.{src}-{tgt}.{src} and .{tgt}: the split name
    {test set}.{src}-{tgt} for data.val, data.test or mt eval's --src/--ref. Prints a JSON
    summary.
    """
    from mt.commands.data import list_test_sets, sacrebleu_test_set

    if list_:
        print(list_test_sets(langs))
        return
    print(json.dumps(sacrebleu_test_set(test_set, langs, dest)))


@data_app.command("gettext")
def data_gettext(
    src: str = typer.Option("en", "--src", help="The msgids' language (English for nearly all "
                            "software)."),
    tgt: str = typer.Option(..., "--tgt", help="The translations' language, as the locale "
                            "directory names it: de, fr, pt_BR."),
    from_: Path = typer.Option(Path("/usr/share/locale"), "--from", help="The directory "
                               "holding TGT/LC_MESSAGES/*.mo."),
    out: Path = typer.Option(..., "--out", help="Where the corpus goes."),
) -> None:
    """Make a corpus of the installed software's translations, split by whole package.

    Each TGT/LC_MESSAGES/*.mo is read by gettext's msgunfmt; its translated entries become
    OUT/{train,val,test}.{SRC,TGT} (a pair a line; backslash, line feed, carriage return and
    tab escaped as in PO), its PO text OUT/{split}/{package}.po, and OUT/manifest.json lists
    the packages of each split. Prints a JSON summary (docs/data.md#software-strings).
    """
    from mt.commands.data import gettext_corpus

    print(json.dumps(gettext_corpus(src, tgt, from_, out)))


@data_app.command("check")
def data_check(
    config: Path = typer.Argument(None, help="YAML config: audit its training split against "
                                  "its val and test sets. Or give --src and --tgt."),
    set_: list[str] = set_option("Override a config value: --set data.max_len=50 --set "
                                 "data.filter.max_ratio=2"),
    src: Path = typer.Option(None, "--src", help="Training source file (instead of CONFIG)."),
    tgt: Path = typer.Option(None, "--tgt", help="Training target file, with --src."),
    val_src: Path = typer.Option(None, "--val-src", help="A validation source file, to count "
                                 "the training pairs it holds (with --src)."),
    val_tgt: Path = typer.Option(None, "--val-tgt", help="Its target file."),
    test_src: Path = typer.Option(None, "--test-src", help="A test source file, likewise."),
    test_tgt: Path = typer.Option(None, "--test-tgt", help="Its target file."),
    as_json: bool = JSON,
) -> None:
    """Audit a parallel corpus: empty sides, over-long pairs, length-ratio outliers, duplicates,
    copies, invalid UTF-8, control characters, overlap with val and test (docs/data.md)."""
    from mt.commands.data import check_command

    result = check_command(config, set_, {"src": src, "tgt": tgt, "val-src": val_src,
                                          "val-tgt": val_tgt, "test-src": test_src,
                                          "test-tgt": test_tgt})
    print(result.to_json() if as_json else result.report())


MEMORY = typer.Argument(..., help="The memory: a file (SQLite; made by mt memory add) or a "
                        "postgresql:// URL (needs pip install 'mt[memory-pg]').")


@memory_app.command("add")
def memory_add(
    memory: str = MEMORY,
    files: list[Path] = typer.Argument(..., help="TMX, PO, XLIFF, TSV or JSON lines files, by "
                                       "their names' endings; or PREFIX for the plain files "
                                       "PREFIX.SRC and PREFIX.TGT."),
    src: str = typer.Option(..., "--src", help="The source language (de); the memory's, "
                            "recorded when it is made."),
    tgt: str = typer.Option(..., "--tgt", help="The target language (en)."),
) -> None:
    """Add the files' pairs to a memory, made if missing; a pair already there is kept once.

    Each batch of 1,000 pairs is one transaction, durable once written; several mt memory add
    may run at once on one memory. Prints a JSON summary (docs/memory.md)."""
    from mt.commands.memory import add

    print(json.dumps(add(memory, files, src, tgt)))


@memory_app.command("search")
def memory_search(
    memory: str = MEMORY,
    text: str = typer.Argument(..., help="The source sentence to look up."),
    k: int = typer.Option(5, "--k", min=1, max=1000, help="How many matches, best first."),
    threshold: float = typer.Option(0.0, "--threshold", min=0.0, max=100.0,
                                    help="The lowest match percentage shown."),
    src: str = typer.Option(None, "--src", help="Refuse a memory of another source language."),
    tgt: str = typer.Option(None, "--tgt", help="Refuse a memory of another target language."),
    as_json: bool = JSON,
) -> None:
    """The memory's best matches for TEXT with their match percentage (docs/memory.md)."""
    from mt.commands.memory import format_matches, search

    found = search(memory, text, k, threshold, src, tgt)
    print(json.dumps(found, ensure_ascii=False) if as_json else format_matches(found))


@memory_app.command("export")
def memory_export(
    memory: str = MEMORY,
    to: str = typer.Option("tmx", "--to", callback=_one_of("mt.commands.memory:EXPORTS"),
                           help="tmx (TMX 1.4) or tsv (source TAB target)."),
    output: str = typer.Option(..., "-o", "--output", help="The file ('-': stdout)."),
) -> None:
    """Write every pair of a memory, in the order added, as TMX or TSV; a JSON summary is
    printed when OUTPUT is a file."""
    from mt.commands.memory import export

    summary = export(memory, to, output)
    if output != "-":
        print(json.dumps(summary))


@memory_app.command("info")
def memory_info(memory: str = MEMORY, as_json: bool = JSON) -> None:
    """A memory's pairs, languages, size and when it was made."""
    from mt.commands.memory import describe, format_info

    about = describe(memory)
    print(json.dumps(about) if as_json else format_info(about))


class Interrupted(BaseException):
    """SIGINT or SIGTERM (outside training, which saves first): unwinds the stack, so partial
    output files are removed, then exits 128 + the signal number."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


try:  # usage errors: Click's, which Typer vendors (under TyperException) in newer versions
    from typer import TyperException as UsageErrors
except ImportError:
    from click import ClickException as UsageErrors


def _interrupt(signum, frame) -> None:
    raise Interrupted(signum)


def _fail(message: str, code: int) -> None:
    """End with `error: MESSAGE` and the exit code; under --debug, the traceback first."""
    if os.environ.get("MT_DEBUG"):
        traceback.print_exc()
    # One line, whatever the message quotes: control characters and line separators escaped.
    message = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                      for c in message)
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def _literal_help(command):
    """The click command with its help texts shown as written: Typer renders them as Rich
    markup, which would drop `[ctranslate2]` from `pip install "mt[ctranslate2]"`; a command's
    first paragraph on one line in the list of commands. And a flag
    shown without a type: Typer labels it `<bool>`, which reads as if it took a value
    (`--align true`, then "true" is read as a RUN)."""
    from rich.markup import escape

    if command.help and not command.short_help:  # its line in the list of commands: Typer's
        # rich mode would keep the docstring's line breaks there
        command.short_help = " ".join(command.help.split("\n\n")[0].split())
    for item in (command, *command.params, command.get_help_option(typer.Context(command))):
        for attr in ("help", "short_help", "epilog"):
            if getattr(item, attr, None):
                setattr(item, attr, escape(getattr(item, attr)))
        if getattr(item, "is_flag", False) and item.metavar is None:
            item.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _literal_help(sub)
    return command


def main() -> None:
    """Run the app. User errors become one `error: ...` line and an exit code (docs/errors.md);
    --debug or MT_DEBUG=1 prints the traceback before that line, with the same exit code.
    Anything else is a bug in mt and keeps its traceback."""
    for name, value in KERNEL_CACHES:  # before any command runs oneDNN
        os.environ.setdefault(name, value)
    for s in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(s) is not signal.SIG_IGN:  # a background job keeps ignoring Ctrl-C
            signal.signal(s, _interrupt)
    try:
        # Not standalone: Click would print usage errors in a box and swallow Ctrl-C.
        code = _literal_help(typer.main.get_command(app))(standalone_mode=False, prog_name="mt")
    except UsageErrors as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # plain `mt`: the help, as Typer shows it
            e.show()
            sys.exit(e.exit_code)
        ctx = getattr(e, "ctx", None)
        hint = f" (see '{ctx.command_path if ctx is not None else 'mt'} --help')"
        _fail(" ".join(e.format_message().split()) + hint, e.exit_code)
    except typer.Abort:
        _fail("aborted", 1)
    except OutputClosed:
        # Nothing more can reach the reader; what Python still holds for stdout goes nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(OutputClosed.exit_code)
    except MTError as e:
        _fail(str(e), e.exit_code)
    except OSError as e:  # permission denied, disk full, ...: the user's to fix, not a bug
        _fail(os_error_message(e), FileSystemError.exit_code)
    except (Interrupted, KeyboardInterrupt) as e:
        if os.environ.get("MT_DEBUG"):
            traceback.print_exc()
        signum = getattr(e, "signum", signal.SIGINT)
        print("interrupted" if signum == signal.SIGINT else "terminated", file=sys.stderr)
        sys.exit(128 + signum)
    except Exception:
        traceback.print_exc()
        print("internal error: this is a bug in mt; please report it with the traceback above",
              file=sys.stderr)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
