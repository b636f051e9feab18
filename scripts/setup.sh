#!/usr/bin/env bash
# Create .venv and install mt with its test tools. torch 2.13.0 (CPU build) goes in first so that
# pip does not pull a multi-GB CUDA build to satisfy the range in pyproject.toml. pip runs quietly
# (-q), so each step says what it does first: the whole takes a minute or more.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "setup: $*" >&2; }
step "creating .venv"
python3 -m venv .venv
. .venv/bin/activate
step "upgrading pip"
python -m pip install -q --upgrade pip
step "installing torch 2.13.0 (the longest step)"
python -m pip install -q "torch==2.13.0"
step "installing mt and its test tools (pip install -e '.[test]')"
python -m pip install -q -e ".[test]"
step "done: . .venv/bin/activate, then mt --help"
