#!/usr/bin/env bash
# Set up, train the embedded toy model (English -> German number phrases), score it, translate.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. .venv/bin/activate
rm -rf runs/toy
mt train configs/toy.yaml --out runs/toy
mt eval runs/toy --split test
printf 'Yesterday we saw forty two red dogs.\nI need seven hundred eleven old books.\n' \
  | mt translate runs/toy
