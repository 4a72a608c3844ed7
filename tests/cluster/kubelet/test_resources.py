"""Resource limits and usage of the kubelet's containers: OOM kills as Kubernetes reports them,
and the Metrics API that ``kubectl top`` reads."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.support.pods import container_status, create, phase, pod, wait_pod

# Writes every byte, so the memory is resident (a calloc'd buffer would not be).
ALLOCATE_256MI = "import time; hog = b'x' * (256 << 20); time.sleep(30)"


# None: the back end the machine offers (a cgroup one when the kubelet may); polling works anywhere.
@pytest.mark.parametrize("kubelet", [None, "polling"], indirect=True)
def test_a_container_over_its_memory_limit_is_oom_killed_and_restarted_on_failure(api, kubelet, tmp_path):
    marker = tmp_path / "attempted"
    script = (f"import pathlib, sys, time; p = pathlib.Path({str(marker)!r})\n"
              "if p.exists(): sys.exit(0)\n"
              f"p.touch(); {ALLOCATE_256MI}")
    create(api, pod("hog", script, restart_policy="OnFailure", resources={"limits": {"memory": "64Mi"}}))
    done = wait_pod(api, "hog", phase("Succeeded", "Failed"), timeout=90)
    assert done["status"]["phase"] == "Succeeded"
    status = container_status(done)
    assert status["restartCount"] == 1
    last = status["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (137, "OOMKilled")


def test_an_oom_killed_container_that_is_never_restarted_fails_its_pod(api):
    create(api, pod("hog-once", ALLOCATE_256MI, resources={"limits": {"memory": "64Mi"}}))
    done = wait_pod(api, "hog-once", phase("Succeeded", "Failed"), timeout=90)
    assert done["status"]["phase"] == "Failed"
    terminated = container_status(done)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")


def _kubectl(kube_env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", *args], env=kube_env, capture_output=True, text=True, timeout=30)


def test_kubectl_top_shows_the_usage_of_pods_and_nodes(api, kube_env):
    create(api, pod("spinner", "while True: pass", restart_policy="Never"))
    wait_pod(api, "spinner", phase("Running"))
    deadline = time.monotonic() + 90
    while True:
        top = _kubectl(kube_env, "top", "pods", "--no-headers")
        if top.returncode == 0 and top.stdout.startswith("spinner"):
            break
        assert time.monotonic() < deadline, (top.stdout, top.stderr)
        time.sleep(1)
    name, cpu, _memory = top.stdout.split()
    assert name == "spinner"
    # A busy loop on a shared 2-core machine: well above idle, at most the whole machine.
    assert cpu.endswith("m") and 100 <= int(cpu[:-1]) <= 2100, top.stdout
    nodes = _kubectl(kube_env, "top", "nodes", "--no-headers")
    assert nodes.returncode == 0, nodes.stderr
    assert nodes.stdout.split()[0] == "trainctl-local"
