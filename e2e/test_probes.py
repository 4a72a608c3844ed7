"""Liveness, readiness and startup probes on the embedded kubelet, as a user sees them with kubectl.

A liveness probe that fails restarts the container (``Unhealthy`` and ``Killing`` Events,
``restartCount`` growing), a readiness probe decides the container's ``ready`` and the pod's
``Ready`` condition, a startup probe holds the other two back until it succeeds, and a
tcpSocket probe dials the pod's address. Each pod serves on its own pod IP, never on a port
of the machine, so the tests run beside any other cluster.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.cluster import E2E, scratch_cluster
from tests.support.pods import pod_scratch
from tests.support.waiting import wait_on

pytestmark = pytest.mark.e2e

POD_IP = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    with scratch_cluster(tmp_path_factory.mktemp("probes"), backoff_base=1.0, controller=False,
                         controlplane_args=["--controllers", "node-lifecycle,endpoint"]) as cluster:
        yield cluster


def eventually(what: str, check: Callable[[], Any], timeout: float = 90) -> Any:
    found = wait_on(threading.Condition(), check, timeout, recheck=1.0)
    assert found, f"no {what} within {timeout:g}s"
    return found


def pod(name: str, script: str, restart: str = "Always", **probes: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": restart, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "app", "image": "busybox", "command": ["sh", "-c", script],
                                     "env": [POD_IP], **probes}]}}


def status(env: E2E, name: str) -> dict[str, Any]:
    found: dict[str, Any] = env.kubectl.json("get", "pod", name)
    return found


def container(pod: dict[str, Any]) -> dict[str, Any]:
    statuses: list[dict[str, Any]] = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return statuses[0]


def condition(pod: dict[str, Any], kind: str) -> str:
    return next((c["status"] for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == kind), "")


def events(env: E2E, name: str, reason: str) -> list[str]:
    listed = env.kubectl.json("get", "events", "--field-selector", f"involvedObject.name={name},reason={reason}")
    return [event["message"] for event in listed["items"]]


def test_a_failing_liveness_probe_restarts_the_container(env: E2E):
    healthy = pod_scratch(env.cluster.directory) / f"healthy-{uuid.uuid4().hex[:6]}"  # seen by the pod and its probes
    script = f"touch {healthy}; sleep 3; rm -f {healthy}; sleep 600"
    env.kubectl.apply(pod("liveness-exec", script, livenessProbe={
        "exec": {"command": ["cat", str(healthy)]}, "periodSeconds": 1, "failureThreshold": 2}))
    restarted = eventually("two restarts", lambda: (p := status(env, "liveness-exec")) and
                           container(p).get("restartCount", 0) >= 2 and p, 180)
    assert restarted["status"]["phase"] == "Running"
    last = container(restarted)["lastState"]["terminated"]
    assert last["exitCode"] in (137, 143) and last["reason"] == "Error"
    unhealthy = events(env, "liveness-exec", "Unhealthy")
    assert f"Liveness probe failed: cat: {healthy}: No such file or directory\n" in unhealthy
    assert "Container app failed liveness probe, will be restarted" in events(env, "liveness-exec", "Killing")
    describe = env.kubectl("describe", "pod", "liveness-exec")
    assert "Liveness:" in describe and "exec [cat" in describe


def through_service(env: E2E, pod_name: str, url: str) -> str:
    """What a Python process in the pod gets from ``url`` (a Service name resolves there)."""
    script = ("import sys, urllib.request\ntry: print(urllib.request.urlopen(sys.argv[1], timeout=5).status)\n"
              "except Exception as exc: print('error', exc)")
    return env.kubectl("exec", pod_name, "--", "python", "-c", script, url, timeout=60).strip()


def endpoint_addresses(env: E2E, service: str) -> tuple[list[str], list[str]]:
    """(ready, not ready) pod IPs of the Service's Endpoints, as the endpoint controller wrote them."""
    found = env.kubectl.run("get", "endpoints", service, "-o", "json", check=False)
    if found.returncode != 0:
        return [], []
    subsets = json.loads(found.stdout).get("subsets") or []
    return ([a["ip"] for s in subsets for a in s.get("addresses") or []],
            [a["ip"] for s in subsets for a in s.get("notReadyAddresses") or []])


