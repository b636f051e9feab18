"""mt/commands/tokenize.py: `mt tokenize`'s paths are checked before any work, as translate's
are (mt.commands.output); its output through a run's tokenizer is in test_pipeline_subword.py
and test_checkpoint_open.py."""

from __future__ import annotations

from conftest import assert_user_error, leftovers


def test_output_path_is_checked_before_the_tokenizer_is_loaded(cli, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("A father-figure (off-screen).\n")
    missing = tmp_path / "nowhere" / "out.txt"
    for run in (["--lang", "en"], [tmp_path / "no-run"]):  # no run there: not even looked for
        r = cli("tokenize", *run, "-i", src, "-o", missing)
        assert_user_error(r, 4, str(missing), f"output directory {missing.parent} does not "
                          "exist")
    directory = tmp_path / "out"
    directory.mkdir()
    r = cli("tokenize", "--lang", "en", "-i", src, "-o", directory)
    assert_user_error(r, 4, str(directory), "is a directory", "give a file name")
    assert list(directory.iterdir()) == [] and not missing.parent.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out"]


def test_input_path_is_checked_before_the_tokenizer_is_loaded(cli, tmp_path):
    out = tmp_path / "out.txt"
    for src, needle in ((tmp_path / "none.txt", "not found"), (tmp_path, "is a directory")):
        r = cli("tokenize", tmp_path / "no-run", "-i", src, "-o", out)
        assert_user_error(r, 4, str(src), needle)
    assert not out.exists() and leftovers(tmp_path) == []
    r = cli("tokenize", "--lang", "en", "-i", tmp_path / "none.txt")
    assert_user_error(r, 4, "none.txt", "not found")
    assert r.out == ""
