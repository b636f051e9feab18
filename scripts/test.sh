#!/usr/bin/env bash
# Set up, then run the linter and the whole test suite (the command CI runs). Plain
# `python -m pytest` runs only the fast tier (pyproject.toml's addopts); -m "" here selects every
# tier: slow, dist, and gpu (whose tests skip themselves without CUDA), spread over the cores
# (pytest-xdist; most tests use one core at a time). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. .venv/bin/activate
ruff check .
python -m pytest -m "" -n auto --maxprocesses 4 "$@"
