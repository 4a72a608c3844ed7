"""kubectl exec, exec -it, cp, port-forward, attach and run -i against the embedded cluster.

Each goes kubectl → API server (``pods/exec``, ``pods/attach``, ``pods/portforward``) → the
node's kubelet streaming server → a process in the pod, with the protocols kubectl 1.32
speaks (WebSocket channels; SPDY/3.1 tunnelled in WebSocket for port-forward).
"""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import E2E, scratch_cluster
from tests.support.kubectl import Kubectl
from tests.support.listener import recording_listener
from tests.support.net import free_port
from tests.support.terminal import finished, on_terminal, prompt, read_until

pytestmark = pytest.mark.e2e

POD = "streamed"


def pod(name: str, command: list[str], **container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "python", "command": command, **container}]}}


def wait_running(e2e: E2E, name: str, timeout: float = 60) -> dict[str, Any]:
    e2e.kubectl("wait", "--for=jsonpath={.status.phase}=Running", f"pod/{name}", f"--timeout={timeout:g}s",
                timeout=timeout + 10)
    return e2e.kubectl.json("get", "pod", name)


def wait_listening(e2e: E2E, name: str, port: int) -> None:
    """Until the pod's server accepts connections, asked from inside the pod: kubectl
    port-forward ends at the first connection the pod refuses."""
    probe = ("import socket, sys, time\nend = time.monotonic() + 60\nwhile True:\n"
             " try: socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close(); break\n"
             " except OSError:\n  assert time.monotonic() < end; time.sleep(0.2)")
    ip = e2e.kubectl.json("get", "pod", name)["status"]["podIP"]
    e2e.kubectl("exec", name, "--", "python", "-c", probe, ip, str(port), timeout=90)


@pytest.fixture
def running(e2e: E2E) -> Iterator[dict[str, Any]]:
    """A pod that sleeps, with an env value, a working directory and a memory limit."""
    workdir = e2e.workdir / "streamed"
    workdir.mkdir(exist_ok=True)
    e2e.kubectl.apply(pod(POD, ["python", "-c", "import time; time.sleep(3600)"], workingDir=str(workdir),
                          env=[{"name": "GREETING", "value": "hello from the pod"}],
                          resources={"limits": {"memory": "200Mi"}}))
    try:
        yield wait_running(e2e, POD)
    finally:
        e2e.kubectl("delete", "pod", POD, "--wait=true", "--timeout=60s", timeout=90)


def test_exec_runs_in_the_container_and_its_exit_code_is_kubectls(e2e: E2E, running: dict[str, Any]) -> None:
    result = e2e.kubectl.run("exec", POD, "--", "sh", "-c", 'echo "$GREETING"; pwd; echo oops >&2; exit 3', check=False)
    assert result.returncode == 3, result.stderr
    assert result.stdout.splitlines() == ["hello from the pod", running["spec"]["containers"][0]["workingDir"]]
    assert "oops" in result.stderr and "command terminated with exit code 3" in result.stderr
    assert e2e.kubectl.run("exec", POD, "--", "true").returncode == 0
    # stdin, closed at its end (v5.channel.k8s.io)
    assert e2e.kubectl("exec", "-i", POD, "--", "tr", "a-z", "A-Z", input="shout\n") == "SHOUT\n"


def test_exec_takes_a_command_of_a_hundred_kilobytes(e2e: E2E, running: dict[str, Any]) -> None:
    """The command travels in the query string, through the API server and the kubelet:
    kube takes a request head of 1 MiB, where an HTTP server's default stops at 8 KiB."""
    argument = "x" * 100_000
    result = e2e.kubectl.run("exec", POD, "--", "python", "-c", "import sys; print(len(sys.argv[1]))", argument,
                             check=False)
    assert (result.returncode, result.stdout) == (0, "100000\n"), result.stderr[-500:]


