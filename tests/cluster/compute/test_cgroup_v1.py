"""What only cgroups do: CPU quotas, a hierarchy per node that outlives a crashed kubelet."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from trainctl.cluster.compute import cgroups, enforcer
from trainctl.cluster.compute.container_limits import ContainerLimits

from .conftest import BUSY_LOOP

pytestmark = pytest.mark.parametrize("node_enforcer", ["cgroup-v1"], indirect=True)


def group_directories(cluster: str, node: str = "node-a") -> list[Path]:
    """The node's group in each of the memory, cpu and cpuacct hierarchies."""
    return sorted({h.mount / "trainctl" / cluster / node for h in cgroups.system_hierarchies()
                   if h.version == 1 and h.controllers & {"memory", "cpu", "cpuacct"}})


def test_a_cpu_limit_of_200m_holds_a_busy_loop_near_a_fifth_of_a_cpu(node_enforcer, start) -> None:
    group = node_enforcer.container("pod-1", "main", ContainerLimits(cpu_millicores=200))
    began, first = time.monotonic(), group.usage()
    process = start(group, BUSY_LOOP, 3)
    process.wait(timeout=60)
    used = group.usage().cpu_seconds - first.cpu_seconds

    assert 0.05 < used / (time.monotonic() - began) < 0.5
    group.close()


def test_groups_exist_per_node_pod_and_container_and_are_removed_on_close(node_enforcer, cluster_name, start) -> None:
    group = node_enforcer.container("pod-1", "main", ContainerLimits(memory_bytes=2**30, cpu_millicores=500))
    process = start(group, "import time; time.sleep(60)")
    nodes = group_directories(cluster_name)
    assert len(nodes) == 3 and "node-a" in node_enforcer.describe()
    for node in nodes:
        assert str(process.pid) in (node / "pod-1" / "main" / "cgroup.procs").read_text().split()
    memory = next(node for node in nodes if node.parts[-4] == "memory")
    assert (memory / "pod-1" / "main" / "memory.limit_in_bytes").read_text().strip() == str(2**30)

    group.close()  # kills what is left, as the kubelet's cleanup does

    assert process.wait(timeout=10) == -signal.SIGKILL
    assert not any((node / "pod-1").exists() for node in nodes)
    node_enforcer.close()
    assert not any(node.exists() for node in nodes)


def test_a_new_kubelet_cleans_up_the_groups_a_crashed_one_left(node_enforcer, cluster_name, start) -> None:
    group = node_enforcer.container("pod-1", "main", ContainerLimits())
    process = start(group, "import time; time.sleep(60)")
    # The kubelet dies here without closing anything; then a new one starts for the node.

    again = enforcer.detect(cluster=cluster_name, node="node-a", force="cgroup-v1")

    assert process.wait(timeout=10) == -signal.SIGKILL
    assert not any((node / "pod-1").exists() for node in group_directories(cluster_name))
    assert all(node.exists() for node in group_directories(cluster_name))
    again.close()


def test_nodes_of_one_cluster_keep_their_groups_apart(node_enforcer, cluster_name, start) -> None:
    other = enforcer.detect(cluster=cluster_name, node="node-b", force="cgroup-v1")
    group = node_enforcer.container("pod-1", "main", ContainerLimits())
    process = start(group, BUSY_LOOP, 1)
    process.wait(timeout=60)

    assert node_enforcer.node_usage().cpu_seconds > 0.1
    assert other.node_usage().cpu_seconds == 0
    other.close()
    assert all(node.exists() for node in group_directories(cluster_name, "node-a"))
    group.close()


def test_tearing_down_a_cluster_removes_every_node_s_groups(node_enforcer, cluster_name, start) -> None:
    other = enforcer.detect(cluster=cluster_name, node="node-b", force="cgroup-v1")
    processes = [start(node.container("pod-1", "main", ContainerLimits()), "import time; time.sleep(60)")
                 for node in (node_enforcer, other)]

    removed = enforcer.remove_cluster(cluster=cluster_name)

    assert [process.wait(timeout=10) for process in processes] == [-signal.SIGKILL] * 2
    assert removed and not any(path.exists() for path in removed)
    assert not any(node.exists() for node in group_directories(cluster_name) + group_directories(cluster_name, "node-b"))
