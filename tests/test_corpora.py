import gzip
import shutil

import pytest

from conftest import MULTI30K, assert_user_error, run_mt

needs_multi30k = pytest.mark.skipif(not MULTI30K.is_dir(), reason="needs ../shared/data/multi30k")


@needs_multi30k
def test_multi30k_copied_from_local_dir_with_counts_checked(tmp_path):
    r = run_mt("data", "multi30k", "--from", str(MULTI30K), "--dest", str(tmp_path / "m"))
    assert r.code == 0, r.err
    for split, n in (("train", 29000), ("val", 1014), ("test_2016_flickr", 1000)):
        for lang in ("de", "en"):
            with gzip.open(tmp_path / "m" / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
                assert sum(1 for _ in f) == n
            assert f"{split}.{lang}.gz: {n} lines" in r.err


@needs_multi30k
def test_multi30k_wrong_line_count_is_an_error(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(MULTI30K, src)
    with gzip.open(src / "val.en.gz", "wt", encoding="utf-8") as f:
        f.write("only one line\n")
    r = run_mt("data", "multi30k", "--from", str(src), "--dest", str(tmp_path / "m"))
    assert_user_error(r, 4, "val.en.gz", "1 lines, expected 1014")


def test_multi30k_missing_source_dir(tmp_path):
    r = run_mt("data", "multi30k", "--from", str(tmp_path / "none"), "--dest", str(tmp_path / "m"))
    assert_user_error(r, 4, "not found")
