"""mt.memory in PostgreSQL: the same behaviour as SQLite's, against a real server this test
starts (initdb into a temporary directory, a unix socket there, no TCP), skipped where the
PostgreSQL binaries or psycopg are missing."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from mt.errors import DataError


def binaries() -> Path | None:
    found = shutil.which("initdb") or next(iter(sorted(glob.glob(
        "/usr/lib/postgresql/*/bin/initdb"))), None)
    return Path(os.path.realpath(found)).parent if found else None


pytestmark = pytest.mark.slow  # starts a PostgreSQL server

@pytest.fixture(scope="module")
def url():
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'mt[memory-pg]')")
    bin_dir = binaries()
    if bin_dir is None:
        pytest.skip("the PostgreSQL binaries (initdb, postgres) are not installed")
    root = Path(tempfile.mkdtemp(prefix="mt-pg-"))
    # PostgreSQL refuses to run as root: as root, the server runs as nobody, in a folder of its own
    user = {"user": "nobody", "group": "nogroup"} if os.geteuid() == 0 else {}
    if user:
        shutil.chown(root, "nobody", "nogroup")
    subprocess.run([bin_dir / "initdb", "-D", root / "data", "-A", "trust", "-U", "mt",
                    "--no-sync"], check=True, capture_output=True, **user)
    server = subprocess.Popen([bin_dir / "postgres", "-D", root / "data", "-k", root, "-c",
                               "listen_addresses=", "-c", "fsync=off", "-p", "5433"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **user)
    for _ in range(300):
        if (root / ".s.PGSQL.5433").exists() or server.poll() is not None:
            break
        time.sleep(0.1)
    if server.poll() is not None:
        pytest.fail(f"postgres did not start: {server.stderr.read().decode()}")
    yield f"postgresql://mt@/postgres?host={root}&port=5433"
    server.terminate()
    server.wait(timeout=60)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def memory(url):
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:  # each test its own, empty memory
        for table in ("pairs", "vocab", "meta"):
            db.execute(f"DROP TABLE IF EXISTS mt_memory_{table}")
    from mt.memory import open_memory

    m = open_memory(url, ("en", "de"))
    yield m
    m.close()


def test_search_is_sqlites(memory, tmp_path):
    from mt.memory import open_memory

    pairs = [("Save the file", "Datei speichern"), ("Open the file", "Datei öffnen"),
             ("Close the window", "Fenster schließen"), ("Save the file", "Datei speichern")]
    assert memory.add(pairs) == (3, 1)
    with open_memory(tmp_path / "m.db", ("en", "de")) as lite:
        lite.add(pairs)
        for query in ("save the FILE", "the window", "Open file", "zebra"):
            assert memory.search(query) == lite.search(query)
    assert memory.search("Save the file", k=1)[0].score == 100.0
    assert list(memory.pairs()) == [*pairs[1:3], pairs[0]]  # added again: the latest
    assert memory.info()["pairs"] == 3 and memory.info()["store"] == "postgresql"


def test_a_pair_added_again_is_the_latest(memory):
    """X, then Y, then X again: the exact lookup answers X, as SQLite's does."""
    assert memory.add([("Save the file", "Datei speichern")]) == (1, 0)
    assert memory.add([("Save the file", "Die Datei speichern")]) == (1, 0)
    assert memory.add([("Save the file", "Datei speichern")]) == (0, 1)
    assert [m.target for m in memory.search("Save the file", k=2)] == [
        "Datei speichern", "Die Datei speichern"]
    assert memory.info()["pairs"] == 2


def test_another_pair_and_no_memory_are_refused(memory, url):
    from mt.memory import open_memory

    memory.close()
    with pytest.raises(DataError, match="a en-de memory; these pairs are en-fr"):
        open_memory(url, ("en", "fr"))
    with pytest.raises(DataError, match="cannot connect"):
        open_memory(url.replace("port=5433", "port=5439"))


def test_the_commands_take_a_url(cli, memory, url, tmp_path):
    (tmp_path / "a.tsv").write_text("Save the file\tDatei speichern\n", encoding="utf-8")
    assert cli("memory", "add", url, tmp_path / "a.tsv", "--src", "en", "--tgt", "de").code == 0
    r = cli("memory", "search", url, "Save the file", "--json")
    assert '"score": 100.0' in r.out, r.err
