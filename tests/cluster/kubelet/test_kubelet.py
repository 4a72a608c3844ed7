"""The kubelet against a real API server: pods run as local processes, with real clients."""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from trainctl.cluster.kubelet.kubelet import namespace_data_dir
from trainctl.cluster.kubelet.paths import OutsideDirectory
from trainctl.cluster.kubelet.runtime import process_start_time
from trainctl.cluster.network import isolation
from trainctl.cluster.network.ranges import cluster_ranges
from trainctl.kube.restmapper import PODS

from tests.support.cluster import machine_port
from tests.support.net import free_port
from tests.support.pods import container_status, create, phase, pod, wait_pod, wait_pod_gone


def test_pod_runs_to_completion_and_kubectl_shows_its_logs(api, kube_env, kubelet):
    create(api, pod("hello", "print('hello from the pod')"))
    done = wait_pod(api, "hello", phase("Succeeded", "Failed"))
    assert done["status"]["phase"] == "Succeeded"
    terminated = container_status(done)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    pods = kubelet.config.pod_cidr or cluster_ranges(kubelet.config.directory)[0]
    assert ipaddress.ip_address(done["status"]["podIP"]) in ipaddress.ip_network(pods)
    assert {c["type"]: c["status"] for c in done["status"]["conditions"]} == {
        "PodScheduled": "True", "Initialized": "True", "Ready": "False", "ContainersReady": "False"}
    logs = subprocess.run(["kubectl", "logs", "hello"], env=kube_env, capture_output=True, text=True, timeout=30)
    assert logs.stdout == "hello from the pod\n", logs.stderr


def test_failing_container_fails_the_pod_with_its_exit_code(api):
    create(api, pod("fails", "import sys; sys.exit(3)"))
    done = wait_pod(api, "fails", phase("Succeeded", "Failed"))
    assert done["status"]["phase"] == "Failed"
    terminated = container_status(done)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")


def test_on_failure_restarts_in_place_with_back_off(api, kube_env, tmp_path):
    counter = tmp_path / "attempts"
    script = (f"import pathlib, sys; p = pathlib.Path({str(counter)!r}); n = int(p.read_text()) if p.exists() else 0; "
              "p.write_text(str(n + 1)); print('attempt', n); sys.exit(0 if n == 2 else 1)")
    created = create(api, pod("flaky", script, restart_policy="OnFailure"))
    done = wait_pod(api, "flaky", phase("Succeeded", "Failed"))
    assert done["metadata"]["uid"] == created["metadata"]["uid"]  # the same pod, restarted in place
    assert done["status"]["phase"] == "Succeeded"
    status = container_status(done)
    assert status["restartCount"] == 2
    assert status["lastState"]["terminated"]["exitCode"] == 1
    previous = subprocess.run(["kubectl", "logs", "flaky", "--previous"], env=kube_env, capture_output=True,
                              text=True, timeout=30)
    assert previous.stdout == "attempt 1\n", previous.stderr


def test_fallback_to_logs_on_error_puts_the_end_of_a_failed_runs_log_in_its_status(api):
    """As the real kubelet: the last 80 lines, of which the last 2048 bytes; only on failure."""
    script = ("import sys\nfor i in range(100): print(f'line {i:03d} ' + 'x' * 10)\nprint('the last words', flush=True)\nsys.exit(int(sys.argv[1]))")
    for name, code, policy in (("tail", "1", "FallbackToLogsOnError"), ("ok", "0", "FallbackToLogsOnError"),
                               ("file", "1", "File")):
        spec = pod(name, script, terminationMessagePolicy=policy)
        spec["spec"]["containers"][0]["command"].append(code)
        create(api, spec)
    messages = {}
    for name in ("tail", "ok", "file"):
        done = wait_pod(api, name, phase("Succeeded", "Failed"))
        messages[name] = container_status(done)["state"]["terminated"].get("message")
    tail = messages["tail"]
    assert tail.endswith("line 099 xxxxxxxxxx\nthe last words\n"), tail
    assert tail.startswith("line 021 ") and tail.count("\n") == 80, tail  # 80 lines: 21..99 and the last words
    assert (messages["ok"], messages["file"]) == (None, None)


