#!/usr/bin/env bash
# Set up, then run the linter and the whole test suite (the command CI runs). Plain
# `python -m pytest` runs only the fast tier (pyproject.toml's addopts); -m "" here selects every
# tier: slow, dist, and gpu (whose tests skip themselves without CUDA), spread over the cores
# (pytest-xdist; most tests use one core at a time). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. .venv/bin/activate
# The page's browser test (tests/test_serve_browser.py) drives Debian's Chromium and its driver:
# installed here where this user may (root, or sudo without a password); else that test skips.
# GNU gettext's msgfmt/msgunfmt: the PO tests and `mt data gettext` (skipped, saying so, without).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null \
    || ! command -v msgunfmt >/dev/null; then
  install="apt-get update -q && apt-get install -y -q chromium chromium-driver gettext"
  (bash -c "$install" || sudo -n bash -c "$install") >/dev/null 2>&1 \
    || echo "no chromium or gettext: the browser and gettext tests will skip"
fi
ruff check .
# worksteal: an idle worker takes queued tests from a busy one, so the end is not one long tail
python -m pytest -m "" -n auto --maxprocesses 4 --dist worksteal "$@"
