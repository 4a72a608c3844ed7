"""The isolated pod network on a two-node cluster: namespaces, addresses, Services, the
`kubernetes` Service, dialing in, partition and heal; and the choice of mode.

The pods are plain Python one-liners; the e2e suite runs real torch jobs on the same network
(e2e/test_pod_network.py).
"""

from __future__ import annotations

import subprocess
import time
import urllib.request

import pytest

from trainctl.cluster.apiserver.system_objects import cluster_ip
from trainctl.cluster.kubelet.runtime import process_start_time
from trainctl.cluster.local_cluster import ClusterError, LocalCluster
from trainctl.cluster.machines import NodeError
from trainctl.cluster.network import isolation, nat
from trainctl.cluster.network.podnet import IsolatedNetwork
from trainctl.kube.restmapper import NODES, PODS, SERVICES

from tests.support.cluster import trainctl_local
from tests.support.net import free_port
from tests.support.pods import main_pid, pod, wait_pod, wait_pod_gone

SERVE = "import http.server as h; h.HTTPServer(('', 8080), h.SimpleHTTPRequestHandler).serve_forever()"
NODE_A, NODE_B = "trainctl-local", "trainctl-local-2"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("network")
    with LocalCluster(root / "cluster", controller=False, workdir=root, nodes=2, node_cpu="1", node_memory="2Gi",
                      lease_renew_interval=1.0, node_monitor_grace_period="4s", network="isolated") as running:
        yield running


@pytest.fixture
def api(cluster):
    client = cluster.client()
    yield client
    for obj in client.list(PODS, "default")[0]:
        client.delete(PODS, "default", obj["metadata"]["name"], grace_period_seconds=0)
    for obj in client.list(SERVICES, "default")[0]:
        if obj["metadata"]["name"] != "kubernetes":
            client.delete(SERVICES, "default", obj["metadata"]["name"])
    client.close()


def on(node, obj, **labels):
    obj["spec"]["nodeName"] = node
    obj["metadata"]["labels"] = labels
    return obj


def running(api, name):
    return wait_pod(api, name, lambda p: p["status"].get("phase") == "Running", timeout=90)


def finished(api, name):
    return wait_pod(api, name, lambda p: p["status"].get("phase") in ("Succeeded", "Failed"), timeout=90)


def output(cluster, obj):
    uid = obj["metadata"]["uid"]
    return "".join(line.split(" ", 3)[3] + "\n" for path in (cluster.directory / "pods" / uid).glob("*/*.log")
                   for line in path.read_text().splitlines())


def dial(cluster, ip, port=8080, timeout=3.0):
    """An HTTP GET on ``ip:port`` through the router, as the kubelet dials (port-forward)."""
    with IsolatedNetwork(cluster.directory, "test", isolation.node_cidr(9)).dial(ip, port, timeout) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        return sock.recv(12)


def node_ready(api, node):
    conditions = api.get(NODES, None, node).get("status", {}).get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), "Unknown")


def wait(check, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {timeout:g}s"
        time.sleep(0.2)


def test_each_pod_has_its_own_port_space_address_and_hostname(cluster, api):
    """Two pods on one node and one on the other bind the same port: none waits."""
    script = ("import socket; s = socket.socket(); s.bind(('0.0.0.0', 23456)); "
              "print(socket.gethostname(), socket.gethostbyname(socket.gethostname())); import time; time.sleep(300)")
    for name, node in (("a", NODE_A), ("b", NODE_A), ("c", NODE_B)):
        api.create(PODS, on(node, pod(name, script, ports=[{"containerPort": 23456}])))
    pods = {name: running(api, name) for name in "abc"}
    ips = {name: p["status"]["podIP"] for name, p in pods.items()}
    assert ips["a"].startswith("10.244.0.") and ips["b"].startswith("10.244.0.") and ips["c"].startswith("10.244.1.")
    assert len(set(ips.values())) == 3
    wait(lambda: all(output(cluster, p) for p in pods.values()), "pod output")
    for name, p in pods.items():
        assert output(cluster, p).split() == [name, ips[name]]  # its own hostname, resolving to its own IP


def test_a_pod_resolves_its_hostname_and_names_a_peers_address_without_dns(cluster, api):
    """c10d names both ends of every socket with getnameinfo; with no DNS server to ask, a
    lookup of a peer pod's address must fall back to the address ("err=-3" otherwise), and
    the pod's own hostname resolves from its hosts file, also at the C level (getent)."""
    api.create(PODS, on(NODE_B, pod("peer", "import time; time.sleep(300)")))
    peer = running(api, "peer")["status"]["podIP"]
    script = ("import socket, subprocess\n"
              "print(socket.gethostbyname(socket.gethostname()))\n"
              "print(subprocess.run(['getent', 'hosts', socket.gethostname()], capture_output=True, text=True,"
              " check=True).stdout.split()[0])\n"
              f"print(socket.getnameinfo(({peer!r}, 23456), socket.NI_NUMERICSERV)[0])\n")
    api.create(PODS, on(NODE_A, pod("looker", script)))
    done = finished(api, "looker")
    assert done["status"]["phase"] == "Succeeded", output(cluster, done)
    own = done["status"]["podIP"]
    assert output(cluster, done).split() == [own, own, peer]


def test_pods_reach_each_other_across_nodes_by_service_and_the_api_server_by_the_kubernetes_service(cluster, api):
    """The API server's certificate names the `kubernetes` ClusterIP, which the router forwards."""
    api.create(PODS, on(NODE_B, pod("server", SERVE), app="server"))
    api.create(SERVICES, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
                          "spec": {"selector": {"app": "server"}, "ports": [{"port": 80, "targetPort": 8080}]}})
    running(api, "server")
    ca = cluster.directory / "pki" / "ca.crt"
    script = (
        "import json, ssl, sys, time, urllib.request\n"
        "for attempt in range(100):\n"
        "    try:\n"
        "        print('http', urllib.request.urlopen('http://web.default.svc.cluster.local/').status); break\n"
        "    except OSError: time.sleep(0.2)\n"
        f"context = ssl.create_default_context(cafile={str(ca)!r})\n"
        f"request = urllib.request.Request('https://{cluster_ip(isolation.SERVICE_CIDR)}:443/version')\n"
        "print('api', json.load(urllib.request.urlopen(request, context=context))['major'])\n")
    api.create(PODS, on(NODE_A, pod("client", script)))
    done = finished(api, "client")
    assert done["status"]["phase"] == "Succeeded", output(cluster, done)
    assert output(cluster, done).split() == ["http", "200", "api", "1"]
    # The name is resolved to the ClusterIP in the pod network, served by the router.
    assert api.get(SERVICES, "default", "web")["spec"]["clusterIP"].startswith("10.96.")
    # A process outside the pod network reaches a pod through the router, as port-forward does.
    assert _answers(cluster, api.get(PODS, "default", "server")["status"]["podIP"])


