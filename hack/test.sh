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
pip_install() {
  if ! .venv/bin/pip install -q --disable-pip-version-check "$@" >.venv/pip-install.log 2>&1; then
    cat .venv/pip-install.log
    echo "pip install $* failed" >&2
    exit 1
  fi
}
pip_install -e '.[torch,test]'
# A second step, not an extra of the first: kfp 2.17 declares protobuf<7 while MindSpore
# 2.10 declares protobuf>=7.34, so no single resolution exists. kfp compiles pipelines fine
# with protobuf 7 (tests/pipelines proves it); pip only warns here.
pip_install 'mindspore==2.10.0' 'numpy<2'

echo "== checking generated CRDs"
.venv/bin/python hack/gen_crds.py --check
.venv/bin/python hack/gen_builtin_schemas.py --check

bash hack/lint.sh

echo "== running tests"
exec .venv/bin/python -m pytest -q "$@"
