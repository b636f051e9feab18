"""`mt data gettext`: catalogues compiled here by msgfmt from PO text the tests write, read back
by msgunfmt, split by whole package; and once the machine's own German catalogues."""

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import assert_user_error, snapshot
from mt.corpora import software
from mt.errors import DataError

needs_gettext = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("msgfmt", "msgunfmt", "msgconv")),
    reason="needs GNU gettext (apt-get install gettext)")
REAL_DE = Path("/usr/share/locale/de/LC_MESSAGES")
HEADER = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n{plural}\n'
GERMAN = '"Plural-Forms: nplurals=2; plural=(n != 1);\\n"'


def sha1_split(package: str) -> str:
    """The documented rule, written out again: the SHA-1 of the name without its digits (nor
    the separator before them) mod 20."""
    stem = re.sub(r"[-_.]?[0-9]+", "", package.lower())
    bucket = int(hashlib.sha1(stem.encode()).hexdigest(), 16) % 20
    return {0: "test", 1: "val"}.get(bucket, "train")


# Each split gets a package by the rule (checked by test_the_packages_fall_where_the_rule_says).
PACKAGES = {"coreutils": "train", "git": "train", "procps-ng": "val", "grep": "test"}


def catalogue(lc: Path, package: str, entries: str, plural: str = GERMAN,
              charset: str = "UTF-8") -> Path:
    """lc/package.mo, compiled by msgfmt from a header and the PO entries given."""
    po = lc / f"{package}.po.src"
    text = HEADER.format(plural=plural).replace("UTF-8", charset) + entries
    po.write_bytes(text.encode("utf-8" if charset == "UTF-8" else charset))
    subprocess.run(["msgfmt", "-o", str(lc / f"{package}.mo"), str(po)], check=True)
    po.unlink()
    return lc / f"{package}.mo"


def locale(root: Path) -> Path:
    """root/de/LC_MESSAGES with a catalogue per PACKAGES entry: a shared string, one the
    package alone has, a plural entry, and (coreutils) a string with a line break and a tab."""
    lc = root / "de" / "LC_MESSAGES"
    lc.mkdir(parents=True)
    for package in PACKAGES:
        catalogue(lc, package, (
            'msgid "Cancel"\nmsgstr "Abbrechen"\n\n'
            f'msgid "only in {package}: %s"\nmsgstr "nur in {package}: %s"\n\n'
            f'msgid "one {package} file"\nmsgid_plural "%d {package} files"\n'
            f'msgstr[0] "eine {package}-Datei"\nmsgstr[1] "%d {package}-Dateien"\n\n'
            + ('msgid "Usage:\\n\\tcp SRC DEST"\nmsgstr "Aufruf:\\n\\tcp QUELLE ZIEL"\n\n'
               if package == "coreutils" else "")))
    return root


def test_the_packages_fall_where_the_rule_says():
    for package, split in PACKAGES.items():
        assert software.split_of(package) == sha1_split(package) == split
    for name in ("gtk20", "gtk30", "iso_639-3", "iso_639_3", "libpq5-15", "pg_dump-15", "xz"):
        assert software.split_of(name) == sha1_split(name)
    assert software.family("gtk20") == software.family("gtk30") == "gtk"
    assert software.family("gtk30-properties") == "gtk-properties"


@pytest.mark.parametrize("text", ["plain", "a\nb", "tab\there", "C:\\new\\table", "\\n is not a "
                                  "line feed\n", "\r\n", "", "%s\\\\%d", "argp\vhelp", "\f\x1c\x85",
                                  "\u2028 and \\u2028", "\\u00e9 \\x41 \\"])
def test_escape_makes_one_line_and_unescape_restores_it(text):
    line = software.escape(text)
    assert line.splitlines() == ([line] if line else []) and "\t" not in line
    assert software.unescape(line) == text


