"""mt/commands/output.py on its own: input and output paths refused before any work, with the
error each command then reports, and an output file that appears only when complete. Through
the commands: test_commands_translate.py, test_commands_evaluate.py, test_commands_tokenize.py."""

import pytest

from mt.commands.output import check_input_path, check_output_path, write_output
from mt.errors import DataError


def test_paths_that_cannot_work_are_refused_and_dash_is_the_standard_stream(tmp_path):
    check_input_path("-")
    check_output_path("-")
    with pytest.raises(DataError, match="is a directory, expected a text file"):
        check_input_path(str(tmp_path))
    with pytest.raises(DataError, match="input file not found"):
        check_input_path(str(tmp_path / "none.txt"))
    with pytest.raises(DataError, match="is a directory; give a file name"):
        check_output_path(str(tmp_path))
    with pytest.raises(DataError, match=f"output directory {tmp_path / 'no'} does not exist"):
        check_output_path(str(tmp_path / "no" / "out.txt"))
    check_output_path(str(tmp_path / "out.txt"))
    assert list(tmp_path.iterdir()) == []  # checking writes nothing


def test_an_output_file_is_replaced_only_when_its_writing_completes(tmp_path, capfd):
    out = tmp_path / "out.txt"
    out.write_text("old\n")

    def fails(f):
        f.write("half\n")
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError):
        write_output(str(out), fails)
    assert out.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    write_output(str(out), lambda f: f.write("new\u2028line\n"))
    assert out.read_bytes() == "new\u2028line\n".encode()
    write_output("-", lambda f: f.write("to stdout\n"))
    assert capfd.readouterr().out == "to stdout\n"


def test_an_error_while_writing_to_stdout_leaves_it_open(capfd):
    def fails(f):
        f.write("half\n")
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError):
        write_output("-", fails)
    import gc

    gc.collect()  # the wrapper written through is gone
    write_output("-", lambda f: f.write("still open\n"))
    assert capfd.readouterr().out == "half\nstill open\n"