def test_fallback_to_logs_keeps_only_the_last_2048_bytes_of_stderr_too(api):
    script = "import sys\nfor i in range(40): print(f'{i:02d} ' + 'y' * 97, file=sys.stderr)\nsys.exit(2)"
    create(api, pod("long", script, terminationMessagePolicy="FallbackToLogsOnError"))
    message = container_status(wait_pod(api, "long", phase("Failed")))["state"]["terminated"]["message"]
    assert len(message.encode()) == 2048 and message.endswith("39 " + "y" * 97 + "\n"), message


def test_a_termination_message_file_is_the_status_message_of_an_init_container_and_a_container(api):
    """What a run writes to its termination message file (the kubelet names it in
    TRAINCTL_TERMINATION_MESSAGE_PATH) is its terminated state's message, on success too, and
    wins over the log under FallbackToLogsOnError; only the first 4096 bytes are kept."""
    write = ("import os, sys\nprint('log line')\n"
             "open(os.environ['TRAINCTL_TERMINATION_MESSAGE_PATH'], 'w').write(sys.argv[1] * int(sys.argv[2]))\n"
             "sys.exit(int(sys.argv[3]))")
    spec = pod("reports", write, terminationMessagePolicy="FallbackToLogsOnError")
    spec["spec"]["containers"][0]["command"] += ["m", "5000", "1"]
    spec["spec"]["initContainers"] = [{"name": "check", "image": "python", "command": ["python", "-c", write, "ok", "1", "0"]}]
    done = wait_pod(api, create(api, spec)["metadata"]["name"], phase("Failed"))
    assert done["status"]["initContainerStatuses"][0]["state"]["terminated"]["message"] == "ok"
    assert container_status(done)["state"]["terminated"]["message"] == "m" * 4096


def test_init_containers_run_in_order_before_the_containers(api, tmp_path):
    order = tmp_path / "order"
    spec = pod("inits", f"print(open({str(order)!r}).read(), end='')")
    spec["spec"]["initContainers"] = [
        {"name": name, "image": "busybox", "command": ["sh", "-c", f"echo {name} >> {order}"]}
        for name in ("first", "second")]
    done = wait_pod(api, create(api, spec)["metadata"]["name"], phase("Succeeded", "Failed"))
    assert done["status"]["phase"] == "Succeeded"
    assert [s["state"]["terminated"]["reason"] for s in done["status"]["initContainerStatuses"]] == ["Completed"] * 2
    assert order.read_text() == "first\nsecond\n"


def test_env_value_from_field_refs_and_expansion(api, tmp_path):
    out = tmp_path / "env"
    env = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
           {"name": "ADDRESS", "value": "$(POD_IP):1234"}]
    script = f"import os; open({str(out)!r}, 'w').write(' '.join(os.environ[k] for k in ('POD_NAME', 'POD_IP', 'ADDRESS')))"
    done = wait_pod(api, create(api, pod("downward", script, env=env))["metadata"]["name"], phase("Succeeded", "Failed"))
    ip = done["status"]["podIP"]
    assert out.read_text() == f"downward {ip} {ip}:1234"


SERVER = """
import os, socket
server = socket.create_server((os.environ["POD_IP"], int(os.environ["PORT"])))
while True:
    conn, _ = server.accept()
    conn.sendall(b"hello from " + os.environ["POD_IP"].encode() + b"\\n")
    conn.close()
"""
CLIENT = """
import os, socket, sys, time
host, port = os.environ["TARGET"].rsplit(":", 1)
deadline = time.monotonic() + 15
while True:
    try:
        with socket.create_connection((host, int(port)), timeout=5) as conn:
            print(os.environ["TARGET"], conn.makefile().readline().strip())
            break
    except ConnectionRefusedError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
"""


