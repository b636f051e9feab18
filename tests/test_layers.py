"""The import rule: mt's modules form layers, and an import may only reach down or sideways.

Every module of mt/ is parsed (imports inside functions count too) and its imports of mt are
checked against LAYERS: nothing imports a higher layer, the graph has no cycle, and library code
never imports mt.commands or mt.cli. The README's layer map mirrors LAYERS.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "mt"

# Lowest first. A module may import its own layer and any below it; the first name after `mt.`
# decides a module's layer (mt.train.loop is in "train", mt.tokenizers.text in "tokenizers").
LAYERS = [
    ["errors", "log"],
    ["textio", "l10n", "vocab", "device", "threads", "download"],
    ["tokenizers", "corpus_formats"],
    ["config", "memory"],
    ["data", "buckets", "mixing", "token_cache", "cached_mix", "filters", "audit", "kernels",
     "model", "loss", "decoding", "glossary", "terminology", "fuzzy_repair", "metrics",
     "records", "attention", "unknowns", "own_words", "confidence", "corpora", "compatibility"],
    ["checkpoint", "runs", "ensemble", "translator", "ct2", "hf"],
    ["train", "serve", "document"],
    ["commands"],
    ["cli", "__main__"],
]
LIBRARY_MUST_NOT_IMPORT = ("mt.commands", "mt.cli")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(name: str, known: dict[str, Path]) -> str:
    """The mt module an import names: `from mt import decoding` is mt.decoding, `from mt.config
    import load_config` is mt.config."""
    return name if name in known else name.rpartition(".")[0]


def imports(module: str, path: Path, known: dict[str, Path]) -> dict[str, int]:
    """The mt modules that `module` imports anywhere in its file, with the line of the first
    import of each. Importing mt.a.b runs mt/a/__init__.py first: mt.a counts as imported."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y, from .. import z
                anchor = package.rsplit(".", node.level - 1)[0]
                base = f"{anchor}.{base}" if base else anchor
            names = [resolve(f"{base}.{a.name}", known) for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            for n in range(2, len(parts) + 1):  # mt.a.b: mt.a, then mt.a.b
                found.setdefault(".".join(parts[:n]), node.lineno)
    ancestors = {module.rsplit(".", n)[0] for n in range(module.count(".") + 1)}
    return {m: line for m, line in found.items() if m.startswith("mt.") and m not in ancestors}


def layer(module: str) -> int:
    if module == "mt":
        # The package itself: its version, and the Python API (mt.Translator) imported from
        # mt.translator on first use, so it sits with translator. No module imports it by
        # name (importing mt.x runs it, which does not count: see imports).
        return layer("mt.translator")
    room = module.split(".")[1]
    matches = [i for i, names in enumerate(LAYERS) if room in names]
    assert matches, f"{module} is in no layer: add {room!r} to LAYERS (and the README)"
    return matches[0]


def graph() -> dict[str, dict[str, int]]:
    known = modules()
    return {m: imports(m, p, known) for m, p in known.items()}


def where(module: str, dep: str, line: int) -> str:
    path = modules()[module].relative_to(ROOT)
    return f"{path}:{line}: {module} (layer {layer(module)}) imports {dep} (layer {layer(dep)})"


def test_every_module_has_a_layer():
    for module in graph():
        layer(module)


def test_nothing_imports_upward():
    upward = [where(m, d, line) for m, deps in graph().items()
              for d, line in sorted(deps.items()) if layer(d) > layer(m)]
    assert upward == [], "\n".join(upward)


def test_library_never_imports_commands_or_cli():
    edges = [where(m, d, line) for m, deps in graph().items()
             if not m.startswith(LIBRARY_MUST_NOT_IMPORT) and m != "mt.__main__"
             for d, line in sorted(deps.items()) if d.startswith(LIBRARY_MUST_NOT_IMPORT)]
    assert edges == [], "\n".join(edges)


def test_no_import_cycles():
    edges, cycles = graph(), []
    state: dict[str, str] = {}  # "open" while on the depth-first path, then "done"

    def visit(m: str, path: list[str]) -> None:
        state[m] = "open"
        for d in sorted(edges.get(m, ())):
            if state.get(d) == "open":
                cycles.append(" -> ".join([*path[path.index(d):], d]))
            elif d not in state:
                visit(d, [*path, d])
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    assert cycles == [], "\n".join(cycles)


def test_the_parser_sees_imports_inside_functions_relative_ones_and_parents(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("import os\nfrom mt import decoding\nfrom mt.config import load_config\n"
                      "def f():\n    from .text import MARK\n    import mt.train.loop\n")
    known = modules()
    assert imports("mt.tokenizers.mod", source, known) == {
        "mt.decoding": 2, "mt.config": 3, "mt.tokenizers.text": 5, "mt.train": 6,
        "mt.train.loop": 6}


@pytest.mark.slow  # a fresh interpreter, which imports torch
def test_training_imports_scoring_not_evaluate():
    code = ("import sys, mt.train.loop; "
            "print('mt.commands.evaluate' in sys.modules, 'mt.metrics' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert p.stdout.split() == ["False", "True"], p.stderr


def test_the_readme_map_is_this_map():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("<!-- layer map")[1].split("<!-- end of layer map -->")[0]
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| ")]
    shown = {int(n): [m.strip(" `") for m in names.split(",")] for n, names in rows[1:]}
    assert [shown[n] for n in sorted(shown)] == LAYERS
