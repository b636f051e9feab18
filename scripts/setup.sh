#!/usr/bin/env bash
# Create .venv and install mt with its test tools. torch 2.13.0 (CPU build) goes in first so that
# pip does not pull a multi-GB CUDA build to satisfy the range in pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[test]"