def start_server(api, port):
    server = pod("server", SERVER, env=[{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                                        {"name": "PORT", "value": str(port)}],
                 ports=[{"name": "echo", "containerPort": port}])
    server["metadata"]["labels"] = {"app": "echo"}
    create(api, server)
    return wait_pod(api, "server", lambda p: p.get("status", {}).get("podIP") and phase("Running")(p))


def logs_of(kubelet, done):
    path = kubelet.pods_dir / done["metadata"]["uid"] / "main" / "0.log"
    return [line.split(" ", 3)[3] for line in path.read_text().splitlines()]


def test_a_pod_sees_a_clean_base_env_and_its_spec_not_the_shell_that_started_the_kubelet(api, tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    for name, value in (("PS1", "x"), ("VIRTUAL_ENV", "/y"), ("PIP_INDEX_URL", "z"), ("OLDPWD", "/w"),
                        ("HOME", str(tmp_path / "users-home")), ("OPENBLAS_CORETYPE", "ARMV8")):
        monkeypatch.setenv(name, value)  # the kubelet runs in this process: its environment is the shell's
    out = tmp_path / "env.json"
    script = ("import json, os, pathlib, subprocess, sys\n"
              "pathlib.Path(os.environ['HOME'], 'written').write_text('ok')\n"
              "python = subprocess.run(['python', '-c', 'import sys; print(sys.executable)'], capture_output=True,"
              " text=True, check=True).stdout.strip()\n"
              f"open({str(out)!r}, 'w').write(json.dumps({{**os.environ, 'python': python}}))\n")
    done = wait_pod(api, create(api, pod("clean", script, env=[{"name": "FROM_SPEC", "value": "yes"}]))["metadata"]["name"],
                    phase("Succeeded", "Failed"))
    assert done["status"]["phase"] == "Succeeded"
    seen = json.loads(out.read_text())
    assert not {"PS1", "VIRTUAL_ENV", "PIP_INDEX_URL", "OLDPWD", "KUBECONFIG"} & set(seen)
    assert seen["FROM_SPEC"] == "yes" and seen["HOSTNAME"] == "clean" and seen["OPENBLAS_CORETYPE"] == "ARMV8"
    assert seen["PYTHONUNBUFFERED"] == "1"  # its log is read while it runs
    assert seen["HOME"] != str(tmp_path / "users-home") and (Path(seen["HOME"]) / "written").read_text() == "ok"
    assert os.path.dirname(seen["python"]) == os.path.dirname(sys.executable)  # the cluster's own Python
    assert seen["KUBERNETES_SERVICE_HOST"] and seen["KUBERNETES_SERVICE_PORT"]


def test_headless_service_name_in_env_is_rewritten_to_the_pod_ip(api, kubelet):
    port = free_port("0.0.0.0")
    server_ip = start_server(api, port)["status"]["podIP"]
    create(api, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"},
                 "spec": {"clusterIP": "None", "selector": {"app": "echo"}, "ports": [{"port": port}]}})
    client = pod("client", CLIENT, env=[{"name": "TARGET", "value": f"echo.default.svc:{port}"}])
    done = wait_pod(api, create(api, client)["metadata"]["name"], phase("Succeeded", "Failed"))
    assert done["status"]["phase"] == "Succeeded"
    assert logs_of(kubelet, done) == [f"{server_ip}:{port} hello from {server_ip}"]


def test_a_headless_name_whose_pods_all_succeeded_is_left_unresolved_not_waited_for(api, kubelet):
    # A master that finished before its worker started: no pod behind the name will come
    # back, so the worker starts with the name as written (as DNS would leave it).
    finished = pod("done-master", "print('finished')")
    finished["metadata"]["labels"] = {"app": "done-master"}
    assert (
        wait_pod(api, create(api, finished)["metadata"]["name"], phase("Succeeded", "Failed"))["status"]["phase"] == "Succeeded"
    )
    create(api, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "done-master"},
                 "spec": {"clusterIP": "None", "selector": {"app": "done-master"}, "ports": [{"port": 23456}]}})
    late = pod(
        "late-worker", "import os; print(os.environ['MASTER_ADDR'])", env=[{"name": "MASTER_ADDR", "value": "done-master"}]
    )
    done = wait_pod(api, create(api, late)["metadata"]["name"], phase("Succeeded", "Failed"))
    assert done["status"]["phase"] == "Succeeded"
    assert logs_of(kubelet, done) == ["done-master"]