def test_exec_of_a_missing_executable_is_kubes_internal_error(e2e: E2E, running: dict[str, Any]) -> None:
    """Not the exit code of the helper that starts it in the pod's namespaces (127): the
    Failure Status a runtime's exec gives, which kubectl prints and exits 1 on."""
    result = e2e.kubectl.run("exec", POD, "--", "nosuch-binary", "arg", check=False)
    assert result.returncode == 1, result.stderr
    assert ('error: Internal error occurred: error executing command in container: failed to exec in container: '
            'exec: "nosuch-binary": executable file not found in $PATH') in result.stderr
    assert "command terminated with exit code" not in result.stderr


def test_an_execd_process_lives_in_the_containers_resource_group(e2e: E2E, running: dict[str, Any]) -> None:
    main_pid = int(running["status"]["containerStatuses"][0]["containerID"].removeprefix("process://"))
    assert e2e.kubectl("exec", POD, "--", "cat", "/proc/self/cgroup") == Path(f"/proc/{main_pid}/cgroup").read_text()
    # It counts against the container's limit (200Mi): asking for 600 MiB gets it killed.
    hungry = e2e.kubectl.run("exec", POD, "--", "python", "-c",
                             "import time; b = bytearray(600 << 20); time.sleep(5)", check=False, timeout=90)
    assert hungry.returncode == 137, (hungry.returncode, hungry.stderr)


SPDY = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false", "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}  # as before 1.30


@pytest.mark.parametrize("protocol", [{}, SPDY], ids=["websocket", "spdy"])
def test_exec_it_gives_a_terminal_that_follows_kubectls_size(e2e: E2E, running: dict[str, Any],
                                                             protocol: dict[str, str]) -> None:
    child, terminal = on_terminal(e2e.kubectl, "exec", "-it", POD, "--", "sh", env=protocol)
    try:
        read_until(terminal, prompt(e2e.kubectl))
        os.write(terminal, b"tty; stty size; echo $((6*7)); exit 5\n")
        seen = read_until(terminal, b"42")
        assert re.search(rb"/dev/pts/\d+", seen), seen
        assert b"33 111" in seen, seen
    finally:
        code = finished(child, terminal)
    assert code == 5


def test_run_it_rm_runs_a_container_on_a_terminal(e2e: E2E) -> None:
    """``stdin`` and ``tty`` in the pod's spec: the container's own terminal, attached."""
    child, terminal = on_terminal(e2e.kubectl, "run", "-it", "--rm", "shell", "--image=python", "--restart=Never", "--", "sh")
    try:
        read_until(terminal, b"try pressing enter")
        os.write(terminal, b"\n")
        read_until(terminal, prompt(e2e.kubectl))
        os.write(terminal, b"stty size; echo $((6*7)); exit 3\n")
        seen = read_until(terminal, b"42")
        assert b"33 111" in seen, seen
        read_until(terminal, b'pod "shell" deleted')
    finally:
        code = finished(child, terminal)
        e2e.kubectl("delete", "pod", "shell", "--ignore-not-found", "--wait=true", "--timeout=60s", timeout=90)
    assert code == 3


def test_kubectl_cp_both_ways(e2e: E2E, running: dict[str, Any], tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "deeper").mkdir(parents=True)
    (source / "a.txt").write_text("alpha\n")
    (source / "deeper" / "b.bin").write_bytes(bytes(range(256)) * 64)
    inside = f"/tmp/copied-{os.getpid()}"  # the pod's /tmp (the machine's without the sandbox)
    e2e.kubectl("cp", str(source), f"{POD}:{inside}")
    assert e2e.kubectl("exec", POD, "--", "cat", f"{inside}/a.txt") == "alpha\n"
    back = tmp_path / "back"
    e2e.kubectl("cp", f"{POD}:{inside}", str(back))
    assert (back / "a.txt").read_text() == "alpha\n"
    assert (back / "deeper" / "b.bin").read_bytes() == bytes(range(256)) * 64
    e2e.kubectl("exec", POD, "--", "rm", "-r", inside)


