"""A Marian model directory in the Hugging Face layout: read (`read_model`), written
(`write_model`), and fetched from the Hub (`fetch`).

The layout, as `MarianMTModel.save_pretrained` and `MarianTokenizer.save_pretrained` write it:
config.json, model.safetensors (or an older pytorch_model.bin), generation_config.json,
source.spm, target.spm, vocab.json (target_vocab.json: separate vocabularies) and
tokenizer_config.json. Weights are read with safetensors (mt[hf]) or torch's weights_only
loading: never code from the file.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mt.download import DownloadError, download, inside
from mt.errors import CheckpointError, ConfigError
from mt.hf.marian import Weights
from mt.tokenizers.marian import SOURCE_SPM, TARGET_SPM, TARGET_VOCAB, VOCAB

CONFIG, GENERATION, TOKENIZER_CONFIG = "config.json", "generation_config.json", \
    "tokenizer_config.json"
SAFETENSORS, TORCH_BIN = "model.safetensors", "pytorch_model.bin"
TOKENIZER_FILES = (SOURCE_SPM, TARGET_SPM, VOCAB)
# owner/name, as the Hub spells repositories (a name is never . or ..: a path, not an id)
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/(?!\.\.?$)[\w.-]+")


@dataclass
class MarianFiles:
    """What a Marian model directory holds, its weights not yet read."""

    where: str  # the directory, or the Hub id it came from
    config: dict
    weights: Path
    tokenizer_files: dict[str, bytes]  # by name: the spm models, the vocabularies
    tokenizer_config: dict = field(default_factory=dict)
    generation: dict = field(default_factory=dict)

    @property
    def separate_vocabs(self) -> bool:
        return bool(self.tokenizer_config.get("separate_vocabs")) or \
            TARGET_VOCAB in self.tokenizer_files


def read_model(directory: Path, where: str | None = None) -> MarianFiles:
    """The files of a Marian model directory; a missing or unreadable one: CheckpointError."""
    directory = Path(directory)
    where = where or str(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{where}: no such directory; give a Marian model directory "
                              "(config.json, model.safetensors, source.spm, ...) or a Hub id")
    config = _json(directory / CONFIG, where, needed=True)
    weights = next((directory / n for n in (SAFETENSORS, TORCH_BIN)
                    if (directory / n).is_file()), None)
    if weights is None:
        raise CheckpointError(f"{where}: no {SAFETENSORS} or {TORCH_BIN}; the weights are "
                              "missing")
    tokenizer_config = _json(directory / TOKENIZER_CONFIG, where)
    names = TOKENIZER_FILES + ((TARGET_VOCAB,) if tokenizer_config.get("separate_vocabs")
                               or (directory / TARGET_VOCAB).is_file() else ())
    files = {}
    for name in names:
        try:
            files[name] = (directory / name).read_bytes()
        except OSError as e:
            raise CheckpointError(f"{where}: {name}: {e.strerror or e}; a Marian model "
                                  f"directory holds {', '.join(names)}") from None
    return MarianFiles(where, config, weights, files, tokenizer_config,
                       _json(directory / GENERATION, where))


def _json(path: Path, where: str, needed: bool = False) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if needed:
            raise CheckpointError(f"{where}: no {path.name}; not a Hugging Face model "
                                  "directory") from None
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"{where}: {path.name}: not readable JSON ({e})") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{where}: {path.name}: expected a JSON object")
    return value


def open_weights(path: Path, where: str) -> Weights:
    """The weights file, tensor by tensor: safetensors lazily, a pytorch_model.bin whole."""
    damaged = f"{where}: {path.name}: truncated or corrupted"
    if path.name.endswith(".safetensors"):
        safetensors = _safetensors()
        try:
            f = safetensors.safe_open(str(path), framework="pt")
            names = list(f.keys())
        except Exception as e:  # its Rust errors are of one type per cause, none exported
            raise CheckpointError(f"{damaged} ({str(e).splitlines()[0]})") from None

        def get(name: str) -> torch.Tensor:
            try:
                return f.get_tensor(name)
            except Exception as e:
                raise CheckpointError(f"{damaged} ({name}: {str(e).splitlines()[0]})") from None
        return Weights(get, names, where)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # malformed input makes torch.load raise many kinds
        raise CheckpointError(f"{damaged} or not a tensor file ({str(e).splitlines()[0]})"
                              ) from None
    if not isinstance(state, dict) or not all(isinstance(t, torch.Tensor)
                                              for t in state.values()):
        raise CheckpointError(f"{where}: {path.name}: not a state dict of tensors")
    return Weights(state.pop, list(state), where)


def _safetensors():
    try:
        import safetensors.torch  # noqa: F401
    except ImportError:
        raise ConfigError("reading and writing Hugging Face weights needs safetensors: "
                          "pip install 'mt[hf]'") from None
    import safetensors
    return safetensors


def write_model(dest: Path, config: dict, weights: dict[str, torch.Tensor],
                tokenizer_files: dict[str, bytes], tokenizer_config: dict,
                generation: dict) -> None:
    """A Marian model directory in dest (new and empty), as save_pretrained writes one."""
    safetensors = _safetensors()
    dest = Path(dest)
    safetensors.torch.save_file(weights, str(dest / SAFETENSORS), metadata={"format": "pt"})
    for name, value in ((CONFIG, config), (GENERATION, generation),
                        (TOKENIZER_CONFIG, tokenizer_config)):
        (dest / name).write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    for name, data in tokenizer_files.items():
        (dest / name).write_bytes(data)


# --- the Hub -----------------------------------------------------------------------------

OPTIONAL = (GENERATION, TOKENIZER_CONFIG, TARGET_VOCAB)


def endpoint() -> str:
    """The Hub's address: $HF_ENDPOINT (a mirror), else huggingface.co."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def fetch(repo: str, revision: str, cache: Path,
          progress: Callable[[str], None] = lambda name: None) -> Path:
    """The model `repo` (owner/name) at `revision`, downloaded into cache/owner/name/revision
    through the Hub's file URLs ({endpoint}/{repo}/resolve/{revision}/{file}); files already
    there are kept. No network, no such model, or a file cut short: CheckpointError; a
    revision that is not one plain name (`..`, `a/b`): mt.download.UnsafePath, before
    anything is written."""
    dest = inside(Path(cache), *repo.split("/"), revision)
    dest.mkdir(parents=True, exist_ok=True)
    for name in (CONFIG, *TOKENIZER_FILES, *OPTIONAL):
        _download(repo, revision, name, dest, optional=name in OPTIONAL, progress=progress)
    if not (_download(repo, revision, SAFETENSORS, dest, optional=True, progress=progress)
            or _download(repo, revision, TORCH_BIN, dest, optional=True, progress=progress)):
        raise CheckpointError(f"{repo}: the Hub has neither {SAFETENSORS} nor {TORCH_BIN} "
                              "for it; is it a MarianMTModel?")
    return dest


