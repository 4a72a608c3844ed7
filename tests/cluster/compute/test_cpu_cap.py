"""A slow node's CPU cap: what each container is held to, the kubelet's side of the request
(running and later containers, lifting it), and a node that cannot cap CPU saying so."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Optional

import pytest

from trainctl.cluster.compute import cpu_cap
from trainctl.cluster.compute.container_limits import ContainerLimits
from trainctl.cluster.compute.cpu_cap import CapWatcher, CpuCapUnsupported, capped_millicores

from .test_cgroup_v1 import group_directories


@pytest.mark.parametrize(("limit", "percent", "capped"), [
    (None, None, None),      # no cap: the container's own limit
    (500, None, 500),
    (None, 20, 200),         # no limit: a share of one core
    (500, 20, 100),          # a share of its limit
    (2000, 50, 1000),
    (3, 10, 1),              # never below a millicore
])
def test_a_cap_is_a_share_of_the_limit_or_of_one_core(limit: Optional[int], percent: Optional[int],
                                                      capped: Optional[int]) -> None:
    assert capped_millicores(limit, percent) == capped


def _quota(cluster: str, pod: str) -> str:
    cpu = next(node for node in group_directories(cluster) if node.parts[-4] == "cpu")
    return (cpu / pod / "main" / "cpu.cfs_quota_us").read_text().strip()


@pytest.mark.parametrize("node_enforcer", ["cgroup-v1"], indirect=True)
def test_a_cap_holds_running_and_later_containers_and_lifting_it_gives_their_limits_back(
        node_enforcer: Any, cluster_name: str) -> None:
    limited = node_enforcer.container("pod-1", "main", ContainerLimits(cpu_millicores=500))
    unlimited = node_enforcer.container("pod-2", "main", ContainerLimits())
    assert (_quota(cluster_name, "pod-1"), _quota(cluster_name, "pod-2")) == ("50000", "-1")

    node_enforcer.cap_cpu(20)
    later = node_enforcer.container("pod-3", "main", ContainerLimits(cpu_millicores=1000))
    assert [_quota(cluster_name, p) for p in ("pod-1", "pod-2", "pod-3")] == ["10000", "20000", "20000"]

    node_enforcer.cap_cpu(None)
    assert [_quota(cluster_name, p) for p in ("pod-1", "pod-2", "pod-3")] == ["50000", "-1", "100000"]
    for group in (limited, unlimited, later):
        group.close()


@pytest.mark.parametrize("node_enforcer", ["polling"], indirect=True)
def test_a_polling_node_refuses_a_cap_and_says_why(node_enforcer: Any) -> None:
    with pytest.raises(CpuCapUnsupported, match="no CPU limits"):
        node_enforcer.cap_cpu(20)
    node_enforcer.cap_cpu(None)  # nothing to lift


class FakeEnforcer:
    def __init__(self, refuse: str = "") -> None:
        self.caps: list[Optional[int]] = []
        self.refuse = refuse

    def cap_cpu(self, percent: Optional[int]) -> None:
        if self.refuse and percent is not None:
            raise CpuCapUnsupported(self.refuse)
        self.caps.append(percent)


def test_the_kubelet_applies_a_request_once_and_answers_it(tmp_path: Path) -> None:
    enforcer = FakeEnforcer()
    watcher = CapWatcher(tmp_path, "node-a", enforcer)
    watcher.check()
    assert enforcer.caps == []  # never asked: nothing applied, nothing answered
    serial = cpu_cap.ask(tmp_path, "node-a", 30)
    assert cpu_cap.answer(tmp_path, "node-a", serial) is None
    watcher.check()
    watcher.check()
    assert enforcer.caps == [30] and cpu_cap.answer(tmp_path, "node-a", serial) == ""
    lifted = cpu_cap.ask(tmp_path, "node-a", None)
    assert lifted > serial and cpu_cap.answer(tmp_path, "node-a", lifted) is None  # the old answer is not the new one
    watcher.check()
    assert enforcer.caps == [30, None] and cpu_cap.answer(tmp_path, "node-a", lifted) == ""


def test_a_kubelet_that_starts_later_applies_the_standing_request(tmp_path: Path) -> None:
    cpu_cap.ask(tmp_path, "node-a", 40)
    enforcer = FakeEnforcer()
    watcher = CapWatcher(tmp_path, "node-a", enforcer)
    watcher.start()
    try:
        assert enforcer.caps == [40]  # before start() returns: before any pod of the node runs
    finally:
        watcher.stop()


def test_a_refused_cap_is_answered_with_the_reason(tmp_path: Path) -> None:
    watcher = CapWatcher(tmp_path, "node-a", FakeEnforcer(refuse="this node enforces no CPU limits"))
    serial = cpu_cap.ask(tmp_path, "node-a", 20)
    thread = threading.Thread(target=watcher.check)
    thread.start()
    assert cpu_cap.wait_applied(tmp_path, "node-a", serial, timeout=30) == "this node enforces no CPU limits"
    thread.join()


def test_no_kubelet_no_answer(tmp_path: Path) -> None:
    serial = cpu_cap.ask(tmp_path, "node-a", 20)
    with pytest.raises(TimeoutError, match="did not apply"):
        cpu_cap.wait_applied(tmp_path, "node-a", serial, timeout=0.2)