def test_a_readiness_probe_follows_the_served_file(env: E2E):
    served = pod_scratch(env.cluster.directory) / f"www-{uuid.uuid4().hex[:6]}"  # the pod sees it, also in its sandbox
    served.mkdir()
    script = f'exec python -m http.server --bind "$POD_IP" --directory {served} 8080'
    web = pod("readiness-http", script, readinessProbe={
        "httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 1, "failureThreshold": 1})
    web["metadata"]["labels"] = {"app": "web"}
    env.kubectl.apply(web)
    env.kubectl.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                       "spec": {"selector": {"app": "web"}, "ports": [{"port": 8088, "targetPort": 8080}]}})
    env.kubectl.apply(pod("client", "sleep 600"))
    eventually("a 404 from the probe", lambda: "Readiness probe failed: HTTP probe failed with statuscode: 404"
               in events(env, "readiness-http", "Unhealthy"))
    waiting = status(env, "readiness-http")
    assert waiting["status"]["phase"] == "Running"
    assert container(waiting)["ready"] is False and container(waiting)["started"] is True
    assert condition(waiting, "Ready") == condition(waiting, "ContainersReady") == "False"

    (served / "ready").write_text("ok")
    ready = eventually("Ready", lambda: (p := status(env, "readiness-http")) and condition(p, "Ready") == "True" and p)
    assert container(ready)["ready"] is True and condition(ready, "ContainersReady") == "True"
    ip = ready["status"]["podIP"]
    eventually("the pod among the Endpoints' addresses", lambda: endpoint_addresses(env, "web") == ([ip], []))
    eventually("the Service serving the ready pod",
               lambda: through_service(env, "client", "http://web:8088/") == "200")

    (served / "ready").unlink()
    unready = eventually("not Ready", lambda: (p := status(env, "readiness-http")) and
                         condition(p, "Ready") == "False" and p)
    assert container(unready)["ready"] is False and container(unready)["restartCount"] == 0
    ready_condition = next(c for c in unready["status"]["conditions"] if c["type"] == "Ready")
    assert ready_condition["reason"] == "ContainersNotReady"
    assert ready_condition["message"] == "containers with unready status: [app]"
    eventually("the pod among the not-ready addresses", lambda: endpoint_addresses(env, "web") == ([], [ip]))
    eventually("the unready pod out of the Service",
               lambda: through_service(env, "client", "http://web:8088/").startswith("error"))


def test_a_startup_probe_holds_liveness_back(env: E2E):
    started = pod_scratch(env.cluster.directory) / f"started-{uuid.uuid4().hex[:6]}"  # seen by the pod and its probes
    check = {"exec": {"command": ["cat", str(started)]}, "periodSeconds": 1}
    env.kubectl.apply(pod("slow-start", f"sleep 12; touch {started}; sleep 600",
                          startupProbe={**check, "failureThreshold": 60}, livenessProbe={**check, "failureThreshold": 1}))
    eventually("a failed startup probe", lambda: events(env, "slow-start", "Unhealthy"))
    assert container(status(env, "slow-start"))["started"] is False
    done = eventually("started", lambda: (p := status(env, "slow-start")) and container(p).get("started") and p)
    assert container(done)["ready"] is True and container(done)["restartCount"] == 0
    said = events(env, "slow-start", "Unhealthy")
    assert said and all(message.startswith("Startup probe failed: ") for message in said)
    assert not events(env, "slow-start", "Killing")


def test_tcp_socket_probes_dial_the_pods_address(env: E2E):
    listen = ('import os, socket, time; time.sleep(2); s = socket.socket(); '
              's.bind((os.environ["POD_IP"], 8081)); s.listen(); time.sleep(600)')
    env.kubectl.apply(pod("tcp-ready", f"exec python -c '{listen}'",
                          readinessProbe={"tcpSocket": {"port": 8081}, "periodSeconds": 1}))
    env.kubectl("wait", "--for=condition=Ready", "pod/tcp-ready", "--timeout=90s", timeout=100)

    env.kubectl.apply(pod("tcp-dead", "sleep 600", restart="Never",
                          livenessProbe={"tcpSocket": {"port": 8082}, "periodSeconds": 1, "failureThreshold": 2}))
    failed = eventually("the pod failed", lambda: (p := status(env, "tcp-dead")) and
                        p["status"].get("phase") == "Failed" and p, 120)
    ip = failed["status"]["podIP"]
    assert f"Liveness probe failed: dial tcp {ip}:8082: connect: connection refused" in events(env, "tcp-dead", "Unhealthy")
    assert events(env, "tcp-dead", "Killing") == ["Container app failed liveness probe"]  # Never: not restarted
    assert container(failed)["restartCount"] == 0
