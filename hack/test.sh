#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, then runs it.
#   bash hack/test.sh            # the whole suite (what CI runs)
#   bash hack/test.sh -k env     # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v kubectl >/dev/null 2>&1; then
  echo "== installing kubectl (Debian's kubernetes-client)"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq kubernetes-client; else sudo apt-get update -qq && sudo apt-get install -y -qq kubernetes-client; fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  python3 -m venv .venv
fi
echo "== installing trainctl with its test dependencies"
if ! .venv/bin/pip install -q --disable-pip-version-check -e '.[torch,mindspore,test]' >.venv/pip-install.log 2>&1; then
  cat .venv/pip-install.log
  echo "pip install failed" >&2
  exit 1
fi

echo "== checking generated CRDs"
.venv/bin/python hack/gen_crds.py --check

echo "== running tests"
exec .venv/bin/python -m pytest -q "$@"
