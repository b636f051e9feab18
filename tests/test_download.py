"""mt/download.py: a file whole or not at all. A cut connection is resumed with a Range request
(or started over where the server ignores ranges, or the range is past the end); the bytes of a
cut that persists wait in a hidden .part for the next call; a refusal says its status, silence
that the server was not reached."""

from __future__ import annotations

import pytest

from loopback import FileServer
from mt import download as dl
from mt.download import DownloadError, download, partial

DATA = bytes(range(256)) * 1000


@pytest.mark.parametrize("ranges", [True, False])
def test_a_cut_is_resumed_or_started_over_within_one_call(tmp_path, ranges):
    with FileServer({"/f": DATA}, cut=["/f"], cuts=2, ranges=ranges) as server:
        assert download(server.url + "/f", tmp_path / "f").read_bytes() == DATA
    second = len(DATA) * 3 // 4 if ranges else len(DATA) // 2  # 200 OK: the whole again
    assert [r for _, r in server.requests] == [None, f"bytes={len(DATA) // 2}-",
                                               f"bytes={second}-"]
    assert not partial(tmp_path / "f").exists()


def test_a_cut_that_persists_keeps_its_bytes_for_the_next_call(tmp_path):
    target = tmp_path / "sub" / "f"
    with FileServer({"/f": DATA}, cut=["/f"]) as server:
        with pytest.raises(DownloadError, match="cut 3 times, last at 224,000 bytes"):
            download(server.url + "/f", target)
    assert not target.exists() and partial(target).read_bytes() == DATA[:224_000]
    with FileServer({"/f": DATA}) as server:
        assert download(server.url + "/f", target).read_bytes() == DATA
    assert server.ranged() == ["bytes=224000-"]


def test_a_part_longer_than_the_file_starts_over(tmp_path):
    partial(tmp_path / "f").write_bytes(b"x" * (len(DATA) + 10))  # the file changed upstream
    with FileServer({"/f": DATA}) as server:
        assert download(server.url + "/f", tmp_path / "f").read_bytes() == DATA
    assert [r for _, r in server.requests] == [f"bytes={len(DATA) + 10}-", None]


def test_refusals_and_silence(tmp_path, monkeypatch):
    with FileServer({}) as server:
        with pytest.raises(DownloadError, match="HTTP 404 Not Found") as e:
            download(server.url + "/f", tmp_path / "f")
    assert (e.value.status, e.value.reached) == (404, True)
    monkeypatch.setattr(dl, "TIMEOUT", 0.3)
    with FileServer({"/f": DATA}, silent=True) as server:
        with pytest.raises(DownloadError, match="timed out") as e:
            download(server.url + "/f", tmp_path / "f")
    assert (e.value.status, e.value.reached) == (None, False)
    assert not list(tmp_path.iterdir())
