"""Several nodes on one machine: the scheduler places pods across them by kube-scheduler's
rules, and each node can be killed, frozen, thawed and booted again as a machine would be.

One 3-node cluster for the module (1 CPU and 2Gi each, a Lease renewed every second) with
the node lifecycle controller on a 5 s grace period; every test leaves the nodes as it
found them (Ready, untainted, uncordoned) and deletes its pods.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from trainctl.cluster import machines
from trainctl.cluster.faults.freeze import THAW_SECONDS
from trainctl.cluster.kubelet.runtime import process_start_time
from trainctl.cluster.local_cluster import LocalCluster
from trainctl.cluster.pidfiles import read_pid_file
from trainctl.kube.restmapper import LEASES, NODES, PODS

from tests.support.cluster import TEST_NETWORK_VARIABLE
from tests.support.kubectl import Kubectl
from tests.support.pods import main_pid, pod, running_sleeper, wait_pod, wait_pod_gone

NODE_NAMES = ["trainctl-local", "trainctl-local-2", "trainctl-local-3"]
SLEEP = "import time; time.sleep(600)"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("nodes")
    with LocalCluster(root / "cluster", controller=False, workdir=root, nodes=3, node_cpu="1", node_memory="2Gi",
                      lease_renew_interval=1.0, network=os.environ.get(TEST_NETWORK_VARIABLE, "auto")) as running:
        controlplane = subprocess.Popen(
            [sys.executable, "-m", "trainctl.cluster.controlplane", "--kubeconfig", str(running.kubeconfig),
             "--node-monitor-grace-period", "5s", "--node-monitor-period", "1s"],
            stdout=open(root / "controlplane.log", "ab"), stderr=subprocess.STDOUT)
        try:
            yield running
        finally:
            controlplane.terminate()
            controlplane.wait(20)


@pytest.fixture
def api(cluster):
    client = cluster.client()
    yield client
    for item in client.list(PODS, "default")[0]:
        client.delete(PODS, "default", item["metadata"]["name"], grace_period_seconds=0)
    for item in client.list(PODS, "default")[0]:
        wait_pod_gone(client, item["metadata"]["name"])


@pytest.fixture
def kubectl(cluster, tmp_path):
    return Kubectl.for_kubeconfig(cluster.kubeconfig, tmp_path)


def node_of(api, name):
    return wait_pod(api, name, lambda p: bool(p["spec"].get("nodeName")))["spec"]["nodeName"]


def unschedulable_message(api, name):
    def pending(p):
        return any(c.get("reason") == "Unschedulable" for c in p.get("status", {}).get("conditions") or [])

    found = wait_pod(api, name, pending)
    return next(c for c in found["status"]["conditions"] if c["type"] == "PodScheduled")["message"]


def with_spec(obj, **spec):
    obj["spec"].update(spec)
    return obj


def ready(api, node):
    found = api.get(NODES, None, node)
    return next(c for c in found["status"]["conditions"] if c["type"] == "Ready")["status"]


def wait_for(check, timeout=40.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_three_nodes_with_their_own_share_and_lease(cluster, kubectl):
    listed = json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
    assert sorted(n["metadata"]["name"] for n in listed) == NODE_NAMES
    assert {(n["status"]["allocatable"]["cpu"], n["status"]["allocatable"]["memory"]) for n in listed} == {("1", "2Gi")}
    for name in NODE_NAMES:
        assert cluster.client().get(LEASES, "kube-node-lease", name)["spec"]["holderIdentity"] == name
    assert len({cluster.kubelets[name].pid for name in NODE_NAMES}) == 3


def test_requests_spread_pods_and_the_rest_wait_in_kube_scheduler_words(api):
    for i in range(3):
        api.create(PODS, pod(f"big-{i}", SLEEP, resources={"requests": {"cpu": "700m"}}))
    assert sorted(node_of(api, f"big-{i}") for i in range(3)) == NODE_NAMES
    api.create(PODS, pod("one-too-many", SLEEP, resources={"requests": {"cpu": "700m"}}))
    assert unschedulable_message(api, "one-too-many") == (
        "0/3 nodes are available: 3 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")
    api.delete(PODS, "default", "big-1", grace_period_seconds=0)
    wait_pod(api, "one-too-many", lambda p: bool(p["spec"].get("nodeName")))


def test_selector_affinity_taints_cordon_and_scheduler_name(api, kubectl):
    kubectl("label", "node", "trainctl-local-2", "zone=b")
    kubectl("taint", "node", "trainctl-local-3", "dedicated=train:NoSchedule")
    try:
        api.create(PODS, with_spec(pod("selected", SLEEP), nodeSelector={"zone": "b"}))
        assert node_of(api, "selected") == "trainctl-local-2"
        required = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["trainctl-local"]}]}]}}}
        api.create(PODS, with_spec(pod("not-first", SLEEP), affinity=required))
        assert node_of(api, "not-first") == "trainctl-local-2"  # -3 is tainted
        preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}]}}
        api.create(PODS, with_spec(pod("prefers-b", SLEEP), affinity=preferred))
        assert node_of(api, "prefers-b") == "trainctl-local-2"
        tolerant = [{"key": "dedicated", "operator": "Equal", "value": "train", "effect": "NoSchedule"}]
        only_3 = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["trainctl-local-3"]}]}]}}}
        api.create(PODS, with_spec(pod("tolerant", SLEEP), tolerations=tolerant, affinity=only_3))
        assert node_of(api, "tolerant") == "trainctl-local-3"
        api.create(PODS, with_spec(pod("intolerant", SLEEP), affinity=only_3))
        assert unschedulable_message(api, "intolerant") == (
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: train}, "
            "2 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
        kubectl("cordon", "trainctl-local-2")
        api.create(PODS, with_spec(pod("cordoned-out", SLEEP), nodeSelector={"zone": "b"}))
        assert unschedulable_message(api, "cordoned-out") == (
            "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
            "1 node(s) had untolerated taint {dedicated: train}, 1 node(s) were unschedulable. "
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
        kubectl("uncordon", "trainctl-local-2")
        assert node_of(api, "cordoned-out") == "trainctl-local-2"
        api.create(PODS, with_spec(pod("for-volcano", SLEEP), schedulerName="volcano"))
        time.sleep(2)  # nothing will happen: give the scheduler the chance to get it wrong
        left = api.get(PODS, "default", "for-volcano")
        assert not left["spec"].get("nodeName") and not left.get("status", {}).get("conditions")
    finally:
        kubectl("uncordon", "trainctl-local-2")
        kubectl("label", "node", "trainctl-local-2", "zone-")
        kubectl("taint", "node", "trainctl-local-3", "dedicated=train:NoSchedule-")


def test_ports_are_host_ports_across_nodes(cluster, api):
    """Shared network: every declared port is a host port; isolated: the hostPorts are."""
    port = 29000 + os.getpid() % 1000
    declared = {"containerPort": port, "hostPort": port} if cluster.isolated else {"containerPort": port}
    for name in ("a", "b"):
        api.create(PODS, pod(f"port-{name}", SLEEP, ports=[declared]))
    first = wait_pod(api, "port-a", lambda p: bool(p["spec"].get("nodeName")))
    assert first["spec"]["nodeName"]
    message = unschedulable_message(api, "port-b")
    assert message.startswith("0/3 nodes are available: ") and f"port {port}" in message


def test_kill_then_start_a_node(cluster, api, tmp_path):
    name = "trainctl-local-2"
    pid = main_pid(running_sleeper(api, tmp_path, "victim", name))
    kubelet = read_pid_file(cluster.directory / "run" / "kubelet-trainctl-local-2.pid")
    cluster.kill_node(name)
    assert process_start_time(pid) is None and process_start_time(kubelet) is None
    assert machines.node_state(cluster.directory, name) == machines.KILLED
    wait_for(lambda: ready(api, name) == "Unknown", what="the killed node to go Unknown")
    assert api.get(PODS, "default", "victim")["status"]["phase"] == "Running"  # nobody says otherwise
    cluster.start_node(name)
    failed = wait_pod(api, "victim", lambda p: p["status"].get("phase") == "Failed")
    assert failed["status"]["reason"] == "KubeletRestarted"
    wait_for(lambda: ready(api, name) == "True", what="the booted node to be Ready")


def ticker_pod(name, path):
    """A pod that appends the time to ``path`` every 20 ms: a file that shows when it ran."""
    script = f"import time\nwhile True:\n    open({str(path)!r}, 'a').write(f'{{time.time()}}\\n')\n    time.sleep(0.02)"
    return pod(name, script)


def ticks(path):
    return [float(line) for line in path.read_text().split()]


def test_thaw_resumes_the_pods_still_there_and_never_runs_a_deleted_one(cluster, api, tmp_path):
    """A real machine resumes every process at once and its kubelet kills a deleted pod's
    processes a moment later; the embedded node resumes its kubelet first, so that moment
    never comes: the deleted pod does not run again, the other pod runs on."""
    name = "trainctl-local-3"
    files = {which: tmp_path / f"{which}.ticks" for which in ("kept", "gone")}
    pids = {}
    for which, path in files.items():
        api.create(PODS, with_spec(ticker_pod(which, path), nodeName=name))
        pids[which] = main_pid(wait_pod(api, which, lambda p: main_pid(p) is not None))
        wait_for(lambda path=path: path.exists() and ticks(path), timeout=20, what=f"{which} to tick")
    cluster.freeze_node(name)
    try:
        api.delete(PODS, "default", "gone", grace_period_seconds=0)
        wait_pod_gone(api, "gone")
        time.sleep(0.5)  # a tick in flight at the freeze lands before this
        thawed_at = time.time()
    finally:
        cluster.thaw_node(name)
    # The kubelet resumed the kept pod itself: thaw did not wait for its fallback.
    assert time.time() - thawed_at < THAW_SECONDS / 2
    assert process_start_time(pids["gone"]) is None, "thaw returns once the deleted pod's processes are gone"
    assert [t for t in ticks(files["gone"]) if t >= thawed_at] == []
    wait_for(lambda: any(t >= thawed_at for t in ticks(files["kept"])), timeout=10, what="the kept pod to run on")
    wait_for(lambda: ready(api, name) == "True", timeout=20, what="the thawed node to be Ready")
    wait_for(lambda: not any(t["key"] == "node.kubernetes.io/unreachable"
                             for t in api.get(NODES, None, name)["spec"].get("taints") or []),
             timeout=20, what="the unreachable taint to go")


def test_freeze_lease_stops_node_goes_unknown_and_thaw_kills_what_was_deleted(cluster, api, tmp_path):
    name = "trainctl-local-3"
    pid = main_pid(running_sleeper(api, tmp_path, "frozen", name))
    cluster.freeze_node(name)
    try:
        # SIGSTOP takes effect when each process next runs: on a loaded machine, not at once.
        def stopped(process: int) -> bool:
            return open(f"/proc/{process}/stat").read().split(")")[1].split()[0] == "T"
        kubelet_pid = cluster.kubelets[name].pid
        assert kubelet_pid is not None
        wait_for(lambda: stopped(pid) and stopped(kubelet_pid), timeout=10, what="the node's processes to stop")
        renewed = api.get(LEASES, "kube-node-lease", name)["spec"]["renewTime"]
        wait_for(lambda: ready(api, name) == "Unknown", what="the frozen node to go Unknown")
        taints = api.get(NODES, None, name)["spec"].get("taints") or []
        assert any(t["key"] == "node.kubernetes.io/unreachable" for t in taints)
        assert api.get(LEASES, "kube-node-lease", name)["spec"]["renewTime"] == renewed
        api.delete(PODS, "default", "frozen", grace_period_seconds=0)
        wait_pod_gone(api, "frozen")
        assert process_start_time(pid) is not None  # nobody on the node knows yet
    finally:
        cluster.thaw_node(name)
    wait_for(lambda: ready(api, name) == "True", timeout=20, what="the thawed node to be Ready")
    wait_for(lambda: process_start_time(pid) is None, timeout=20, what="the deleted pod's process to be killed")
    wait_for(lambda: not any(t["key"] == "node.kubernetes.io/unreachable"
                             for t in api.get(NODES, None, name)["spec"].get("taints") or []),
             timeout=20, what="the unreachable taint to go")
