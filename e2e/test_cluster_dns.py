"""Names for every process: a shell and curl in a pod resolve Service and pod names through the cluster DNS.

On the isolated network each pod's resolv.conf names ``kube-system/kube-dns`` (answered by
the network's router) with its namespace's search path. The client pod here is a shell,
not Python (so the ``sitecustomize`` resolver plays no part), and builds every name at run
time (so the kubelet's rewriting of Service names in a command line plays none either):
what it resolves, the DNS answered.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import E2E, scratch_cluster

pytestmark = pytest.mark.e2e

NS = "names"

# Each name is built from pieces ("${W}b" is "web") so no argument holds a Service name.
CLIENT = textwrap.dedent("""
    W=we; H=hl; S=svc
    cat /etc/resolv.conf
    for i in $(seq 90); do getent hosts "web-0.${W}b-$H" >/dev/null && break; sleep 1; done
    echo "SHORT $(getent hosts "${W}b")"
    echo "FQDN $(getent hosts "${W}b.names.$S.cluster.local")"
    echo "HEADLESS $(getent hosts "${W}b-$H")"
    echo "POD $(getent hosts "web-0.${W}b-$H")"
    echo "OTHERNS $(getent hosts "kube-dns.kube-system")"
    getent hosts "nothing-here.names.$S.cluster.local" || echo "UNKNOWN not found"
    getent hosts "${W}b.names.$S.another-cluster.example" || echo "FOREIGN not found"
    echo "CURL $(curl -s -m 30 "http://${W}b/")"
""")


SERVER = textwrap.dedent("""
    import http.server
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"served-by-web-0"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    http.server.HTTPServer(("", 8080), Handler).serve_forever()
""")


def pod(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "busybox", "command": command}], **spec}}


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"app": "web-0"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}], **spec}}


@pytest.fixture
def isolated(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, network="isolated") as env:
        yield env


def _phase(env: E2E, name: str) -> str:
    return str(env.kubectl.json("get", "pod", "-n", NS, name).get("status", {}).get("phase"))


def _wait(env: E2E, what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g}s\n{env.kubectl('describe', 'pod', '-n', NS)}"
        time.sleep(1)
    return value


@pytest.mark.timeout(600)
def test_a_shell_and_curl_in_a_pod_resolve_service_and_pod_names(isolated: E2E) -> None:
    env = isolated
    assert env.cluster.network_mode == "isolated"
    dns_service = env.kubectl.json("get", "svc", "-n", "kube-system", "kube-dns")
    assert dns_service["spec"]["clusterIP"] == "10.96.0.10"
    env.kubectl("create", "namespace", NS)
    env.kubectl.apply(pod("web-0", ["python", "-c", SERVER], hostname="web-0", subdomain="web-hl"))
    env.kubectl.apply(service("web"))
    env.kubectl.apply(service("web-hl", clusterIP="None"))
    web_ip = _wait(env, "web-0 running with an IP", lambda: _phase(env, "web-0") in ("Running", "Failed") and env.kubectl.json(
        "get", "pod", "-n", NS, "web-0")["status"].get("podIP"), 180)
    assert _phase(env, "web-0") == "Running", env.kubectl("logs", "-n", NS, "web-0")
    cluster_ip = env.kubectl.json("get", "svc", "-n", NS, "web")["spec"]["clusterIP"]

    env.kubectl.apply(pod("client", ["sh", "-c", CLIENT]))
    _wait(env, "the client pod's end", lambda: _phase(env, "client") in ("Succeeded", "Failed"), 240)
    log = env.kubectl("logs", "-n", NS, "client")
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] if " " in line else "" for line in log.splitlines()}

    assert "search names.svc.cluster.local svc.cluster.local cluster.local" in log, log
    assert "nameserver 10.96.0.10" in log and "options ndots:5" in log, log
    assert lines["SHORT"].split() == [cluster_ip, "web.names.svc.cluster.local"], log
    assert lines["FQDN"].split()[0] == cluster_ip, log
    assert lines["HEADLESS"].split()[0] == web_ip, log
    assert lines["POD"].split() == [web_ip, "web-0.web-hl.names.svc.cluster.local"], log
    assert lines["OTHERNS"].split()[0] == "10.96.0.10", log
    assert lines["UNKNOWN"] == "not found" and lines["FOREIGN"] == "not found", log
    assert lines["CURL"] == "served-by-web-0", log