def test_read_po_pairs_keeps_translated_entries_and_counts_the_rest():
    po = HEADER.format(plural=GERMAN) + (
        'msgid "Open"\nmsgstr "Öffnen"\n\n'
        '#, fuzzy\nmsgid "Close"\nmsgstr "Schließen"\n\n'
        'msgid "Save"\nmsgstr ""\n\n'
        '#~ msgid "Old"\n#~ msgstr "Alt"\n\n'
        'msgctxt "menu"\nmsgid "Open"\nmsgstr "Öffnen (Menü)"\n\n'
        'msgid "%d file"\nmsgid_plural "%d files"\nmsgstr[0] "%d Datei"\nmsgstr[1] "%d Dateien"\n')
    pairs, left_out = software.read_po_pairs(po, "x.po")
    assert pairs == [("Open", "Öffnen"), ("Open", "Öffnen (Menü)"), ("%d file", "%d Datei"),
                     ("%d files", "%d Dateien")]
    assert left_out == {"fuzzy": 1, "untranslated": 1, "obsolete": 1}


def test_a_language_of_three_forms_pairs_the_plural_with_the_form_most_counts_take():
    russian = '"Plural-Forms: nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && ' \
              'n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);\\n"'
    po = HEADER.format(plural=russian) + (
        'msgid "%d file"\nmsgid_plural "%d files"\n'
        'msgstr[0] "%d файл"\nmsgstr[1] "%d файла"\nmsgstr[2] "%d файлов"\n')
    pairs, left_out = software.read_po_pairs(po, "ru.po")
    assert pairs == [("%d file", "%d файл"), ("%d files", "%d файлов")] and not left_out


def test_a_po_syntax_error_names_the_file_and_line():
    with pytest.raises(DataError, match=r"broken.po:3: PO syntax error"):
        software.read_po_pairs('msgid "a"\nmsgstr "b"\nnonsense here\n', "broken.po")


def test_placeholders_are_the_printf_directives_of_an_entry_without_flags():
    found = software.placeholders("%s and %d, %s, %<PRIu64> %% %5.2f")
    assert found == {"%s": 2, "%d": 1, "%<PRIu64>": 1, "%%": 1, "%5.2f": 1}
    assert not software.placeholders("100% sure")


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@needs_gettext
def test_mt_data_gettext_splits_by_package(cli, tmp_path):
    out = tmp_path / "sw"
    r = cli("data", "gettext", "--tgt", "de", "--from", str(locale(tmp_path / "locale")),
            "--out", str(out))
    assert r.code == 0, r.err
    summary = json.loads(r.out)
    manifest = json.loads((out / "manifest.json").read_text())
    for package, split in PACKAGES.items():
        assert (out / split / f"{package}.po").is_file()
        assert manifest["packages"][package]["split"] == split
        assert package in manifest["splits"][split]["packages"]
    pairs = {s: list(zip(lines(out / f"{s}.en"), lines(out / f"{s}.de"))) for s in software.SPLITS}
    assert {s: len(p) for s, p in pairs.items()} == \
        {s: summary["splits"][s]["pairs"] for s in software.SPLITS}
    # a package's strings are in its split alone; train's shared "Cancel" is kept once
    assert ("only in grep: %s", "nur in grep: %s") in pairs["test"]
    assert not any("grep" in s for s, _ in pairs["train"] + pairs["val"])
    assert pairs["train"].count(("Cancel", "Abbrechen")) == 1
    assert manifest["splits"]["train"]["duplicates_dropped"] == 1
    assert ("%d procps-ng files", "%d procps-ng-Dateien") in pairs["val"]
    assert manifest["splits"]["test"]["msgid_in_train"] == pytest.approx(1 / 4)  # "Cancel"
    escaped = [p for p in pairs["train"] if p[0].startswith("Usage:")]
    assert escaped == [("Usage:\\n\\tcp SRC DEST", "Aufruf:\\n\\tcp QUELLE ZIEL")]
    assert software.unescape(escaped[0][1]) == "Aufruf:\n\tcp QUELLE ZIEL"


