#!/usr/bin/env bash
# Lints the tree with ruff, type-checks the trainctl package (its three portions: trainctl/,
# api/trainctl/, controller/trainctl/, as [tool.mypy] lists them) with mypy and checks the
# layers with import-linter. Run by hack/test.sh; on its own after `bash hack/test.sh` has made .venv:
#   bash hack/lint.sh
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== ruff"
.venv/bin/ruff check .

echo "== mypy"
.venv/bin/python -m mypy

echo "== import-linter"
.venv/bin/lint-imports