def test_port_forward_reaches_a_pods_http_server(e2e: E2E, tmp_path: Path) -> None:
    site = e2e.workdir / "site"
    site.mkdir(exist_ok=True)
    (site / "index.html").write_text("served from the pod\n")
    port = free_port("0.0.0.0")
    e2e.kubectl.apply(pod("web", ["python", "-m", "http.server", str(port), "--directory", str(site)]))
    forwarder = None
    try:
        wait_running(e2e, "web")
        wait_listening(e2e, "web", port)
        forwarder = e2e.kubectl.popen("port-forward", "pod/web", f"0:{port}")
        assert forwarder.stdout is not None
        line = forwarder.stdout.readline()
        listening = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert listening, f"kubectl port-forward said {line!r}"
        local = int(listening.group(1))
        for _ in range(4):  # a connection each, on the one session
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/index.html", timeout=10) as response:
                assert response.read() == b"served from the pod\n"
    finally:
        if forwarder is not None:
            forwarder.terminate()
            forwarder.communicate(timeout=30)
        e2e.kubectl("delete", "pod", "web", "--wait=true", "--timeout=60s", timeout=90)


def test_run_i_rm_attaches_to_the_containers_stdin_and_reports_its_exit(e2e: E2E) -> None:
    result = e2e.kubectl.run("run", "-i", "--rm", "upper", "--image=python", "--restart=Never", "--",
                             "python", "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(4)",
                             input="attached input\n", check=False, timeout=120)
    assert "ATTACHED INPUT" in result.stdout, (result.stdout, result.stderr)
    assert result.returncode == 4, result.stderr
    assert 'pod "upper" deleted' in result.stdout + result.stderr
    assert e2e.kubectl.run("get", "pod", "upper", check=False).returncode == 1


def test_attach_streams_what_a_running_container_prints(e2e: E2E) -> None:
    e2e.kubectl.apply(pod("talker", ["sh", "-c", "sleep 2; for i in 1 2 3 4 5 6 7 8 9 10; do echo tick $i; sleep 1; done"]))
    try:
        wait_running(e2e, "talker")
        attached = e2e.kubectl.run("attach", "talker", timeout=90)
        ticks = [line for line in attached.stdout.splitlines() if line.startswith("tick")]
        assert ticks and ticks[-1] == "tick 10", attached.stdout
    finally:
        e2e.kubectl("delete", "pod", "talker", "--wait=true", "--timeout=60s", timeout=90)


def test_exec_into_a_finished_pod_is_refused_with_the_phase(e2e: E2E) -> None:
    e2e.kubectl.apply(pod("done", ["true"]))
    try:
        e2e.kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/done", "--timeout=60s", timeout=70)
        result = e2e.kubectl.run("exec", "done", "--", "true", check=False)
        assert result.returncode == 1
        assert "cannot exec into a container in a completed pod" in result.stderr
    finally:
        e2e.kubectl("delete", "pod", "done", "--wait=true", "--timeout=60s", timeout=90)




def test_the_python_clients_stream_execs_too(e2e: E2E, running: dict[str, Any]) -> None:
    """The ``kubernetes`` package speaks v4.channel.k8s.io through websocket-client."""
    from kubernetes import client
    from kubernetes.stream import stream

    core = client.CoreV1Api(e2e.api)
    session = stream(core.connect_get_namespaced_pod_exec, POD, "default", command=["sh", "-c", "echo out; exit 2"],
                     stdout=True, stderr=True, stdin=False, tty=False, _preload_content=False)
    session.run_forever(timeout=60)
    assert session.read_stdout() == "out\n"
    assert session.returncode == 2


def test_exec_names_a_container_the_pod_does_not_have(e2e: E2E, running: dict[str, Any]) -> None:
    wrong = e2e.kubectl.run("exec", POD, "-c", "nope", "--", "true", check=False)
    assert wrong.returncode == 1 and "container nope is not valid for pod streamed" in wrong.stderr


