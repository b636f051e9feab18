#!/usr/bin/env bash
# Set up, then run the linter and the test suite (the command CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. .venv/bin/activate
ruff check .
python -m pytest "$@"