def _gateway_mac(cluster, node_index=0):
    """The MAC address of a node's bridge (its pods' gateway), read in the router's namespaces."""
    out = subprocess.run(["nsenter", "-t", str(cluster.network.pid), "-U", "-n", "--preserve-credentials",
                          "ip", "-br", "link", "show", f"cbr{node_index}"], capture_output=True, text=True, check=True)
    return out.stdout.split()[2]


def test_the_gateway_keeps_its_address_while_pods_come_and_go(cluster, api):
    """A Linux bridge given no address takes the lowest of its ports': when the pod whose
    port that was goes, the gateway address every other pod has cached leads nowhere for
    about a minute (no Service, no API server, no other node)."""
    before = _gateway_mac(cluster)
    seen = {before}
    for name in ("p", "q", "r", "s"):
        api.create(PODS, on(NODE_A, pod(name, "import time; time.sleep(300)")))
        running(api, name)
        seen.add(_gateway_mac(cluster))
    for name in ("p", "q", "r", "s"):
        api.delete(PODS, "default", name, grace_period_seconds=0)
    for name in ("p", "q", "r", "s"):
        wait_pod_gone(api, name)
    seen.add(_gateway_mac(cluster))
    assert seen == {before}


def test_a_service_of_two_pods_on_the_clients_own_node_is_balanced_by_the_kernel(cluster, api):
    """Hairpin: the client, both endpoints and the gateway share one bridge; without the
    masquerade each answer would come from an address the client never called."""
    assert (cluster.directory / nat.SERVICES_FILE).read_text().startswith("kernel (nftables NAT)")
    hello = ("import http.server as h, socket\n"
             "class Name(h.BaseHTTPRequestHandler):\n"
             "    def do_GET(self):\n"
             "        self.send_response(200); self.end_headers(); self.wfile.write(socket.gethostname().encode())\n"
             "h.HTTPServer(('', 8080), Name).serve_forever()\n")
    for name in ("one", "two"):
        api.create(PODS, on(NODE_A, pod(name, hello), app="pair"))
    api.create(SERVICES, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "pair", "namespace": "default"},
                          "spec": {"selector": {"app": "pair"}, "ports": [{"port": 80, "targetPort": 8080}]}})
    for name in ("one", "two"):
        running(api, name)
    script = ("import time, urllib.request\n"
              "seen = set()\n"
              "for attempt in range(400):\n"
              "    try:\n"
              "        seen.add(urllib.request.urlopen('http://pair/', timeout=5).read().decode())\n"
              "    except OSError:\n"
              "        time.sleep(0.1)\n"
              "    if len(seen) == 2: break\n"
              "print(*sorted(seen))\n")
    api.create(PODS, on(NODE_A, pod("caller", script)))
    done = finished(api, "caller")
    assert done["status"]["phase"] == "Succeeded", output(cluster, done)
    assert output(cluster, done).split() == ["one", "two"]