def test_exec_reaches_the_kubelet_of_the_pods_node_and_says_when_it_is_gone(tmp_path: Path) -> None:
    """Two nodes, two kubelets: the API server finds the right one through the pod's Node."""
    with scratch_cluster(tmp_path, nodes=2, controller=False) as two:
        spec = pod("far", ["python", "-c", "import time; time.sleep(3600)"])
        spec["spec"]["nodeName"] = "trainctl-local-2"
        two.kubectl.apply(spec)
        wait_running(two, "far")
        ports = {n["metadata"]["name"]: n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
                 for n in two.kubectl.json("get", "nodes")["items"]}
        assert len(set(ports.values())) == 2 and all(ports.values()), ports
        assert two.kubectl("exec", "far", "--", "sh", "-c", "echo $HOSTNAME") == "far\n"
        two.cluster.kill_node("trainctl-local-2")
        gone = two.kubectl.run("exec", "far", "--", "true", check=False)
        assert gone.returncode == 1 and "error dialing backend" in gone.stderr, gone.stderr


def test_the_python_clients_portforward_reaches_a_pods_port(e2e: E2E) -> None:
    """``kubernetes.stream.portforward``: the WebSocket form, ports in the query."""
    from kubernetes import client
    from kubernetes.stream import portforward

    port = free_port("0.0.0.0")
    echo = ("import socket, sys; s = socket.create_server(('0.0.0.0', int(sys.argv[1])))\n"
            "while True:\n c, _ = s.accept(); c.sendall(c.recv(100).upper()); c.close()")
    e2e.kubectl.apply(pod("echo", ["python", "-c", echo, str(port)]))
    try:
        wait_running(e2e, "echo")
        wait_listening(e2e, "echo", port)
        core = client.CoreV1Api(e2e.api)
        forward = portforward(core.connect_get_namespaced_pod_portforward, "echo", "default", ports=str(port))
        sock = forward.socket(port)
        sock.settimeout(30)
        sock.sendall(b"over the channels")
        assert sock.recv(100) == b"OVER THE CHANNELS", forward.error(port)
        sock.close()
        refused = portforward(core.connect_get_namespaced_pod_portforward, "echo", "default", ports="1")
        refused.socket(1).settimeout(30)
        assert refused.socket(1).recv(10) == b""
        assert "Connection refused" in (refused.error(1) or "")
    finally:
        e2e.kubectl("delete", "pod", "echo", "--wait=true", "--timeout=60s", timeout=90)


def test_kubectl_speaking_spdy_as_before_1_30_execs_and_forwards_too(e2e: E2E, running: dict[str, Any]) -> None:
    """The SPDY/3.1 upgrades of older kubectl (and of a newer one's fallback), forced here."""
    spdy = Kubectl({**e2e.kubectl.env, **SPDY})
    result = spdy.run("exec", POD, "-v=6", "--", "sh", "-c", 'echo "$GREETING"; exit 3', check=False)
    assert result.returncode == 3 and result.stdout == "hello from the pod\n", result.stderr
    assert re.search(r"POST https://\S+/exec\?\S+ 101 Switching Protocols", result.stderr), result.stderr
    assert spdy("exec", "-i", POD, "--", "tr", "a-z", "A-Z", input="shout\n") == "SHOUT\n"

    port = free_port("0.0.0.0")
    e2e.kubectl("exec", POD, "--", "sh", "-c",
                f"python -c \"import socket; s = socket.create_server(('0.0.0.0', {port}))\n"
                f"while True: c, _ = s.accept(); c.sendall(b'spdy ok'); c.close()\" > /dev/null 2>&1 &")
    wait_listening(e2e, POD, port)
    forwarder = spdy.popen("port-forward", f"pod/{POD}", f"0:{port}")
    try:
        assert forwarder.stdout is not None
        line = forwarder.stdout.readline()
        listening = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert listening, f"kubectl port-forward said {line!r}"
        for _ in range(2):
            with socket.create_connection(("127.0.0.1", int(listening.group(1))), timeout=30) as conn:
                assert conn.recv(100) == b"spdy ok"
    finally:
        forwarder.terminate()
        forwarder.communicate(timeout=30)