def test_cluster_ip_service_reaches_its_pod_through_the_proxy(api, kubelet):
    server_ip = start_server(api, free_port("0.0.0.0"))["status"]["podIP"]
    service = create(api, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"},
                           "spec": {"selector": {"app": "echo"}, "ports": [{"port": 80, "targetPort": "echo"}]}})
    cluster_ip = service["spec"]["clusterIP"]
    services = isolation.SERVICE_CIDR if kubelet.network.mode == isolation.ISOLATED \
        else cluster_ranges(kubelet.config.directory)[1]
    assert ipaddress.ip_address(cluster_ip) in ipaddress.ip_network(services)
    client = pod("client", CLIENT, env=[{"name": "TARGET", "value": "echo:80"}])
    done = wait_pod(api, create(api, client)["metadata"]["name"], phase("Succeeded", "Failed"))
    assert logs_of(kubelet, done) == [f"{cluster_ip}:80 hello from {server_ip}"]


def test_gpu_pods_get_devices_and_too_many_gpus_stay_pending(api, tmp_path):
    out = tmp_path / "devices"
    one = pod("one-gpu", f"import os; open({str(out)!r}, 'w').write(os.environ['CUDA_VISIBLE_DEVICES'])",
              resources={"limits": {"nvidia.com/gpu": "2"}})
    assert wait_pod(api, create(api, one)["metadata"]["name"], phase("Succeeded", "Failed"))["status"]["phase"] == "Succeeded"
    assert out.read_text() == "0,1"
    create(api, pod("three-gpus", "pass", resources={"limits": {"nvidia.com/gpu": "3"}}))

    def unschedulable(p):
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                   for c in p.get("status", {}).get("conditions") or [])
    pending = wait_pod(api, "three-gpus", unschedulable)
    assert pending["status"]["phase"] == "Pending"
    assert not pending["spec"].get("nodeName")
    message = next(c["message"] for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
    assert message == ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
                       " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")


SLEEPER = """
import pathlib, signal, sys, time
def on_term(*_):
    pathlib.Path(sys.argv[1]).write_text("SIGTERM")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
with open(sys.argv[1] + ".ready", "w") as ready:  # a FIFO the test blocks on
    ready.write("ready")
time.sleep(600)
"""


def sleeper(name, marker, owner=None, port=None):
    os.mkfifo(f"{marker}.ready")
    spec = pod(name, SLEEPER, args=[str(marker)])
    if port:
        spec["spec"]["containers"][0]["ports"] = [machine_port(port)]
    if owner:
        spec["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
                                                "uid": owner["metadata"]["uid"], "controller": True}]
    return spec


def wait_ready(marker, timeout=30):
    """Block until the sleeper has installed its SIGTERM handler (it writes to the FIFO)."""
    got = []
    reader = threading.Thread(target=lambda: got.append(open(f"{marker}.ready").read()), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        with open(f"{marker}.ready", "w"):  # unblock the reader before failing
            pass
        raise AssertionError(f"{marker.name}: the pod did not start within {timeout}s")
    assert got == ["ready"]


def owner(api, name):
    return create(api, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})


