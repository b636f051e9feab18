"""Public corpora's hosts on loopback, for the tests of `mt data opus` and `mt data sacrebleu`
(and docs/data.md's walkthrough): files built here in the layouts the real services publish.

- OPUS: the API's answers as opustools' opus_get reads them (Helsinki-NLP/OpusTools,
  opustools/opus_get.py: GET https://opus.nlpl.eu/opusapi?source=..&target=..&corpus=..
  &version=..&preprocessing=.. answers {"corpora": [records]}), each record with the fields of
  opustools' copy of the API's table (opustools/opusdata.db: alignment_pairs, corpus,
  documents, id, latest, preprocessing, size in KiB, source, source_tokens, target,
  target_tokens, url, version), the pair in alphabetical order, and records of other forms
  (xml, smt) beside the one asked for; a Moses zip as OPUS publishes it
  (OPUS-{Corpus}/{version}/moses/de-en.txt.zip holding {Corpus}.de-en.de, {Corpus}.de-en.en,
  {Corpus}.de-en.xml, README, LICENSE); a gzipped TMX (.../tmx/de-en.tmx.gz: <tu> units of
  <tuv xml:lang>).
- sacreBLEU: tarballs in the layouts its table describes (sacrebleu/dataset/__init__.py,
  DATASETS: wmt19 is https://data.statmt.org/wmt19/translation-task/test.tgz with an MD5,
  holding sgm/newstest2019-deen-src.de.sgm and sgm/newstest2019-deen-ref.en.sgm in WMT's
  SGML-like format, read by sacrebleu/dataset/fake_sgml.py); FLORES-200's tarball holds
  flores200_dataset/{dev,devtest}/{code}.{split} (facebookresearch/flores, flores200/README).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import zipfile

from loopback import FileServer
from mt.corpora.opus import FORMS

CORPUS, VERSION = "News-Commentary", "v16"
README = b" Corpus Name: News-Commentary\n     Release: v16\n\nPlease cite ... (LREC 2012)\n"
LICENSE = b"The data set comes with the same license\nas the original sources.\n"


def moses_zip(de: list[str], en: list[str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{CORPUS}.de-en.de", "".join(line + "\n" for line in de))
        z.writestr(f"{CORPUS}.de-en.en", "".join(line + "\n" for line in en))
        z.writestr(f"{CORPUS}.de-en.xml", "<cesAlign/>\n")
        z.writestr("README", README)
        z.writestr("LICENSE", LICENSE)
    return out.getvalue()


def tmx_gz(de: list[str], en: list[str]) -> bytes:
    """A TMX of the pairs, then a unit with German alone and one whose segments break lines."""
    def escaped(text: str) -> str:
        return text.replace("&", "&amp;").replace("<", "&lt;")

    units = "".join(f'    <tu>\n      <tuv xml:lang="de"><seg>{escaped(d)}</seg></tuv>\n'
                    f'      <tuv xml:lang="en"><seg>{escaped(e)}</seg></tuv>\n    </tu>\n'
                    for d, e in zip(de, en))
    units += '    <tu>\n      <tuv xml:lang="de"><seg>nur deutsch</seg></tuv>\n    </tu>\n'
    units += ('    <tu>\n      <tuv xml:lang="de"><seg>zwei\nZeilen</seg></tuv>\n'
              '      <tuv xml:lang="en"><seg>two\nlines</seg></tuv>\n    </tu>\n')
    text = ('<?xml version="1.0" encoding="utf-8"?>\n<tmx version="1.4">\n<header '
            'creationdate="Fri Nov 11 12:00:00 2022" srclang="de" adminlang="en" '
            'o-tmf="unknown" segtype="sentence" creationtool="Uplug" '
            'creationtoolversion="unknown" datatype="PlainText" />\n  <body>\n'
            f'{units}  </body>\n</tmx>\n')
    return gzip.compress(text.encode("utf-8"))


class OpusServer(FileServer):
    """The API at /opusapi, and News-Commentary v16 de-en's files at /OPUS-..., which has it
    and Europarl for de-en and nothing else. moses, tmx: the archives' bytes; size_kib: what
    the API lists as their size (default: theirs); cut: forms whose file is cut."""

    def __init__(self, moses: bytes, tmx: bytes = b"", size_kib: int | None = None,
                 cut: tuple[str, ...] = (), **misbehave):
        self.archives = {"moses": moses, "tmx": tmx}
        self.size_kib, self.queries = size_kib, []
        files = {"/opusapi": self.api, **{self.path(f): data for f, data in self.archives.items()}}
        super().__init__(files, cut=[self.path(form) for form in cut], **misbehave)

    @staticmethod
    def path(form: str) -> str:
        return f"/OPUS-{CORPUS}/{VERSION}/{form}/de-en{FORMS.get(form, '.xml.gz')}"

    def record(self, form: str, corpus: str = CORPUS, pairs: int = 294498) -> dict:
        size = len(self.archives.get(form, b""))
        return {"alignment_pairs": pairs, "corpus": corpus, "documents": "", "id": 266109,
                "latest": "True", "preprocessing": form,
                "size": self.size_kib if self.size_kib is not None else round(size / 1024),
                "source": "de", "source_tokens": 6233841, "target": "en",
                "target_tokens": 6393149, "url": self.url + self.path(form), "version": VERSION}

    def api(self, query: dict) -> bytes:
        self.queries.append(query)
        records = []
        if (query.get("source"), query.get("target")) == ("de", "en"):
            for corpus, pairs in ((CORPUS, 294498), ("Europarl", 1961119)):
                if query.get("corpus", corpus) == corpus and query.get("version") in (
                        "latest", VERSION):
                    records += [self.record(form, corpus, pairs)
                                for form in (query.get("preprocessing"), "xml")]
        smt = {**self.record("moses"), "preprocessing": "smt", "url": self.url + "/x/de-en.zip"}
        return json.dumps({"corpora": records + [smt] * bool(records)}).encode()


def tarball(files: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def wmt_tarball(name: str, pairs: dict[str, tuple[list[str], list[str]]]) -> bytes:
    """A WMT test set's tarball (sacreBLEU's FakeSGML kind) at the paths sacreBLEU's table
    gives, holding for each language pair its (sources, references)."""
    from sacrebleu.dataset import DATASETS

    files = {}
    for pair, sides in pairs.items():
        for path, lines, role in zip(DATASETS[name].langpairs[pair], sides, ("src", "ref")):
            files[path] = sgml(lines, role, pair.split("-")[role == "ref"])
    return tarball(files)


def sgml(lines: list[str], role: str, lang: str) -> str:
    # "fake" SGML: the text as it is, "&" and all (sacreBLEU reads it with a regex)
    segs = "".join(f'<seg id="{i}">{line}</seg>\n' for i, line in enumerate(lines, 1))
    kind = "srcset" if role == "src" else "refset"
    return (f'<{kind} setid="newstest" srclang="any" trglang="{lang}">\n'
            f'<doc sysid="{role}" docid="abcnews.306815" genre="news" origlang="de">\n'
            f"<p>\n{segs}</p>\n</doc>\n</{kind}>\n")


def flores_tgz(devtest: int = 1012) -> bytes:
    files = {}
    for split, n in (("dev", 997), ("devtest", devtest)):
        for code in ("eng_Latn", "deu_Latn", "fra_Latn"):
            files[f"flores200_dataset/{split}/{code}.{split}"] = "".join(
                f"{code} {split} sentence {i}.\n" for i in range(n))
    return tarball(files)


def url_path(name: str) -> str:
    """Where a test set's tarball is served: its real URL's path."""
    from urllib.parse import urlsplit

    from sacrebleu.dataset import DATASETS

    return urlsplit(DATASETS[name].data[0]).path


def host_test_sets(monkeypatch, server: FileServer, md5s: dict[str, str]) -> None:
    """Point sacreBLEU's entries for the test sets named in md5s (name -> its tarball's MD5;
    the tarball served at url_path(name)) at server, and FLORES-200 at /nllb/..."""
    from sacrebleu.dataset import DATASETS

    from mt.corpora import testsets

    for name, md5 in md5s.items():
        real = DATASETS[name]
        monkeypatch.setitem(DATASETS, name, type(real)(
            name, data=[server.url + url_path(name)], md5=[md5], description=real.description,
            citation=real.citation, langpairs=real.langpairs))
    monkeypatch.setattr(testsets, "FLORES_URL", server.url + "/nllb/flores200_dataset.tar.gz")


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()
