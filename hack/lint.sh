#!/usr/bin/env bash
# Lints the tree with ruff and type-checks the API, the reconcile core and the frameworks
# with mypy. Run by hack/test.sh; on its own after `bash hack/test.sh` has made .venv:
#   bash hack/lint.sh
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== ruff"
.venv/bin/ruff check .

echo "== mypy"
# api/ and controller/ install as trainctl.api and trainctl.controller (setup.py's
# package_dir), a mapping mypy cannot follow through an editable install: give it a
# trainctl/ directory that links to both.
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
mkdir "$pkg/trainctl"
ln -s "$PWD/api" "$pkg/trainctl/api"
ln -s "$PWD/controller" "$pkg/trainctl/controller"
(cd "$pkg" && "$OLDPWD/.venv/bin/python" -m mypy --config-file "$OLDPWD/pyproject.toml" \
  -p trainctl.api -p trainctl.controller.reconcile -p trainctl.controller.frameworks)
