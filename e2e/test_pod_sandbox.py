"""A pod is a sandbox: tried from inside a pod with the default ServiceAccount, as an attacker.

Each test runs a pod whose program tries what a pod must not manage (read the cluster
directory's admin token, CA key and store, connect to the API server's admin socket, read
another pod's token or environment, kill another pod's process, reach a second cluster's
directory) and prints what it got; the test asserts every attempt failed. Then what a pod
must still have: a ConfigMap at the path its ``volumeMounts`` names, and ``kubectl cp`` to an
absolute path landing in the pod's filesystem, not the machine's.

These need the sandbox (``bwrap``): on the fallback path (``--sandbox=none``) a pod is the
kubelet's user on this machine, as docs/local-cluster.md says, and they do not apply.
"""

from __future__ import annotations

import json
import os
import socket
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainctl.cluster.kubelet.sandbox import NONE, SANDBOX_ENV

from tests.support.cluster import E2E

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(os.environ.get(SANDBOX_ENV) == NONE, reason="the fallback path has no pod sandbox")]

NS = "attacker"

# Tries to open, read or connect to each path given; prints {path: what happened}.
PROBE = textwrap.dedent("""
    import json, os, socket, sys
    found = {}
    for path in sys.argv[1:]:
        try:
            if path.endswith(".sock"):
                s = socket.socket(socket.AF_UNIX)
                s.connect(path)
                found[path] = "connected"
            else:
                with open(path, "rb") as f:
                    found[path] = "read %d bytes" % len(f.read())
        except OSError as exc:
            found[path] = "refused: " + type(exc).__name__
    print("RESULT " + json.dumps(found))
""")


def pod(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "python", "command": command}], **spec}}


def run_to_end(e2e: E2E, manifest: dict[str, Any], timeout: float = 120) -> str:
    """Run the pod to its end; its log."""
    e2e.kubectl.apply(manifest)
    name = manifest["metadata"]["name"]
    deadline = time.monotonic() + timeout
    while e2e.kubectl.json("get", "pod", "-n", NS, name).get("status", {}).get("phase") not in ("Succeeded", "Failed"):
        assert time.monotonic() < deadline, f"pod {name} did not end in {timeout:g}s"
        time.sleep(1)
    return e2e.kubectl("logs", "-n", NS, name)


def result(log: str) -> dict[str, str]:
    lines = [line for line in log.splitlines() if line.startswith("RESULT ")]
    assert lines, log
    return dict(json.loads(lines[-1][len("RESULT "):]))


def probe(e2e: E2E, name: str, paths: list[str]) -> dict[str, str]:
    return result(run_to_end(e2e, pod(name, ["python", "-c", PROBE, *paths])))


@pytest.fixture
def attacker(e2e: E2E) -> Iterator[E2E]:
    e2e.kubectl("create", "namespace", NS)
    yield e2e
    e2e.kubectl("delete", "namespace", NS, "--wait=true", "--timeout=60s", timeout=90)


def sleeper(e2e: E2E, name: str) -> dict[str, Any]:
    e2e.kubectl.apply(pod(name, ["python", "-c", "import time; time.sleep(3600)"]))
    e2e.kubectl("wait", "-n", NS, "--for=jsonpath={.status.phase}=Running", f"pod/{name}", "--timeout=60s", timeout=70)
    return dict(e2e.kubectl.json("get", "pod", "-n", NS, name))


def test_the_cluster_directory_and_the_admin_socket_are_out_of_reach(attacker: E2E) -> None:
    directory = attacker.cluster.directory
    targets = [str(directory / "token"), str(directory / "pki" / "ca.key"), str(directory / "pki" / "sa.key"),
               str(directory / "state.db"), str(directory / "kubeconfig"), str(directory / "run" / "apiserver.sock")]
    assert all(Path(path).exists() for path in targets)
    found = probe(attacker, "cluster-dir", targets)
    assert all(outcome.startswith("refused") for outcome in found.values()), found