def _download(repo: str, revision: str, name: str, dest: Path, optional: bool,
              progress: Callable[[str], None]) -> bool:
    """One file into dest (whole or not at all: mt.download); False if the Hub has no such
    file and it is optional."""
    if (dest / name).is_file():
        return True
    if (dest / f"{name}.absent").is_file():
        return False
    quoted = "/".join(urllib.parse.quote(part) for part in (*repo.split("/"), "resolve",
                                                            revision, name))
    token = os.environ.get("HF_TOKEN")
    progress(name)
    try:
        download(f"{endpoint()}/{quoted}", dest / name,
                 {"Authorization": f"Bearer {token}"} if token else {})
    except DownloadError as e:
        if e.status == 404 and optional:
            (dest / f"{name}.absent").touch()
            return False
        if e.status in (401, 403, 404):
            raise CheckpointError(f"{repo}: {name}: the Hub answers {e}; check the model's "
                                  "name (owner/name) and revision, and HF_TOKEN for a private "
                                  "one") from None
        if e.status or not e.reached:
            raise CheckpointError(
                f"{repo}: cannot reach the Hugging Face Hub at {endpoint()} ({e}); on a "
                f"machine without network, download the model where there is one (e.g. `hf "
                f"download {repo} --local-dir DIR`), copy DIR here and give `mt import hf "
                "DIR`") from None
        raise CheckpointError(f"{repo}: {name}: {e}") from None
    return True
