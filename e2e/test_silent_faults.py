"""Faults that announce nothing, staged on a two-node cluster with the isolated pod network:
a slow node (``degrade --cpu``), a dead data link on a Ready node (``degrade --net-loss``), a
hung pod on a healthy node (``pod freeze``), and each one's undo.

The pods are plain Python loops that print what they do; what is asserted is what they
printed (rates against each other, never a time), the processes' states and the Node.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from trainctl.cluster.local_cluster import LocalCluster
from trainctl.cluster.machines import NodeError
from trainctl.cluster.network import isolation
from trainctl.cluster.network.podnet import IsolatedNetwork
from trainctl.kube.client import KubeClient
from trainctl.kube.restmapper import NODES, PODS

from tests.support.cluster import trainctl_local
from tests.support.pods import main_pid, pod, wait_pod

pytestmark = pytest.mark.e2e

NODE_A, NODE_B = "trainctl-local", "trainctl-local-2"
SERVE = "import http.server as h; h.HTTPServer(('', 8080), h.SimpleHTTPRequestHandler).serve_forever()"
# Every half second: how many rounds of a busy loop it did per second, and what share of one
# core it had meanwhile.
BUSY = """
import time
rounds, wall, cpu = 0, time.monotonic(), time.process_time()
while True:
    for _ in range(2000):
        pass
    rounds += 1
    now = time.monotonic()
    if now - wall >= 0.5:
        used = time.process_time()
        print(f"{rounds / (now - wall):.1f} {(used - cpu) / (now - wall):.3f}", flush=True)
        rounds, wall, cpu = 0, now, used
"""
# Connects to argv[1]:8080 three times a second and says whether it got through.
KNOCK = """
import socket, sys, time
while True:
    try:
        socket.create_connection((sys.argv[1], 8080), timeout=1).close()
        print("ok", flush=True)
    except OSError:
        print("fail", flush=True)
    time.sleep(0.3)
"""
TICK = "import itertools, time\nfor n in itertools.count():\n    print(n, flush=True)\n    time.sleep(0.2)"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("silent")
    with LocalCluster(root / "cluster", controller=False, workdir=root, nodes=2, node_cpu="1", node_memory="2Gi",
                      lease_renew_interval=1.0, node_monitor_grace_period="4s", network="isolated") as running:
        yield running


@pytest.fixture
def api(cluster: LocalCluster) -> Iterator[KubeClient]:
    client = cluster.client()
    yield client
    for name in (NODE_A, NODE_B):
        try:
            cluster.fault("restore", name)
        except NodeError:
            pass  # not degraded
    for obj in client.list(PODS, "default")[0]:
        client.delete(PODS, "default", obj["metadata"]["name"], grace_period_seconds=0)
    client.close()


def start(api: KubeClient, node: str, obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["nodeName"] = node
    api.create(PODS, obj)
    return wait_pod(api, obj["metadata"]["name"], lambda p: p["status"].get("phase") == "Running", timeout=90)


def printed(cluster: LocalCluster, obj: dict[str, Any]) -> list[str]:
    """What the pod's container printed so far, a line each (CRI log format stripped)."""
    logs = sorted((cluster.directory / "pods" / obj["metadata"]["uid"]).glob("*/*.log"))
    return [line.split(" ", 3)[3] for path in logs for line in path.read_text().splitlines()]