def test_another_pods_token_and_processes_are_out_of_reach(attacker: E2E) -> None:
    victim = sleeper(attacker, "victim")
    uid = victim["metadata"]["uid"]
    host_pid = int(victim["status"]["containerStatuses"][0]["containerID"].split("://")[1])
    token = attacker.cluster.directory / "pods" / uid / "serviceaccount" / "token"
    assert token.exists()
    script = PROBE + textwrap.dedent("""
        pid = int(os.environ["VICTIM_PID"])
        others = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if b"time.sleep(36" + b"00)" in open(f"/proc/{entry}/cmdline", "rb").read():
                        others.append(entry)
                except OSError:
                    pass
        print("SLEEPERS " + json.dumps(others))
        try:
            os.kill(pid, 9)
            print("KILLED", pid)
        except OSError as exc:
            print("KILL refused", pid, type(exc).__name__)
    """)
    manifest = pod("thief", ["python", "-c", script, str(token), f"/proc/{host_pid}/environ"])
    manifest["spec"]["containers"][0]["env"] = [{"name": "VICTIM_PID", "value": str(host_pid)}]
    log = run_to_end(attacker, manifest)
    found = result(log)
    assert all(outcome.startswith("refused") for outcome in found.values()), found
    assert "SLEEPERS []" in log, log
    assert "KILLED" not in log, log
    assert attacker.kubectl.json("get", "pod", "-n", NS, "victim")["status"]["phase"] == "Running"


def test_a_second_clusters_directory_is_out_of_reach(attacker: E2E, tmp_path: Path) -> None:
    """Another cluster's directory on this machine: its token and API server socket."""
    other = tmp_path / "other-cluster"
    (other / "run").mkdir(parents=True)
    (other / "token").write_text("admin-token-of-another-cluster\n")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(other / "run" / "apiserver.sock"))
    listener.listen(4)
    os.chmod(other / "run" / "apiserver.sock", 0o777)  # even a socket anyone may connect to
    try:
        found = probe(attacker, "second-cluster", [str(other / "token"), str(other / "run" / "apiserver.sock")])
    finally:
        listener.close()
    assert all(outcome.startswith("refused") for outcome in found.values()), found


def test_kubectl_cp_to_an_absolute_path_lands_in_the_pod(attacker: E2E, tmp_path: Path) -> None:
    sleeper(attacker, "target")
    source = tmp_path / "payload.txt"
    source.write_text("dropped\n")
    landing = f"/tmp/landed-{uuid.uuid4().hex}"
    try:
        attacker.kubectl("cp", str(source), f"{NS}/target:{landing}")
        assert attacker.kubectl("exec", "-n", NS, "target", "--", "cat", landing) == "dropped\n"
        assert not Path(landing).exists()
    finally:
        Path(landing).unlink(missing_ok=True)


def test_a_configmap_mounted_at_opt_is_there(attacker: E2E) -> None:
    attacker.kubectl.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "scripts", "namespace": NS},
                            "data": {"port-server.py": "print('served from the ConfigMap')\n", "other": "x"}})
    manifest = pod("mounted", ["python", "/opt/port-server.py"],
                   volumes=[{"name": "scripts", "configMap": {"name": "scripts"}},
                            {"name": "scratch", "emptyDir": {}}])
    manifest["spec"]["containers"][0]["volumeMounts"] = [{"name": "scripts", "mountPath": "/opt"},
                                                         {"name": "scratch", "mountPath": "/scratch"}]
    manifest["spec"]["containers"][0]["command"] = [
        "sh", "-c", "python /opt/port-server.py && echo kept > /scratch/f && cat /scratch/f && ls /opt"]
    log = run_to_end(attacker, manifest)
    assert "served from the ConfigMap" in log, log
    assert "kept" in log, log
    assert "other" in log.split(), log
