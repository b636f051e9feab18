"""mt/serve/__init__.py: the serve extra (FastAPI, uvicorn, fastapi-offline,
python-multipart, Babel, py3langid), named in one line when it is missing; and the page
(mt/serve/page.html) ships with the package.

The package's modules have their own files: test_serve_batcher.py, test_serve_app.py and
test_serve_server.py; `mt serve` itself, test_commands_serve.py."""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT, assert_user_error


@pytest.mark.parametrize("module", ["fastapi", "fastapi_offline", "uvicorn",
                                    "python_multipart", "babel", "py3langid"])
def test_without_the_extra_one_line_names_it(cli, monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    assert_user_error(cli("serve", "no-such-run"), 3, 'pip install "mt[serve]"')


def test_the_page_ships_with_the_package():
    from importlib import resources

    assert "<canvas" in resources.files("mt.serve").joinpath("page.html").read_text("utf-8")
    assert '"mt.serve" = ["page.html"]' in (ROOT / "pyproject.toml").read_text("utf-8")