def wait(check: Callable[[], Any], what: str, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"no {what} within {timeout:g}s"
        time.sleep(0.2)
    return found


def readings(cluster: LocalCluster, obj: dict[str, Any], since: int, count: int = 8) -> list[tuple[float, float]]:
    """``count`` readings of :data:`BUSY` printed after its first ``since`` lines (the one
    straddling the change skipped)."""
    def enough() -> list[str]:
        lines = printed(cluster, obj)[since + 1:]
        return lines[:count] if len(lines) >= count else []
    return [(float(rate), float(share)) for rate, share in (line.split() for line in wait(enough, f"{count} readings"))]


def node_ready_since(api: KubeClient, node: str) -> str:
    """When the node last became Ready ("" when it is not Ready)."""
    conditions = api.get(NODES, None, node).get("status", {}).get("conditions") or []
    ready = next((c for c in conditions if c["type"] == "Ready"), {})
    return str(ready.get("lastTransitionTime")) if ready.get("status") == "True" else ""


def process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_cpu_capped_node_runs_its_pods_slowly_until_restored(cluster: LocalCluster, api: KubeClient) -> None:
    busy = start(api, NODE_B, pod("busy", BUSY))
    before = readings(cluster, busy, 0)

    # 2 % of a core: well below the share a busy loop gets even on a crowded machine.
    cluster.fault("degrade", NODE_B, cpu=2)
    capped = readings(cluster, busy, len(printed(cluster, busy)))
    # A pod started later with a limit of its own gets 2 % of that limit (the kernel's least: 1 % of a core).
    late = start(api, NODE_B, pod("late", BUSY, resources={"limits": {"cpu": "500m"}}))
    late_capped = readings(cluster, late, 0)
    assert "degraded: cpu 2%" in trainctl_local("status", "--dir", str(cluster.directory)).stdout
    api.delete(PODS, "default", "late", grace_period_seconds=0)  # the busy pod alone again, as before

    cluster.fault("restore", NODE_B)
    restored = readings(cluster, busy, len(printed(cluster, busy)))

    rate = {name: statistics.median(r for r, _ in values)
            for name, values in (("before", before), ("capped", capped), ("restored", restored))}
    share = {name: statistics.median(s for _, s in values)
             for name, values in (("before", before), ("capped", capped), ("late", late_capped), ("restored", restored))}
    print(f"\n[degrade --cpu 2] rounds/s {rate}, share of a core {share}")
    assert rate["capped"] < 0.5 * rate["before"], rate
    assert rate["restored"] > 1.5 * rate["capped"], rate
    assert share["capped"] < 0.04 and share["late"] < 0.03, share  # the kernel's quota, with room


def test_a_dead_data_link_cuts_a_ready_nodes_pods_off_until_restored(cluster: LocalCluster, api: KubeClient) -> None:
    server = start(api, NODE_B, pod("server", SERVE))
    ip = server["status"]["podIP"]
    client = start(api, NODE_A, pod("knock", KNOCK, args=[ip]))
    wait(lambda: "ok" in printed(cluster, client), "connection to the server")
    ready_since = node_ready_since(api, NODE_B)

    cluster.fault("degrade", NODE_B, net_loss=100)
    cut = len(printed(cluster, client))
    wait(lambda: printed(cluster, client)[cut + 1:][-5:] == ["fail"] * 5, "5 failed connections in a row")
    late = start(api, NODE_B, pod("late-server", SERVE))  # a pod started on the node later is cut off too
    with pytest.raises(OSError):
        _dial(cluster, late["status"]["podIP"])
    # The kubelet's own path is no pod link: past the node monitor's grace the node is Ready,
    # as it has been all along.
    end = time.monotonic() + 8.0
    while time.monotonic() < end:
        assert node_ready_since(api, NODE_B) == ready_since, "the node must stay Ready"
        time.sleep(0.5)
    assert "ok" not in printed(cluster, client)[cut + 1:]

    cluster.fault("restore", NODE_B)
    healed = len(printed(cluster, client))
    wait(lambda: "ok" in printed(cluster, client)[healed:], "connections again after restore")
    assert _dial(cluster, late["status"]["podIP"]) == b"HTTP/1.0 200"


def _dial(cluster: LocalCluster, ip: str) -> bytes:
    """An HTTP GET on ``ip:8080`` through the router, as the kubelet dials (port-forward)."""
    with IsolatedNetwork(cluster.directory, "test", isolation.node_cidr(9)).dial(ip, 8080, 3.0) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        return sock.recv(12)


def test_a_frozen_pod_stops_on_a_healthy_node_and_resumes_when_thawed(cluster: LocalCluster, api: KubeClient) -> None:
    ticker = start(api, NODE_B, pod("ticker", TICK))
    pid = main_pid(ticker)
    assert pid is not None
    wait(lambda: len(printed(cluster, ticker)) >= 3, "ticks")

    cluster.pod_fault("freeze", "default", "ticker")
    # SIGSTOP takes effect when the process next runs: on a busy machine /proc may say R a moment.
    wait(lambda: process_state(pid) == "T", "the pod's process stopped", timeout=10.0)
    time.sleep(0.5)  # a line written just before the stop reaches the log
    frozen = len(printed(cluster, ticker))
    time.sleep(2.0)  # ten ticks' time
    assert len(printed(cluster, ticker)) == frozen, "a frozen pod printed"
    assert api.get(PODS, "default", "ticker")["status"]["phase"] == "Running"
    assert node_ready_since(api, NODE_B)

    thawed = trainctl_local("pod", "thaw", "ticker", "-n", "default", "--dir", str(cluster.directory))
    assert thawed.returncode == 0 and "Pod default/ticker thawed." in thawed.stdout, thawed.stderr
    wait(lambda: len(printed(cluster, ticker)) > frozen, "ticks after the thaw")
    assert process_state(pid) != "T"
    missing = trainctl_local("pod", "freeze", "nobody", "--dir", str(cluster.directory))
    assert missing.returncode == 1 and "pod default/nobody: not found" in missing.stderr, missing.stderr