@needs_gettext
def test_the_split_po_files_pass_msgfmt_check(cli, tmp_path):
    out = tmp_path / "sw"
    assert cli("data", "gettext", "--tgt", "de", "--from", str(locale(tmp_path / "l")),
               "--out", str(out)).code == 0
    for po in sorted(out.glob("*/*.po")):
        done = subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", "/dev/null", str(po)],
                              capture_output=True, text=True)
        assert done.returncode == 0, (po, done.stderr)


@needs_gettext
def test_a_latin1_catalogue_comes_out_in_utf8(cli, tmp_path):
    root = locale(tmp_path / "locale")
    catalogue(root / "de" / "LC_MESSAGES", "tar", 'msgid "Size"\nmsgstr "Größe"\n\n',
              charset="ISO-8859-1")
    out = tmp_path / "sw"
    assert cli("data", "gettext", "--tgt", "de", "--from", str(root), "--out", str(out)).code == 0
    assert "Größe" in lines(out / f"{software.split_of('tar')}.de")
    assert "charset=UTF-8" in (out / software.split_of("tar") / "tar.po").read_text()


@needs_gettext
def test_a_file_that_is_not_a_catalogue_stops_it_with_nothing_written(cli, tmp_path):
    root = locale(tmp_path / "locale")
    (root / "de" / "LC_MESSAGES" / "broken.mo").write_text('msgid "a"\nmsgstr "b"\n')
    out = tmp_path / "sw"
    out.mkdir()
    before = snapshot(out)
    r = cli("data", "gettext", "--tgt", "de", "--from", str(root), "--out", str(out))
    assert_user_error(r, 4, "broken.mo", "msgunfmt cannot read it")
    assert snapshot(out) == before


def test_no_catalogues_is_a_data_error(cli, tmp_path):
    r = cli("data", "gettext", "--tgt", "xx", "--from", str(tmp_path), "--out", str(tmp_path / "o"))
    assert_user_error(r, 4, "xx/LC_MESSAGES: not found", "--from")
    assert not (tmp_path / "o").exists()


@needs_gettext
def test_too_few_packages_to_split_is_a_data_error(cli, tmp_path):
    lc = tmp_path / "de" / "LC_MESSAGES"
    lc.mkdir(parents=True)
    catalogue(lc, "coreutils", 'msgid "Cancel"\nmsgstr "Abbrechen"\n')
    r = cli("data", "gettext", "--tgt", "de", "--from", str(tmp_path), "--out", str(tmp_path / "o"))
    assert_user_error(r, 4, "no package with translations falls in val", "coreutils")
    assert not (tmp_path / "o").exists()


def test_without_gettext_it_says_what_to_install(cli, tmp_path, monkeypatch):
    lc = tmp_path / "de" / "LC_MESSAGES"
    lc.mkdir(parents=True)
    (lc / "x.mo").write_bytes(b"\xde\x12\x04\x95")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    r = cli("data", "gettext", "--tgt", "de", "--from", str(tmp_path), "--out", str(tmp_path / "o"))
    assert_user_error(r, 3, "msgunfmt", "install gettext")


@needs_gettext
@pytest.mark.slow  # reads the 94 catalogues of a Debian machine (about 10 s)
@pytest.mark.skipif(not REAL_DE.is_dir() or not any(REAL_DE.glob("*.mo")),
                    reason=f"no German catalogues in {REAL_DE}")
def test_the_machines_german_catalogues(cli, tmp_path):
    r = cli("data", "gettext", "--tgt", "de", "--out", str(tmp_path / "sw"))
    assert r.code == 0, r.err
    manifest = json.loads((tmp_path / "sw" / "manifest.json").read_text())
    listed = [p for s in software.SPLITS for p in manifest["splits"][s]["packages"]]
    assert sorted(listed) == sorted(p.stem for p in REAL_DE.glob("*.mo"))  # each in one split
    for package, about in manifest["packages"].items():
        assert about["split"] == sha1_split(package)
    for split in software.SPLITS:
        assert len(lines(tmp_path / "sw" / f"{split}.en")) == manifest["splits"][split]["pairs"] > 0
