"""Container logs go with their pod, collected by the node that ran it.

Every node of a cluster writes under one ``pods`` directory (the API server serves
``pods/log`` from it), and a node's cache may lack, for a moment, a pod that another node
has just started: that node must not take the new pod's logs for a deleted pod's.
"""

import pytest

from trainctl.cluster.kubelet.paths import OutsideDirectory
from trainctl.cluster.kubelet.pod_deletion import Terminator
from trainctl.cluster.kubelet.runtime import POD_NODE_FILE, claim_pod_directory, pod_directory_node


def pod_dir(pods, uid, node=None):
    if node is None:
        (pods / uid / "main").mkdir(parents=True)
    else:
        claim_pod_directory(pods, uid, node)
        (pods / uid / "main").mkdir()
    (pods / uid / "main" / "0.log").write_text("2026-11-25T00:00:00Z stdout F hello\n")


def test_a_node_removes_only_the_logs_of_its_own_pods_that_are_gone(tmp_path):
    pods = tmp_path / "pods"
    pod_dir(pods, "mine-deleted", "node-a")
    pod_dir(pods, "mine-running", "node-a")
    pod_dir(pods, "theirs-not-seen-yet", "node-b")
    pod_dir(pods, "unclaimed")
    Terminator(None, pods, "node-a", lambda: None).remove_logs(keep={"mine-running"})
    assert sorted(p.name for p in pods.iterdir()) == ["mine-running", "theirs-not-seen-yet", "unclaimed"]
    assert (pods / "theirs-not-seen-yet" / "main" / "0.log").exists()


def test_a_pod_directory_is_claimed_once_by_the_node_that_runs_it(tmp_path):
    claim_pod_directory(tmp_path, "uid-1", "node-a")
    claim_pod_directory(tmp_path, "uid-1", "node-a")  # each container start claims it again
    assert pod_directory_node(tmp_path / "uid-1") == "node-a"
    assert (tmp_path / "uid-1" / POD_NODE_FILE).read_text() == "node-a\n"
    assert pod_directory_node(tmp_path / "nobody") is None
    with pytest.raises(OutsideDirectory):
        claim_pod_directory(tmp_path, "..", "node-a")
