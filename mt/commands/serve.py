"""`mt serve RUN`: keep a Translator loaded and answer HTTP on host:port (mt.serve) until
SIGTERM or Ctrl-C, which answer the requests in flight first and end with exit 0."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from mt.commands.info import run_info, tokenizer_info
from mt.commands.options import TranslateOptions
from mt.errors import ConfigError, MTError, UsageError
from mt.log import info as info_line
from mt.runs import Paths, as_paths
from mt.serve import require
from mt.threads import follow_load
from mt.translator import Translator

# A call holds the lines of the requests in flight: a few hundred of mixed lengths, where a file
# is sorted 2,000 lines at a time. Cut by the file's token budget they made about 3 batches a
# call; one batch a call gave 1.40x the lines/s (docs/benchmarks.md#serving-under-load).
CALL_BUDGET = 16  # times the run's decode.batch_tokens, unless --set decode.batch_tokens


@dataclass(frozen=True)
class ServeOptions:
    """Where `mt serve` listens and what it takes (mt.serve.app.Limits)."""

    host: str = "127.0.0.1"
    port: int = 8000  # 0: one the system picks
    max_lines: int = 100  # lines one request may hold
    max_chars: int = 20_000  # characters one request may hold, its lines and prefixes together
    wait_ms: float = 5.0  # the batcher's wait for more requests (mt.serve.batcher)
    api_key_file: Path | None = None  # keys, one a line: every request but /health needs one
    lines_per_minute: int = 0  # lines a client may send per minute; 0: no limit
    grace_s: float = 10.0  # after SIGTERM, how long requests in flight have to finish
    full_info: bool = False  # GET /info: `mt info --json`'s object, paths included
    # proxies whose X-Forwarded-For names the client (mt.serve.access.proxies); none: no one's
    forwarded_allow_ips: tuple[str, ...] = ()
    # --model SRC-TGT=RUN[,RUN]: several pairs (mt.serve.pairs.parse_models), instead of runs
    models: tuple[str, ...] = ()
    state_dir: Path | None = None  # where the DeepL API's glossaries are kept; None: memory
    # --memory [SRC-TGT=]MEMORY: a translation memory per pair (mt.serve.pairs.parse_memories)
    memories: tuple[str, ...] = ()


def serve(runs: Paths | None, options: TranslateOptions = TranslateOptions(),
          server: ServeOptions = ServeOptions()) -> dict:
    """Serve until stopped; returns the count of requests begun and answered.

    runs: one run (or checkpoint, or export), or several as an ensemble (Translator.load): one
    pair, the run's languages; or None, and server.models names the pairs (each loaded once).
    The API keys are read, and the port taken, before the models load (a ServerError, exit 8,
    if it cannot be); then one line says where the server listens: `serving RUN on
    http://HOST:PORT/ ...`.
    options.overrides and options.decode are the server's decoding defaults (a request may
    change them for itself; decode.batch_tokens is CALL_BUDGET times the run's unless given);
    options.threads: torch threads (0: mt.threads.follow_load). server.memories: a translation
    memory per pair (--memory), opened as each pair loads (mt.serve.corrections).
    """
    require()  # the missing extra: one line, before anything else
    from mt.serve.access import Access, read_keys
    from mt.serve.app import Limits, create_app
    from mt.serve.pairs import Pairs
    from mt.serve.server import bind, url
    from mt.serve.server import serve as run_server

    specs = pair_specs(runs, server.models)
    memories = memory_specs(specs, server.memories)
    access = Access(read_keys(server.api_key_file) if server.api_key_file else [],
                    server.lines_per_minute)
    sock = bind(server.host, server.port)
    with sock:
        # The batcher's thread runs the model, and is to be the only one with a team of OpenMP
        # threads: libgomp hardly spins when it manages more threads than there are cores, so
        # a second team makes every parallel region wake sleeping threads (1.4x the time of a
        # translation, docs/serve.md#threads). The models load on one thread here.
        cap = torch.get_num_threads()
        torch.set_num_threads(1)
        pairs = Pairs([load_pair(source, target, paths, options, server.full_info,
                                 memories)
                       for source, target, paths in specs])
        info = pairs.default.info
        app = create_app(pairs, info, Limits(server.max_lines, server.max_chars),
                         server.wait_ms, setup=lambda: follow_load(options.threads, cap),
                         access=access, state_dir=server.state_dir)
        address = url(server.host, sock.getsockname()[1])
        shown = (" + ".join(map(str, specs[0][2])) if runs is not None else
                 ", ".join(f"{s}-{t}" for s, t, _ in specs))
        run_server(app, sock, server.grace_s,
                   on_start=lambda: info_line(f"serving {shown} on {address}/ (the API: "
                                              f"{address}/docs); SIGTERM or Ctrl-C stops"),
                   on_stop=lambda: info_line(f"stopping: answering the {app.in_flight} "
                                             f"request(s) in flight first (at most "
                                             f"{server.grace_s:g} s)"),
                   proxies=server.forwarded_allow_ips)
    info_line(f"stopped: answered {app.answered} of {app.begun} request(s)")
    return {"begun": app.begun, "answered": app.answered}


def pair_specs(runs: Paths | None, models: tuple[str, ...]) -> list[tuple[str | None,
                                                                          str | None, list]]:
    """(source, target, runs) per pair to serve: RUN... (its languages read when it loads) or
    each --model; a UsageError for both or neither, or --model values that cannot be served
    (mt.serve.pairs.parse_models)."""
    from mt.serve.pairs import parse_models

    if (runs is not None) == bool(models):
        raise UsageError("serve", "RUN", "give RUN... (one pair) or --model SRC-TGT=RUN "
                         "(each pair), not " + ("both" if models else "neither"))
    if runs is not None:
        return [(None, None, as_paths(runs))]
    try:
        return parse_models(list(models))
    except ValueError as e:
        raise UsageError("serve", "'--model'", str(e)) from None


def memory_specs(specs: list[tuple], given: tuple[str, ...]) -> dict[str | None, str]:
    """Each --memory by the pair it is for (None: RUN..., its languages not read yet); a
    UsageError for one that names no served pair or a pair twice."""
    from mt.serve.pairs import parse_memories

    try:
        return parse_memories(list(given), None if specs[0][0] is None else
                              [f"{source}-{target}" for source, target, _ in specs])
    except ValueError as e:
        raise UsageError("serve", "'--memory'", str(e)) from None


def pair_memory(given: dict[str | None, str], source: str, target: str, default: str = "",
                run: bool = False) -> str | None:
    """The memory --memory gives the pair (else default: decode.memory, from --set or the
    run's config; None: none). given: memory_specs's. run: the pair is RUN...'s, read from
    the run: a --memory naming another pair is a ConfigError."""
    name = f"{source}-{target}"
    other = next((k for k in given if k not in (None, name)), None)
    if run and other is not None:
        raise ConfigError(f"--memory {other}={given[other]}: the run translates {name}; name "
                          "it so")
    return given.get(name, given.get(None)) or default or None


def load_pair(source: str | None, target: str | None, runs: list[Path],
              options: TranslateOptions, full_info: bool,
              memories: dict[str | None, str] | None = None):
    """One pair's Translator, loaded once, with what GET /info tells of it, and its memory
    (memories: memory_specs's), opened for the server's lookups and POST /corrections (made,
    as the pair, where missing; one of another pair is a DataError); its languages the run's
    where not named (a --model naming others than the run's is a ConfigError)."""
    from mt.document.segment import sentencizer
    from mt.memory import open_memory
    from mt.serve.pairs import Pair

    translator = Translator.load(runs, options.device, options.engine, options.overrides,
                                 **options.decode)
    if not options.given("decode.batch_tokens"):
        translator = translator.with_options(
            batch_tokens=CALL_BUDGET * translator.decoding.batch_tokens)
    data = translator.run.cfg.data
    if source is not None and (source, target) != (data.src_lang, data.tgt_lang):
        raise ConfigError(f"--model {source}-{target}={','.join(map(str, runs))}: the run "
                          f"translates {data.src_lang}-{data.tgt_lang}; name it so")
    about = [model_info(path, translator) for path in runs]
    about = about if full_info else [public_info(a, path) for a, path in zip(about, runs,
                                                                              strict=True)]
    info = about[0] if len(about) == 1 else ensemble_info(about)
    where = pair_memory(memories or {}, data.src_lang, data.tgt_lang,
                        translator.decoding.memory, run=source is None)
    memory = None
    if where is not None:
        memory = open_memory(where, (data.src_lang, data.tgt_lang))  # made, where missing
        translator = translator.with_options(memory=where)  # read through its own connection
        translator.memory()  # opened now: a memory it cannot read fails here, not in a request
    # What the first request would pay for otherwise, paid before the server listens: spaCy's
    # import and the source's sentence splitter (about half a second), the model's first call
    # (docs/benchmarks.md#one-line-latency)
    sentencizer(data.src_lang)
    translator.translate(["."])
    return Pair(data.src_lang, data.tgt_lang, translator, info, memory=memory)


def model_info(path: Path, translator: Translator) -> dict:
    """`mt info --json`'s object for a run or checkpoint; for a CTranslate2 export (which has
    no checkpoint) what its config and vocabularies say."""
    try:
        return run_info(path)
    except MTError:
        run = translator.run
        return {"path": str(path), "step": run.step, "export": "ctranslate2",
                "vocab": {"src": len(run.src_vocab), "tgt": len(run.tgt_vocab)},
                "tokenizer": tokenizer_info(run.cfg.data)}


# What GET /info tells every client of a model without --full-info: nothing of where it is on
# the host (no path, no data directory, no lineage of checkpoint files).
PUBLIC_KEYS = ("step", "steps_trained", "parameters", "model", "vocab", "tokenizer", "best",
               "export")


def public_info(full: dict, path: Path) -> dict:
    """model_info's object without paths: the run's name (its directory's name, or the
    checkpoint file's with it) instead."""
    path = Path(path)
    name = path.name if path.is_dir() else f"{path.parent.name}/{path.name}".lstrip("/")
    return {"name": name, **{k: full[k] for k in PUBLIC_KEYS if k in full}}


def ensemble_info(members: list[dict]) -> dict:
    """GET /info of an ensemble: the first member's languages and tokenizer (all members share
    them), and each member's object."""
    return {"name": " + ".join(str(m.get("name") or m.get("path")) for m in members),
            "tokenizer": members[0].get("tokenizer"), "ensemble": members}
