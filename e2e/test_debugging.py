"""Debugging a running cluster as kube users do, with kubectl 1.32 and the Python client:
``kubectl debug`` (an ephemeral container beside its target, a copy of the pod, a pod on a
node), ``kubectl proxy`` and ``get --raw`` through the proxy subresources, and the Python
client's interactive exec writing text to stdin."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from trainctl.cluster.kubelet.sandbox import NONE, SANDBOX_ENV

from tests.support.cluster import E2E
from tests.support.net import free_port
from tests.support.terminal import finished, on_terminal, read_until

pytestmark = pytest.mark.e2e

SERVER = ("import http.server, sys\n"
          "class Hello(http.server.BaseHTTPRequestHandler):\n"
          "    def do_GET(self):\n"
          "        body = ('hello from %s at %s' % (sys.argv[2], self.path)).encode()\n"
          "        self.send_response(200)\n"
          "        self.send_header('Content-Length', str(len(body)))\n"
          "        self.end_headers()\n"
          "        self.wfile.write(body)\n"
          "http.server.ThreadingHTTPServer(('0.0.0.0', int(sys.argv[1])), Hello).serve_forever()\n")


def pod(name: str, command: list[str], namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                                            "labels": {"app": name}},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "python", "command": command}], **spec}}


def wait_for(e2e: E2E, name: str, jsonpath: str, namespace: str = "default", timeout: float = 90) -> None:
    e2e.kubectl("wait", f"--for=jsonpath={jsonpath}", f"pod/{name}", "-n", namespace, f"--timeout={timeout:g}s",
                timeout=timeout + 10)


def delete(e2e: E2E, *pods: str, namespace: str = "default") -> None:
    e2e.kubectl("delete", "pod", *pods, "-n", namespace, "--ignore-not-found", "--wait=true", "--timeout=60s",
                timeout=90)


@pytest.fixture
def sleeper(e2e: E2E) -> Iterator[str]:
    """A running pod ``app`` whose main process carries a marker argument; yields the marker."""
    marker = f"marker-{uuid.uuid4()}"
    e2e.kubectl.apply(pod("app", ["python", "-c", "import time; time.sleep(3600)", marker]))
    try:
        wait_for(e2e, "app", "{.status.phase}=Running")
        yield marker
    finally:
        delete(e2e, "app")


def test_the_python_clients_interactive_exec_writes_text_to_stdin(e2e: E2E, sleeper: str) -> None:
    from kubernetes import client
    from kubernetes.stream import stream

    core = client.CoreV1Api(e2e.api)
    session = stream(core.connect_get_namespaced_pod_exec, "app", "default", command=["sh"], stdin=True,
                     stdout=True, stderr=True, tty=False, _preload_content=False)
    try:
        session.write_stdin("echo $((6*7))\n")  # a str: sent as a text frame
        seen, deadline = "", time.monotonic() + 60
        while "42" not in seen and time.monotonic() < deadline and session.is_open():
            session.update(timeout=1)
            seen += session.read_stdout() if session.peek_stdout() else ""
        assert seen == "42\n"
        session.write_stdin("exit 4\n")
        session.run_forever(timeout=60)
        assert session.returncode == 4
    finally:
        session.close()


def test_kubectl_debug_it_runs_a_shell_beside_its_target(e2e: E2E, sleeper: str) -> None:
    child, terminal = on_terminal(e2e.kubectl, "debug", "-it", "app", "--image=busybox", "--target=main",
                                  "-c", "dbg", "--", "sh")
    try:
        read_until(terminal, b"try pressing enter", timeout=90)
        # The target's process, seen from the debugger (the same PID namespace), then a sum.
        os.write(terminal, f"echo seen=$(cat /proc/[0-9]*/cmdline | tr '\\0' '\\n' | grep -c '^{sleeper}$'); "
                           "echo sum=$((6*7)); exit 3\n".encode())
        seen = read_until(terminal, b"sum=42")
        assert b"seen=1\r\n" in seen, seen
    finally:
        code = finished(child, terminal)
    assert code == 0  # as on kube: an attach carries no exit code; the status has it
    status = e2e.kubectl.json("get", "pod", "app")["status"]
    debugger = next(s for s in status["ephemeralContainerStatuses"] if s["name"] == "dbg")
    assert debugger["state"]["terminated"]["exitCode"] == 3
    assert status["containerStatuses"][0]["state"].get("running"), "the target kept running"


def test_kubectl_debug_copy_to_runs_a_copy_with_the_debugger(e2e: E2E, sleeper: str) -> None:
    try:
        e2e.kubectl("debug", "app", "--copy-to=app-copy", "--image=busybox", "-c", "dbg", "--",
                    "sh", "-c", "echo in the copy; sleep 3600")
        wait_for(e2e, "app-copy", "{.status.phase}=Running")
        copy = e2e.kubectl.json("get", "pod", "app-copy")
        assert [c["name"] for c in copy["spec"]["containers"]] == ["main", "dbg"]
        deadline = time.monotonic() + 60
        while (logs := e2e.kubectl("logs", "app-copy", "-c", "dbg")) != "in the copy\n":
            assert time.monotonic() < deadline, logs
            time.sleep(0.5)
    finally:
        delete(e2e, "app-copy")


def test_kubectl_debug_node_runs_a_pod_there_with_the_nodes_root_at_host(e2e: E2E) -> None:
    node = e2e.kubectl.json("get", "nodes")["items"][0]["metadata"]["name"]
    out = e2e.kubectl("debug", f"node/{node}", "--image=busybox", "--", "cat", "/host/etc/hostname")
    name = next(word for word in out.split() if word.startswith(f"node-debugger-{node}-"))
    try:
        wait_for(e2e, name, "{.status.phase}=Succeeded")
        spec = e2e.kubectl.json("get", "pod", name)["spec"]
        assert spec["nodeName"] == node and spec["hostPID"] and spec["hostNetwork"]
        with open("/etc/hostname") as hostname:
            assert e2e.kubectl("logs", name) == hostname.read()
    finally:
        delete(e2e, name)


@pytest.fixture
def web(e2e: E2E) -> Iterator[int]:
    """A pod ``web`` answering HTTP on a free port, and a Service ``web`` with port 80 to it."""
    port = free_port("0.0.0.0")
    e2e.kubectl.apply(pod("web", ["python", "-c", SERVER, str(port), "the-server"]))
    e2e.kubectl.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                       "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": port}]}})
    try:
        wait_for(e2e, "web", "{.status.phase}=Running")
        deadline = time.monotonic() + 60
        while e2e.kubectl.run("get", "--raw", f"/api/v1/namespaces/default/pods/web:{port}/proxy/",
                              check=False).returncode != 0:
            assert time.monotonic() < deadline, "the pod's server never answered"
            time.sleep(0.5)
        yield port
    finally:
        e2e.kubectl("delete", "service", "web", "--ignore-not-found", timeout=60)
        delete(e2e, "web")


def test_get_raw_through_a_pods_proxy(e2e: E2E, web: int) -> None:
    assert e2e.kubectl("get", "--raw", f"/api/v1/namespaces/default/pods/web:{web}/proxy/") == "hello from the-server at /"


def test_kubectl_proxy_then_curl_a_services_proxy(e2e: E2E, web: int) -> None:
    proxy = e2e.kubectl.popen("proxy", "--port=0")
    try:
        assert proxy.stdout is not None
        address = proxy.stdout.readline().strip().rsplit(" ", 1)[-1]  # Starting to serve on 127.0.0.1:PORT
        host, port = address.rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=30).close()
        url = f"http://{address}/api/v1/namespaces/default/services/web:80/proxy/page"
        if shutil.which("curl"):
            body = subprocess.run(["curl", "-sf", url], capture_output=True, text=True, timeout=60, check=True).stdout
        else:
            with urllib.request.urlopen(url, timeout=60) as response:
                body = response.read().decode()
        assert body == "hello from the-server at /page"
    finally:
        proxy.terminate()
        proxy.wait(30)


@pytest.mark.skipif(os.environ.get(SANDBOX_ENV) == NONE, reason="the fallback path has no pod sandbox")
def test_an_ephemeral_container_sees_its_own_pod_and_nothing_of_another_namespaces(e2e: E2E) -> None:
    secret = f"secret-{uuid.uuid4()}"
    keep = ["python", "-c", "import sys, time; open('/tmp/mark', 'w').write(sys.argv[1]); time.sleep(3600)"]
    for namespace in ("team-a", "team-b"):
        e2e.kubectl("create", "namespace", namespace)
    try:
        e2e.kubectl.apply(pod("mine", [*keep, "mine"], namespace="team-a"))
        e2e.kubectl.apply(pod("theirs", [*keep, secret], namespace="team-b"))
        for namespace, name in (("team-a", "mine"), ("team-b", "theirs")):
            wait_for(e2e, name, "{.status.phase}=Running", namespace=namespace)
        look = (f"cat /tmp/mark; echo; cat /proc/[0-9]*/cmdline | tr '\\0' '\\n' | grep -c '^{secret}$'; "
                f"grep -rl {secret} /tmp 2>/dev/null | wc -l")
        e2e.kubectl("debug", "mine", "-n", "team-a", "--image=busybox", "-c", "dbg", "--", "sh", "-c", look)
        wait_for(e2e, "mine", "{.status.ephemeralContainerStatuses[0].state.terminated.reason}", namespace="team-a")
        # Its own pod's /tmp; no process and no file of the pod in team-b.
        assert e2e.kubectl("logs", "mine", "-n", "team-a", "-c", "dbg").split() == ["mine", "0", "0"]
    finally:
        e2e.kubectl("delete", "namespace", "team-a", "team-b", "--wait=true", "--timeout=90s", timeout=120)