def test_the_kubelets_streaming_server_answers_only_the_api_server(e2e: E2E, running: dict[str, Any]) -> None:
    node_name = running["spec"]["nodeName"]
    node = e2e.kubectl.json("get", "node", node_name)
    address = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    url = f"https://{address}:{port}/exec/default/{POD}/main?command=true&stdout=true"
    pki = e2e.cluster.directory / "pki"
    # No client certificate, whatever token comes with it (the admin's too): 401.
    for headers in ({}, {"Authorization": "Bearer not-the-token"},
                    {"Authorization": f"Bearer {(e2e.cluster.directory / 'token').read_text().strip()}"}):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30,
                                   context=ssl.create_default_context(cafile=pki / "ca.crt"))
        assert refused.value.code == 401
    # A certificate of the cluster's, but a kubelet's: 403.
    as_node = ssl.create_default_context(cafile=pki / "ca.crt")
    as_node.load_cert_chain(pki / "nodes" / node_name / "kubelet-client.crt", pki / "nodes" / node_name / "kubelet-client.key")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=30, context=as_node)
    assert refused.value.code == 403
    # Plain HTTP is no way in either.
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(url.replace("https://", "http://"), timeout=30)


def test_a_node_pointed_at_a_listener_receives_no_token(e2e: E2E, running: dict[str, Any]) -> None:
    """Whoever may write a Node's status chooses where the API server dials for exec and
    port-forward: a listener there gets a TLS handshake it cannot complete, never a token."""
    node_name = running["spec"]["nodeName"]
    port = e2e.kubectl.json("get", "node", node_name)["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    token = (e2e.cluster.directory / "token").read_text().strip()

    def point_at(target: int) -> None:
        e2e.kubectl("patch", "node", node_name, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": target}}}}))

    try:
        with recording_listener() as listener:
            failures = []
            for _ in range(10):  # the kubelet's own status updates write its port back
                point_at(listener.port)
                failures.append(e2e.kubectl.run("exec", POD, "--", "true", check=False, timeout=90))
                if listener.connections:
                    break
            assert listener.connections, "the API server never dialled the endpoint the Node named"
        assert b"authorization" not in listener.received.lower()
        assert token.encode() not in listener.received and b"/exec/" not in listener.received
        assert all(result.returncode != 0 for result in failures)
        assert "error dialing backend" in failures[-1].stderr, failures[-1].stderr
    finally:
        point_at(port)
    # Restored, exec works as before; logs never went through the kubelet.
    assert e2e.kubectl.run("exec", POD, "--", "true").returncode == 0
    e2e.kubectl("logs", POD)


def test_a_kubelet_is_its_node_to_the_api_server(e2e: E2E, running: dict[str, Any]) -> None:
    node_name = running["spec"]["nodeName"]
    directory = e2e.cluster.directory
    kubelet = Kubectl({**e2e.kubectl.env, "KUBECONFIG": str(directory / "kubelet" / node_name / "kubeconfig")})
    assert kubelet("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}") == f"system:node:{node_name}"
    assert "token" not in (directory / "kubelet" / node_name / "kubeconfig").read_text()
    e2e.kubectl.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "elsewhere"}})
    try:
        refused = kubelet.run("patch", "node", "elsewhere", "--type=merge",
                              "-p", '{"spec": {"unschedulable": true}}', check=False)
        assert refused.returncode != 0
        assert f'node "{node_name}" is not allowed to modify node "elsewhere"' in refused.stderr, refused.stderr
        assert "forbidden" in kubelet.run("get", "secrets", check=False).stderr
    finally:
        e2e.kubectl("delete", "node", "elsewhere", "--wait=false")
