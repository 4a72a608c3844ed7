"""``trainctl local node preempt``: the Node is tainted for the reclaim, the notice is waited
out, then the machine dies and its Node is deleted; without a cluster (a recording client)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, cast

import pytest

from trainctl.cluster import machines
from trainctl.cluster.faults import NODE_FAULTS
from trainctl.cluster.faults.preempt import notice_seconds, preempt_node
from trainctl.cluster.machines import NodeError
from trainctl.kube.client import KubeClient


@dataclass
class RecordingClient:
    node: dict[str, Any]
    calls: list[tuple[str, Any, float]] = field(default_factory=list)

    def get(self, _resource: Any, _namespace: Optional[str], _name: str) -> dict[str, Any]:
        return self.node

    def patch(self, _resource: Any, _namespace: Optional[str], _name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch", patch, time.time()))
        return self.node

    def delete(self, _resource: Any, _namespace: Optional[str], name: str) -> bool:
        self.calls.append(("delete", name, time.time()))
        return True


@dataclass
class Host:
    directory: Path
    reaped: list[str] = field(default_factory=list)

    def check_boot(self, node: str) -> None:
        pass

    def boot(self, node: str) -> None:
        pass

    def reap(self, node: str) -> None:
        self.reaped.append(node)


def test_preempt_taints_waits_the_notice_then_kills_and_deletes_the_node(tmp_path: Path) -> None:
    machines.write_nodes(tmp_path, machines.node_specs(2, ["a", "b"]))
    other = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    client = RecordingClient({"metadata": {"name": "b", "resourceVersion": "7"}, "spec": {"taints": [other]}})
    host = Host(tmp_path)
    started = time.time()
    preempt_node(host, "b", 0.5, cast(KubeClient, client))
    (patched, patch, tainted_at), (deleted, name, deleted_at) = client.calls
    assert patched == "patch" and patch["metadata"]["resourceVersion"] == "7"
    other_kept, reclaim = patch["spec"]["taints"]
    assert other_kept == other
    assert (reclaim["key"], reclaim["effect"]) == ("trainctl.io/spot-reclaim", "NoExecute")
    assert started <= int(reclaim["value"]) + 1 and int(reclaim["value"]) <= started + 2  # the deadline
    assert (deleted, name) == ("delete", "b") and deleted_at - tainted_at >= 0.5  # the notice was given
    assert host.reaped == ["b"] and machines.node_state(tmp_path, "b") == machines.KILLED


def test_a_node_already_down_is_refused_untouched(tmp_path: Path) -> None:
    machines.write_nodes(tmp_path, machines.node_specs(1))
    name = machines.DEFAULT_NODE_NAME
    machines.set_state(tmp_path, name, machines.KILLED)
    client = RecordingClient({"metadata": {"name": name}})
    with pytest.raises(NodeError, match="killed"):
        preempt_node(Host(tmp_path), name, 0.0, cast(KubeClient, client))
    assert client.calls == []


@pytest.mark.parametrize(("notice", "seconds"), [(None, 30.0), ("2m", 120.0), ("1.5s", 1.5)])
def test_notice_is_a_duration(notice: Optional[str], seconds: float) -> None:
    assert notice_seconds(notice) == seconds


def test_a_bad_notice_is_refused() -> None:
    with pytest.raises(NodeError, match="not a duration"):
        notice_seconds("soon")


def test_preempt_is_a_node_subcommand_with_a_notice_that_start_undoes() -> None:
    fault = NODE_FAULTS["preempt"]
    assert fault.undo == "start" and [flag.flag for flag in fault.flags] == ["--notice"]
