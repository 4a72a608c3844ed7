"""``pods/NAME/proxy``, ``services/NAME/proxy`` and ``nodes/NAME/proxy`` through a real kubelet:
what reaches the pod, who may ask, and that a request cannot aim the proxy anywhere else."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.net import free_port
from tests.support.pods import create, phase, pod, wait_pod

ECHO = """
import http.server, json, sys
class Echo(http.server.BaseHTTPRequestHandler):
    def answer(self):
        sent = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        body = json.dumps({"method": self.command, "path": self.path, "headers": dict(self.headers),
                           "body": sent}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_DELETE = answer
http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), Echo).serve_forever()
"""


def kubectl(kube_env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["kubectl", *args], env=kube_env, capture_output=True, text=True, timeout=60)
    assert not check or result.returncode == 0, result.stderr
    return result


def raw(kube_env: dict[str, str], path: str, *flags: str) -> Any:
    return json.loads(kubectl(kube_env, "get", "--raw", path, *flags).stdout)


@pytest.fixture
def web(api: Any, kube_env: dict[str, str]) -> Iterator[int]:
    """A pod ``web`` (label app=web) answering HTTP with what it was sent, its port named http."""
    port = free_port("0.0.0.0")
    spec = pod("web", ECHO, restart_policy="Always", command=["python", "-c", ECHO, str(port)],
               ports=[{"name": "http", "containerPort": port}])
    spec["metadata"]["labels"] = {"app": "web"}
    create(api, spec)
    wait_pod(api, "web", phase("Running"), timeout=60)
    deadline = time.monotonic() + 60
    while kubectl(kube_env, "get", "--raw", f"/api/v1/namespaces/default/pods/web:{port}/proxy/",
                  check=False).returncode != 0:
        assert time.monotonic() < deadline, "the pod's server never answered through the proxy"
        time.sleep(0.5)
    yield port


def test_pod_proxy_reaches_the_pods_port_by_number_or_name(kube_env, web):
    seen = raw(kube_env, f"/api/v1/namespaces/default/pods/web:{web}/proxy/some/path?x=1")
    assert (seen["method"], seen["path"]) == ("GET", "/some/path?x=1")
    assert "Authorization" not in seen["headers"]  # the caller's credential stays at the API server
    assert raw(kube_env, "/api/v1/namespaces/default/pods/http:web:http/proxy/")["path"] == "/"


def test_service_proxy_reaches_a_backend_at_its_target_port(kube_env, web):
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}
    subprocess.run(["kubectl", "apply", "-f", "-"], env=kube_env, input=json.dumps(service), text=True, check=True,
                   capture_output=True, timeout=60)
    assert raw(kube_env, "/api/v1/namespaces/default/services/web:80/proxy/a")["path"] == "/a"
    assert raw(kube_env, "/api/v1/namespaces/default/services/web:http/proxy/b")["path"] == "/b"
    assert raw(kube_env, "/api/v1/namespaces/default/services/web/proxy/c")["path"] == "/c"
    none = kubectl(kube_env, "get", "--raw", "/api/v1/namespaces/default/services/web:81/proxy/", check=False)
    assert none.returncode == 1 and "no endpoints available for service" in none.stderr


def test_kubectl_proxy_serves_the_proxy_subresources(kube_env, web):
    proxy = subprocess.Popen(["kubectl", "proxy", "--port=0"], env=kube_env, stdout=subprocess.PIPE, text=True)
    try:
        assert proxy.stdout is not None
        line = proxy.stdout.readline()  # Starting to serve on 127.0.0.1:PORT
        address = line.strip().rsplit(" ", 1)[-1]
        url = f"http://{address}/api/v1/namespaces/default/pods/web:{web}/proxy/via-kubectl-proxy"
        posted = urllib.request.Request(url, data=b"hello", method="POST")
        with urllib.request.urlopen(posted, timeout=30) as response:
            seen = json.loads(response.read())
        assert (seen["method"], seen["path"], seen["body"]) == ("POST", "/via-kubectl-proxy", "hello")
    finally:
        proxy.terminate()
        proxy.wait(30)


def test_the_proxy_cannot_be_aimed_outside_the_named_object(kube_env, web):
    # A name is an object's name: a host in it is looked up as a pod or Service, and not found.
    for path in ("/api/v1/namespaces/default/pods/http:127.0.0.1:22/proxy/",
                 f"/api/v1/namespaces/default/pods/http:evil.example:{web}/proxy/",
                 "/api/v1/namespaces/default/services/http:1.2.3.4:80/proxy/"):
        result = kubectl(kube_env, "get", "--raw", path, check=False)
        assert result.returncode == 1 and "not found" in result.stderr, (path, result.stderr)
    for path in ("/api/v1/namespaces/default/services/x:1.2.3.4:80/proxy/",
                 "/api/v1/namespaces/default/pods/web:1.2.3.4:80/proxy/",
                 f"/api/v1/namespaces/default/pods/web:{web}@evil:80/proxy/"):
        result = kubectl(kube_env, "get", "--raw", path, check=False)
        assert result.returncode == 1 and "invalid" in result.stderr, (path, result.stderr)
    # A path that looks like a URL is a path on the pod.
    assert raw(kube_env, f"/api/v1/namespaces/default/pods/web:{web}/proxy/http:/evil.example/")["path"] == \
        "/http:/evil.example/"


def test_pods_proxy_needs_its_own_permission(kube_env, web):
    kubectl(kube_env, "create", "role", "reader", "--verb=get,list", "--resource=pods")
    kubectl(kube_env, "create", "rolebinding", "reader", "--role=reader", "--user=alice")
    path = f"/api/v1/namespaces/default/pods/web:{web}/proxy/"
    refused = kubectl(kube_env, "--as=alice", "get", "--raw", path, check=False)
    assert refused.returncode == 1 and 'cannot get resource "pods/proxy"' in refused.stderr, refused.stderr
    kubectl(kube_env, "create", "role", "proxier", "--verb=get", "--resource=pods/proxy")
    kubectl(kube_env, "create", "rolebinding", "proxier", "--role=proxier", "--user=alice")
    assert json.loads(kubectl(kube_env, "--as=alice", "get", "--raw", path).stdout)["path"] == "/"


def test_node_proxy_reaches_the_kubelets_read_only_paths_only(kube_env, kubelet, web):
    node = kubelet.config.node_name
    assert kubectl(kube_env, "get", "--raw", f"/api/v1/nodes/{node}/proxy/healthz").stdout == "ok"
    listed = raw(kube_env, f"/api/v1/nodes/{node}/proxy/pods")
    assert listed["kind"] == "PodList" and [p["metadata"]["name"] for p in listed["items"]] == ["web"]
    hidden = kubectl(kube_env, "get", "--raw", f"/api/v1/nodes/{node}/proxy/exec/default/web/main?command=id",
                     check=False)
    assert hidden.returncode == 1 and "could not find the requested resource" in hidden.stderr, hidden.stderr
