"""The glossaries that DeepL's API creates on a server (POST /v2/glossaries), kept for the
pair they were made for and used as mt's glossaries (mt.glossary): one JSON file each in
`mt serve --state-dir DIR`/glossaries, written atomically (a crash leaves the old state or the
new, never half a glossary), so that they survive a restart; without --state-dir, in memory.

A glossary belongs to the API key that made it (a hash of it in its file): another key's
client neither lists, reads, uses nor deletes it. Without keys, every client shares them.
"""

from __future__ import annotations

import csv
import hashlib
import json
import threading
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from mt.errors import DataError, FileSystemError, os_error_message
from mt.glossary import Glossary
from mt.serve.access import ClientError
from mt.textio import atomic_write

MAX_ENTRIES = 100_000  # DeepL's own bound on a glossary's entries


@dataclass
class Stored:
    """One glossary: DeepL's fields, its entries and whose it is."""

    glossary_id: str
    name: str
    source_lang: str  # lower case, as mt's pairs name languages
    target_lang: str
    creation_time: str  # ISO 8601 with microseconds, as DeepL's clients parse it
    entries: list[list[str]]
    owner: str = ""  # a hash of the key that made it; "" without keys

    def info(self) -> dict:
        """DeepL's GlossaryInfo."""
        return {"glossary_id": self.glossary_id, "name": self.name, "ready": True,
                "source_lang": self.source_lang.upper(), "target_lang": self.target_lang.upper(),
                "creation_time": self.creation_time, "entry_count": len(self.entries)}

    def glossary(self) -> Glossary:
        return Glossary.of(self.entries, f"glossary {self.glossary_id}")

    def tsv(self) -> str:
        return "".join(f"{s}\t{t}\n" for s, t in self.entries)


def owner(client: str, keyed: bool) -> str:
    return hashlib.sha256(client.encode()).hexdigest()[:32] if keyed else ""


def parse_entries(text: str, fmt: str) -> list[list[str]]:
    """DeepL's entries: `tsv` (source TAB target a line) or `csv` (source,target[,source
    language,target language]); a 400 ClientError naming the first bad line, and for what
    mt's glossaries refuse (an empty term, a source term twice)."""
    if fmt not in ("tsv", "csv"):
        raise ClientError(400, f"entries_format {fmt!r}: give tsv or csv")
    lines = text.splitlines()
    rows = csv.reader(lines) if fmt == "csv" else (line.split("\t") for line in lines)
    entries = []
    for n, row in enumerate(rows, 1):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) not in ((2, 4) if fmt == "csv" else (2,)):
            want = "source,target" if fmt == "csv" else "source TAB target"
            raise ClientError(400, f"entries line {n}: {len(row)} fields; give `{want}` a line")
        entries.append([row[0].strip(), row[1].strip()])
    if not entries or len(entries) > MAX_ENTRIES:
        raise ClientError(400, f"entries: {len(entries):,} entries; give 1 to {MAX_ENTRIES:,}")
    try:
        Glossary.of(entries, "entries")
    except DataError as e:
        raise ClientError(400, str(e)) from None
    return entries


class Glossaries:
    """The stored glossaries by id; directory None: in memory only."""

    def __init__(self, directory: Path | None = None):
        self.directory = None if directory is None else Path(directory) / "glossaries"
        self.found: dict[str, Stored] = {}
        self.lock = threading.Lock()  # routes run on the event loop, writes in threads
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            for path in sorted(self.directory.glob("*.json")):
                self.found[path.stem] = self._read(path)

    @staticmethod
    def _read(path: Path) -> Stored:
        # a state directory is the server's own: a file it cannot read is a reason to stop,
        # not to serve without the glossaries clients rely on
        try:
            return Stored(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as e:
            raise DataError(f"{path}: not a glossary this server wrote ({e}); move it "
                            "away") from None

    def add(self, name: str, source: str, target: str, entries: list[list[str]],
            whose: str) -> Stored:
        """A new glossary, on disk before it is listed (a FileSystemError, and nothing listed
        nor left on disk, if it cannot be written)."""
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        stored = Stored(str(uuid.uuid4()), name, source, target, now, entries, whose)
        if self.directory is not None:
            text = json.dumps(asdict(stored), ensure_ascii=False)
            atomic_write(self.directory / f"{stored.glossary_id}.json",
                         lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
        with self.lock:
            self.found[stored.glossary_id] = stored
        return stored

    def get(self, glossary_id: str, whose: str) -> Stored:
        """The glossary, or a 404 ClientError (another key's is not found either)."""
        stored = self.found.get(glossary_id)
        if stored is None or stored.owner != whose:
            raise ClientError(404, f"glossary {glossary_id!r} not found")
        return stored

    def mine(self, whose: str) -> list[Stored]:
        return [g for g in self.found.values() if g.owner == whose]

    def delete(self, glossary_id: str, whose: str) -> None:
        """Off the disk, then off the list: a file that cannot be removed stays listed, as it
        would come back at the next start."""
        self.get(glossary_id, whose)
        if self.directory is not None:
            path = self.directory / f"{glossary_id}.json"
            try:
                path.unlink(missing_ok=True)
            except OSError as e:
                raise FileSystemError(os_error_message(e, path)) from None
        with self.lock:
            self.found.pop(glossary_id, None)
