#!/usr/bin/env bash
# Lints the tree with ruff, type-checks the trainctl package with mypy and checks the layers
# with import-linter. Run by hack/test.sh; on its own after `bash hack/test.sh` has made .venv:
#   bash hack/lint.sh
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== ruff"
.venv/bin/ruff check .

echo "== mypy"
.venv/bin/python -m mypy -p trainctl

echo "== import-linter"
.venv/bin/lint-imports