def test_ports_conflict_across_owners_until_freed(api, tmp_path):
    job_a, job_b = owner(api, "job-a"), owner(api, "job-b")
    port = free_port("0.0.0.0")
    create(api, sleeper("a-master-0", tmp_path / "a0", job_a, port))
    create(api, sleeper("a-worker-0", tmp_path / "a1", job_a, port))  # same owner: shares the port
    wait_ready(tmp_path / "a0")
    wait_ready(tmp_path / "a1")
    create(api, sleeper("b-master-0", tmp_path / "b0", job_b, port))

    def waits_for_port(p):
        return any(c.get("reason") == "Unschedulable" for c in p.get("status", {}).get("conditions") or [])
    pending = wait_pod(api, "b-master-0", waits_for_port)
    message = next(c["message"] for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
    assert message in (f"0/1 nodes are available: port {port} is in use by pod default/{name}. preemption: "
                       "0/1 nodes are available: 1 No preemption victims found for incoming pod."
                       for name in ("a-master-0", "a-worker-0"))
    api.delete(PODS, "default", "a-master-0", grace_period_seconds=0)
    api.delete(PODS, "default", "a-worker-0", grace_period_seconds=0)
    wait_ready(tmp_path / "b0")
    assert wait_pod(api, "b-master-0", phase("Running"))["spec"]["nodeName"] == "trainctl-local"


def test_graceful_deletion_sends_sigterm_then_removes_the_pod(api, tmp_path):
    marker = tmp_path / "graceful"
    create(api, sleeper("graceful", marker))
    wait_ready(marker)
    running = wait_pod(api, "graceful", phase("Running"))
    pid = int(container_status(running)["containerID"].removeprefix("process://"))
    api.delete(PODS, "default", "graceful", grace_period_seconds=10)
    wait_pod_gone(api, "graceful")
    assert marker.read_text() == "SIGTERM"
    assert process_start_time(pid) is None


def test_force_deletion_kills_the_processes(api, kubelet, tmp_path):
    marker = tmp_path / "forced"
    create(api, sleeper("forced", marker))
    wait_ready(marker)
    running = wait_pod(api, "forced", phase("Running"))
    pid = int(container_status(running)["containerID"].removeprefix("process://"))
    assert process_start_time(pid) is not None
    uid = running["metadata"]["uid"]
    api.delete(PODS, "default", "forced", grace_period_seconds=0)
    wait_pod_gone(api, "forced")
    worker = kubelet.workers.get(uid)
    assert worker is None or worker.done.wait(10)
    assert process_start_time(pid) is None or not os.path.exists(f"/proc/{pid}")


def test_active_deadline_fails_a_pod_that_runs_too_long(api):
    spec = pod("slow", "import time; time.sleep(600)")
    spec["spec"]["activeDeadlineSeconds"] = 1
    spec["spec"]["terminationGracePeriodSeconds"] = 0
    done = wait_pod(api, create(api, spec)["metadata"]["name"], phase("Succeeded", "Failed"))
    assert (done["status"]["phase"], done["status"]["reason"]) == ("Failed", "DeadlineExceeded")
    assert container_status(done)["state"]["terminated"]["exitCode"] == 143  # SIGTERM


def test_a_port_held_outside_the_cluster_keeps_the_pod_pending_until_released(api):
    holder = socket.create_server(("0.0.0.0", 0))
    port = holder.getsockname()[1]
    create(api, pod("wants-port", "pass", ports=[machine_port(port)]))

    def unschedulable(p):
        return any(c.get("reason") == "Unschedulable" for c in p.get("status", {}).get("conditions") or [])
    pending = wait_pod(api, "wants-port", unschedulable)
    message = next(c["message"] for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
    assert message == (f"0/1 nodes are available: port {port} is in use on this machine (not by a pod of this cluster)."
                       " preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
    holder.close()
    assert wait_pod(api, "wants-port", phase("Succeeded", "Failed"))["status"]["phase"] == "Succeeded"


def test_python_code_resolves_service_names_at_run_time(api, kubelet, tmp_path):
    service = create(api, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lookup"},
                           "spec": {"selector": {"app": "none"}, "ports": [{"port": 80}]}})
    out = tmp_path / "resolved"
    # The name is built at run time, so no rewriting can help; the pod's own PYTHONPATH is kept.
    # (The hosts file follows the Service's watch event, which may trail the pod's: retry.)
    script = f"""
import socket, sys, time
name, deadline = "look" + "up", time.monotonic() + 10
while True:
    try:
        found = [socket.gethostbyname(name), socket.gethostbyname(name + ".default.svc.cluster.local")]
        break
    except socket.gaierror:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
open({str(out)!r}, "w").write(" ".join(found + [str("/custom" in sys.path)]))
"""
    done = wait_pod(api, create(api, pod("resolver", script, env=[{"name": "PYTHONPATH", "value": "/custom"}]))
                    ["metadata"]["name"], phase("Succeeded", "Failed"))
    assert done["status"]["phase"] == "Succeeded"
    cluster_ip = service["spec"]["clusterIP"]
    assert out.read_text() == f"{cluster_ip} {cluster_ip} True"


def test_a_job_pod_waits_for_the_service_of_a_sibling_it_names(api, tmp_path):
    job = owner(api, "job")
    master = sleeper("job-master-0", tmp_path / "master", job)
    master["metadata"]["labels"] = {"role": "master"}
    create(api, master)
    out = tmp_path / "master-addr"
    worker = pod("job-worker-0", f"import os; open({str(out)!r}, 'w').write(os.environ['MASTER_ADDR'])",
                 env=[{"name": "MASTER_ADDR", "value": "job-master-0"}])
    worker["metadata"]["ownerReferences"] = master["metadata"]["ownerReferences"]
    create(api, worker)

    def waiting(p):
        statuses = p.get("status", {}).get("containerStatuses") or []
        return bool(statuses) and "waiting for Service default/job-master-0" in \
            statuses[0]["state"].get("waiting", {}).get("message", "")
    wait_pod(api, "job-worker-0", waiting)
    create(api, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "job-master-0"},
                 "spec": {"clusterIP": "None", "selector": {"role": "master"}}})
    done = wait_pod(api, "job-worker-0", phase("Succeeded", "Failed"))
    master_ip = api.get(PODS, "default", "job-master-0")["status"]["podIP"]
    assert done["status"]["phase"] == "Succeeded"
    assert out.read_text() == master_ip