def test_the_kernels_rule_set_is_valid_for_nft(tmp_path):
    """Every shape the router writes (one endpoint, several, none, hairpins) parses."""
    rules = {("10.96.0.5", 80): [("10.244.0.2", 8080)],
             ("10.96.0.6", 23456): [("10.244.0.3", 23456), ("10.244.1.2", 23456), ("10.244.1.7", 23456)],
             ("10.96.0.7", 443): []}
    script = nat.ruleset(rules, ["cbr0", "cbr1"])
    check = subprocess.run(["unshare", "-U", "-r", "-n", "nft", "-c", "-f", "-"], input=script, capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr
    assert "10.96.0.7" not in script  # no endpoint, no rule: refused, as kube-proxy's REJECT


def test_a_host_port_reaches_the_pod_from_the_machine(cluster, api):
    """hostPort keeps its meaning: the machine's port, forwarded into the pod's own network."""
    host_port = free_port("0.0.0.0")
    api.create(PODS, on(NODE_B, pod("exposed", SERVE, ports=[{"containerPort": 8080, "hostPort": host_port}])))
    running(api, "exposed")

    def answers():
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{host_port}/", timeout=3).status == 200
        except OSError:
            return False
    wait(answers, "the pod answering on its hostPort")


def test_a_partitioned_node_keeps_its_processes_and_heals_without_the_deleted_ones(cluster, api):
    for name in ("kept", "deleted"):
        api.create(PODS, on(NODE_B, pod(name, SERVE)))
    pods = {name: running(api, name) for name in ("kept", "deleted")}
    pids = {name: main_pid(p) for name, p in pods.items()}
    wait(lambda: _answers(cluster, pods["kept"]["status"]["podIP"]), "the pod serving")

    cluster.partition_node(NODE_B)
    for fault in (cluster.kill_node, cluster.freeze_node, cluster.partition_node):
        with pytest.raises(NodeError, match="partitioned"):
            fault(NODE_B)
    with pytest.raises(OSError):
        dial(cluster, pods["kept"]["status"]["podIP"], timeout=2)
    wait(lambda: node_ready(api, NODE_B) != "True", "NotReady node")
    api.delete(PODS, "default", "deleted", grace_period_seconds=0)  # as the lost-node path does
    wait_pod_gone(api, "deleted")
    assert all(process_start_time(pid) for pid in pids.values()), "a partition must not stop processes"

    cluster.heal_node(NODE_B)
    wait(lambda: process_start_time(pids["deleted"]) is None, "the deleted pod's process killed")
    wait(lambda: node_ready(api, NODE_B) == "True", "Ready node")
    wait(lambda: _answers(cluster, pods["kept"]["status"]["podIP"]), "the kept pod reachable again")
    assert process_start_time(pids["kept"]) is not None
    with pytest.raises(OSError):
        dial(cluster, pods["deleted"]["status"]["podIP"], timeout=2)


def _answers(cluster, ip):
    try:
        return dial(cluster, ip, timeout=2) == b"HTTP/1.0 200"
    except OSError:
        return False


def test_the_mode_is_in_status_and_partition_needs_the_isolated_network(tmp_path):
    directory = tmp_path / "shared"
    up = trainctl_local("up", "--dir", str(directory), "--detach", "--no-controller", "--network", "shared", cwd=tmp_path)
    try:
        assert up.returncode == 0, up.stderr
        assert "Pod network: shared: every pod on this machine's network" in up.stdout
        status = trainctl_local("status", "--dir", str(directory))
        assert "Pod network: shared: every pod on this machine's network" in status.stdout, status.stdout
        assert "network " not in status.stdout  # no router in shared mode
        refused = trainctl_local("node", "partition", "trainctl-local", "--dir", str(directory))
        assert refused.returncode == 1 and "needs the isolated pod network" in refused.stderr, refused.stderr
        assert "shared" in (directory / "logs" / "kubelet.log").read_text().split("pod network: ", 1)[1].split()[0]
    finally:
        trainctl_local("down", "--dir", str(directory))


def test_isolated_is_refused_aloud_where_the_machine_refuses_namespaces(monkeypatch, tmp_path):
    monkeypatch.setattr(isolation, "isolation_problem", lambda: "unprivileged user namespaces are refused here (x)")
    assert isolation.choose("auto") == (isolation.SHARED, "isolated is not possible: "
                                        "unprivileged user namespaces are refused here (x)")
    with pytest.raises(ClusterError, match="--network isolated: unprivileged user namespaces are refused here"):
        LocalCluster(tmp_path / "c", network="isolated").choose_network()
    monkeypatch.setattr(isolation, "isolation_problem", lambda: None)
    assert isolation.choose("auto")[0] == isolation.ISOLATED
    assert isolation.choose("shared")[0] == isolation.SHARED



def test_after_the_router_restarts_kubelets_and_new_pods_are_back_on_the_network(cluster, api):
    """A restarted router knows no node: each kubelet tells it again on its next request."""
    cluster.network.kill()
    cluster.network.start()
    api.create(PODS, on(NODE_B, pod("after", SERVE)))
    after = running(api, "after")
    wait(lambda: _answers(cluster, after["status"]["podIP"]), "the new pod reachable")
    assert node_ready(api, NODE_B) == "True"
