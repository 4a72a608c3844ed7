"""``node preempt`` on a running two-node cluster: the Node is tainted for the reclaim, its
pod is evicted and its process ends within the notice, then the Node is gone; ``node start``
brings the machine back as a new, untainted Node that is Ready."""

from __future__ import annotations

import threading
import time

import pytest

from trainctl.cluster.faults import NODE_FAULTS
from trainctl.cluster.kubelet.runtime import process_start_time
from trainctl.cluster.local_cluster import LocalCluster
from trainctl.kube.restmapper import NODES

from tests.support.pods import main_pid, running_sleeper, wait_pod_gone

NOTICE = "20s"


def ready(node: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (node.get("status") or {}).get("conditions") or [])


@pytest.mark.timeout(300)
def test_a_preempted_node_gives_its_pods_the_notice_then_is_gone_until_it_starts_again(tmp_path):
    with LocalCluster(tmp_path / "cluster", controller=False, workdir=tmp_path, nodes=2) as cluster:
        api = cluster.client()
        spot = cluster.nodes[1].name
        pid = main_pid(running_sleeper(api, tmp_path, "on-spot", spot))
        assert pid is not None
        old_uid = api.get(NODES, None, spot)["metadata"]["uid"]
        errors: list[BaseException] = []

        def preempt() -> None:
            try:
                NODE_FAULTS["preempt"](cluster, spot, {"notice": NOTICE})
            except BaseException as exc:  # handed to the test thread
                errors.append(exc)

        reclaim = threading.Thread(target=preempt)
        started = time.monotonic()
        reclaim.start()
        wait_pod_gone(api, "on-spot", timeout=60)  # evicted by the NoExecute taint, its process ended on SIGTERM
        evicted_after = time.monotonic() - started
        reclaim.join(120)
        assert not reclaim.is_alive() and errors == []
        assert time.monotonic() - started >= 20, "the machine lived out its notice"
        assert evicted_after < 60 and process_start_time(pid) is None
        assert api.get_or_none(NODES, None, spot) is None  # the instance is gone, and its Node with it

        cluster.start_node(spot)
        deadline = time.monotonic() + 60
        while not ((node := api.get_or_none(NODES, None, spot)) and ready(node)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert node is not None and ready(node)
        assert node["metadata"]["uid"] != old_uid and not (node.get("spec") or {}).get("taints")