def test_downward_api_values_are_never_rewritten_or_waited_for(api, tmp_path):
    # MindSpore's MS_NODE_ID is the pod's own name, and MSJob workers have no Service: the
    # kubelet must pass the name through instead of waiting for a Service of that name.
    job = owner(api, "msjob")
    out = tmp_path / "node-id"
    worker = pod("msjob-worker-0", f"import os; open({str(out)!r}, 'w').write(os.environ['MS_NODE_ID'])",
                 env=[{"name": "MS_NODE_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])
    worker["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "msjob",
                                              "uid": job["metadata"]["uid"], "controller": True}]
    create(api, worker)
    done = wait_pod(api, "msjob-worker-0", phase("Succeeded", "Failed"))
    assert done["status"]["phase"] == "Succeeded"
    assert out.read_text() == "msjob-worker-0"


def test_processes_that_leave_the_containers_session_die_with_it(api, tmp_path):
    # torchrun starts its workers in sessions of their own; in a real container they still
    # die with it, so here too a process that left the container's process group must not
    # outlive the container's main process.
    out = tmp_path / "child-pid"
    script = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
        f"open({str(out)!r}, 'w').write(str(child.pid))\n"
    )
    create(api, pod("leaver", script))
    done = wait_pod(api, "leaver", phase("Succeeded", "Failed"))
    assert done["status"]["phase"] == "Succeeded"
    child = int(out.read_text())
    deadline = time.monotonic() + 5
    while process_start_time(child) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_start_time(child) is None, f"pid {child} outlived its container"


def test_a_crash_looping_container_counts_restarts_and_shows_its_last_crash(api, kube_env, tmp_path):
    """restartCount is the number of restarts (the first run is 0), as a real kubelet's; while
    the container waits in CrashLoopBackOff it names the run that crashed, whose output
    ``kubectl logs`` prints."""
    counter = tmp_path / "runs"
    script = (f"import pathlib, sys; p = pathlib.Path({str(counter)!r}); n = int(p.read_text()) if p.exists() else 0; "
              "p.write_text(str(n + 1)); print('crash', n); sys.exit(1)")
    create(api, pod("crash", script, restart_policy="Always"))

    def backing_off(p: dict) -> bool:
        status = container_status(p)
        return status.get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff" and status["restartCount"] >= 4

    for _ in range(20):  # look while the pod stays in one back-off (each is twice the last)
        before = wait_pod(api, "crash", backing_off, timeout=60)
        logs = subprocess.run(["kubectl", "logs", "crash"], env=kube_env, capture_output=True, text=True, timeout=30)
        previous = subprocess.run(["kubectl", "logs", "crash", "--previous"], env=kube_env, capture_output=True,
                                  text=True, timeout=30)
        runs = int(counter.read_text())
        after = api.get(PODS, "default", "crash")
        if after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]:
            break
    else:
        raise AssertionError("the pod never stayed in one back-off long enough to look at it")
    status = container_status(after)
    assert status["restartCount"] == runs - 1
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert logs.stdout == previous.stdout == f"crash {runs - 1}\n", (logs.stderr, previous.stderr)


