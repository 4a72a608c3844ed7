"""What kubectl prints on ``trainctl local up --nodes 2``, as on a kube cluster: node roles and
OS image, a crashing pod's STATUS going through ``Error`` to ``CrashLoopBackOff``, a namespace
that terminates with its pods' grace honoured, and ``top nodes`` counting each kubelet.

One cluster for the module: two nodes, a short back-off and a short metrics interval, no
training controller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from trainctl.cluster.kubelet.node import os_image

from tests.support.cluster import E2E, scratch_cluster
from tests.support.pods import pod_scratch
from tests.support.waiting import wait_on

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    with scratch_cluster(tmp_path_factory.mktemp("output"), nodes=2, backoff_base=5.0, metrics_interval=2.0,
                         controller=False, controlplane_args=["--controllers", "node-lifecycle"]) as cluster:
        yield cluster


def eventually(what: str, check: Callable[[], Any], timeout: float = 120) -> Any:
    found = wait_on(threading.Condition(), check, timeout, recheck=1.0)
    assert found, f"no {what} within {timeout:g}s"
    return found


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def test_nodes_one_control_plane_and_the_machines_os_image(env: E2E) -> None:
    wide = env.kubectl("get", "nodes", "-o", "wide")
    header, *nodes = wide.strip().splitlines()
    assert header.split()[:3] == ["NAME", "STATUS", "ROLES"]
    roles = {line.split()[0]: line.split()[2] for line in nodes}
    assert roles == {"trainctl-local": "control-plane", "trainctl-local-2": "<none>"}
    image = header.index("OS-IMAGE")
    kernel = header.index("KERNEL-VERSION")
    assert all(line[image:kernel].strip() == os_image() for line in nodes), wide


def test_a_crash_shows_error_then_crash_loop_back_off(env: E2E) -> None:
    script = "import sys, time; time.sleep(1); sys.exit(3)"
    env.kubectl.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crasher", "namespace": "default"},
                       "spec": {"restartPolicy": "Always", "nodeName": "trainctl-local-2", "containers": [
                           {"name": "app", "image": "python:3.11", "command": ["python", "-c", script]}]}})
    watch = env.kubectl.popen("get", "pod", "crasher", "-w", "--no-headers")
    statuses: list[str] = []
    try:
        assert watch.stdout is not None
        for line in watch.stdout:
            statuses.append(line.split()[2])
            if statuses[-1] == "CrashLoopBackOff":
                break
    finally:
        watch.kill()
        watch.wait()
    assert "Error" in statuses and "Running" in statuses, statuses
    assert "PodInitializing" not in statuses, statuses
    restarts = eventually("a restart with its age", lambda: (
        cells := rows(env.kubectl("get", "pod", "crasher", "--no-headers"))[0])[3] != "0" and cells)
    assert restarts[4].startswith("(") and restarts[5] == "ago)", restarts  # `1 (3s ago)`
    env.kubectl("delete", "pod", "crasher", "--grace-period=0", "--force")


def test_a_deleted_namespace_terminates_its_pods_with_their_grace(env: E2E) -> None:
    namespace = "doomed"
    env.kubectl("create", "namespace", namespace)
    marker = pod_scratch(env.cluster.directory, namespace) / "sigterm"
    script = ("import pathlib, signal, sys, time\n"
              f"def stop(*_):\n    time.sleep(2); pathlib.Path({str(marker)!r}).write_text('graceful'); sys.exit(0)\n"
              "signal.signal(signal.SIGTERM, stop)\ntime.sleep(600)")
    env.kubectl.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker", "namespace": namespace},
                       "spec": {"terminationGracePeriodSeconds": 60, "containers": [
                           {"name": "app", "image": "python:3.11", "command": ["python", "-c", script]}]}})
    eventually("a running pod", lambda: "Running" in env.kubectl("get", "pod", "worker", "-n", namespace))
    env.kubectl("delete", "namespace", namespace, "--wait=false")
    assert rows(env.kubectl("get", "namespace", namespace, "--no-headers"))[0][1] == "Terminating"
    refused = env.kubectl.run("create", "configmap", "late", "-n", namespace, check=False)
    assert "unable to create new content in namespace doomed because it is being terminated" in refused.stderr
    eventually("the namespace gone", lambda: env.kubectl.run("get", "namespace", namespace, check=False).returncode != 0)
    assert Path(marker).read_text() == "graceful"  # SIGTERM, and time to finish, before the end


def test_top_nodes_counts_each_kubelet(env: E2E) -> None:
    def top() -> list[list[str]] | None:
        result = env.kubectl.run("top", "nodes", "--no-headers", check=False)
        lines = rows(result.stdout) if result.returncode == 0 else []
        return lines if len(lines) == 2 and all(line[1] != "<unknown>" for line in lines) else None

    nodes = eventually("metrics of both nodes", top)
    for _name, cpu, _cpu_share, memory, _memory_share in nodes:
        assert cpu.endswith("m") and memory.endswith("Mi"), nodes
        assert int(memory[:-2]) > 10, nodes  # at least the kubelet's own process, with no pod on the node
