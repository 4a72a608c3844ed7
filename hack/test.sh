#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, then runs it.
#   bash hack/test.sh            # the whole suite (what CI runs)
#   bash hack/test.sh -k env     # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."

# kubectl, nft for the isolated pod network's Service forwarding in the kernel (without it
# the network falls back to a userspace proxy, which the suite would then test instead), and
# bubblewrap for the pods' sandbox (without it pods run unsandboxed and the attacker tests fail).
packages=()
command -v kubectl >/dev/null 2>&1 || packages+=(kubernetes-client)
command -v nft >/dev/null 2>&1 || packages+=(nftables)
command -v bwrap >/dev/null 2>&1 || packages+=(bubblewrap)
if [ "${#packages[@]}" -gt 0 ]; then
  echo "== installing ${packages[*]} (Debian packages)"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq "${packages[@]}"; else sudo apt-get update -qq && sudo apt-get install -y -qq "${packages[@]}"; fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  python3 -m venv .venv
fi
# pip's own output goes to a log; every 20 s a line says what it is doing, so a first run
# (a few minutes: torch, kfp, MindSpore's 800 MB) is never silent.
pip_install() {
  local log=.venv/pip-install.log
  .venv/bin/pip install --disable-pip-version-check --progress-bar off "$@" >"$log" 2>&1 &
  local pip=$!
  while kill -0 "$pip" 2>/dev/null; do
    for _ in $(seq 20); do kill -0 "$pip" 2>/dev/null && sleep 1; done
    if kill -0 "$pip" 2>/dev/null; then
      echo "   ... $(grep -E '^(Collecting|Downloading|Installing|Building|Requirement already)' "$log" | tail -n 1 | cut -c1-100)"
    fi
  done
  if ! wait "$pip"; then
    cat "$log"
    echo "pip install $* failed" >&2
    exit 1
  fi
}
echo "== installing trainctl with its test dependencies (torch 2.13.0, kfp, the kubeflow-training SDK; log: .venv/pip-install.log)"
# The three distributions of this repository (docs/architecture.md): the root one depends on
# the other two, which are found here, not on an index.
pip_install -e ./api -e ./controller -e '.[torch,test]'
echo "== installing MindSpore 2.10.0 (about 800 MB on a first run)"
# A second step, not an extra of the first: kfp 2.17 declares protobuf<7 while MindSpore
# 2.10 declares protobuf>=7.34, so no single resolution exists. kfp compiles pipelines fine
# with protobuf 7 (tests/pipelines proves it); pip only warns here.
pip_install 'mindspore==2.10.0' 'numpy<2'

echo "== checking generated CRDs"
.venv/bin/python hack/gen_crds.py --check
.venv/bin/python hack/gen_builtin_schemas.py --check

bash hack/lint.sh

# Two runs: the tests that need no whole cluster are independent and run on several workers
# (a file per worker, so module fixtures are built once); the e2e tests train real jobs on a
# cluster they share, one at a time (two at once were no faster on two cores: training is
# CPU-bound). Exit code 5 (nothing selected, e.g. by -k) is fine for one of the two runs, not
# for both.
run_pytest() {
  local code=0
  .venv/bin/python -m pytest -q "$@" || code=$?
  return "$code"
}
echo "== running the unit and component tests on ${TRAINCTL_TEST_WORKERS:-3} workers"
unit=0; run_pytest -n "${TRAINCTL_TEST_WORKERS:-3}" --dist loadfile -m "not e2e" "$@" || unit=$?
echo "== running the end-to-end tests"
e2e=0; run_pytest --durations=30 -m e2e "$@" || e2e=$?
# The e2e clusters run on the default pod network (auto: isolated where the machine allows
# it); the tests whose pods meet the network (training, exec and port-forward, in-pod
# identity) run once more on the shared one, the fallback where namespaces are refused.
shared=0
if [ "$#" = 0 ]; then
  echo "== running the pod network's end-to-end tests again on the shared network"
  TRAINCTL_TEST_NETWORK=shared run_pytest -m e2e e2e/test_pytorch_ddp.py e2e/test_streaming.py \
    e2e/test_identity.py || shared=$?
fi
# The pods run in the bwrap sandbox where it runs; a few tests run again without it (the
# fallback where bwrap is missing or namespaces are refused).
unsandboxed=0
if [ "$#" = 0 ]; then
  echo "== running a few end-to-end tests again without the pod sandbox"
  TRAINCTL_POD_SANDBOX=none run_pytest -m e2e e2e/test_streaming.py \
    "e2e/test_identity.py::test_a_pod_lists_pods_in_cluster_as_its_service_account_and_another_is_refused" \
    || unsandboxed=$?
fi
if [ "$unit" = 5 ] && [ "$e2e" = 5 ]; then exit 5; fi
for code in "$unit" "$e2e" "$shared" "$unsandboxed"; do
  if [ "$code" != 0 ] && [ "$code" != 5 ]; then exit "$code"; fi
done