def test_pods_get_a_data_dir_of_their_namespace_under_the_clusters_directory(api, kubelet, tmp_path):
    # Relative checkpoint paths of the samples land there: in this cluster's own directory,
    # not in the working directory another cluster started from the same checkout shares.
    out = tmp_path / "data-dir"
    create(api, pod("data", f"import os; open({str(out)!r}, 'w').write(os.environ['TRAINCTL_DATA_DIR'])"))
    assert wait_pod(api, "data", phase("Succeeded", "Failed"))["status"]["phase"] == "Succeeded"
    data_dir = Path(out.read_text())
    assert data_dir == namespace_data_dir(kubelet.config.directory, "default")
    assert data_dir.is_dir() and kubelet.config.directory.resolve() in data_dir.parents
    assert kubelet.config.workdir.resolve() not in data_dir.parents


def test_each_cluster_and_namespace_has_its_own_data_dir(tmp_path):
    one, other = tmp_path / "one", tmp_path / "other"
    assert namespace_data_dir(one, "default") != namespace_data_dir(other, "default")
    assert namespace_data_dir(one, "default") != namespace_data_dir(one, "team-a")
    assert namespace_data_dir(one, "team-a") == namespace_data_dir(one, "team-a")  # every restart, every node
    with pytest.raises(OutsideDirectory):
        namespace_data_dir(one, "../other")


def test_the_kubelet_keeps_the_conditions_other_writers_own(api):
    """A DisruptionTarget written by the scheduler (a preemption) or the Eviction API survives
    the kubelet's status writes, so the pod's controller can tell it was taken, not failed."""
    gated = pod("marked", "print('done')")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    create(api, gated)
    waiting = wait_pod(api, "marked", lambda p: any(c.get("reason") == "SchedulingGated"
                                                     for c in (p.get("status") or {}).get("conditions") or []))
    target = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
              "message": "default-scheduler: preempting to accommodate a higher priority pod"}
    api.patch(PODS, "default", "marked", {"status": {"conditions": [*waiting["status"]["conditions"], target]}},
              subresource="status")
    api.patch(PODS, "default", "marked", {"spec": {"schedulingGates": None}})
    done = wait_pod(api, "marked", phase("Succeeded", "Failed"))
    kept = [c for c in done["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert [(c["status"], c["reason"]) for c in kept] == [("True", "PreemptionByScheduler")], done["status"]


def test_a_crashed_container_reports_error_before_it_is_restarted(api, tmp_path):
    """kubectl shows a container that exited non-zero as ``Error`` until the kubelet starts it
    again: its terminated state is written, not only the run that follows."""
    counter = tmp_path / "runs"
    script = (f"import pathlib, sys, time; p = pathlib.Path({str(counter)!r}); n = int(p.read_text()) if p.exists() else 0; "
              "p.write_text(str(n + 1)); sys.exit(1) if n == 0 else time.sleep(600)")
    created = create(api, pod("crash-once", script, restart_policy="Always"))
    seen: list[tuple[int, str]] = []
    stream = api.watch(PODS, "default", created["metadata"]["resourceVersion"],
                       field_selector="metadata.name=crash-once", timeout_seconds=60)
    try:
        for event in stream:
            status = container_status(event["object"]) if event.get("type") == "MODIFIED" else {}
            terminated = (status.get("state") or {}).get("terminated")
            if terminated:
                seen.append((status["restartCount"], terminated.get("reason", "")))
            if status.get("restartCount") == 1 and "running" in (status.get("state") or {}):
                break
    finally:
        stream.close()
    assert (0, "Error") in seen
