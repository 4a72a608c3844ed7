"""`trainctl local up --detach`, `status` and `down`, run the way a user runs them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from trainctl.cluster.compute import cgroups, enforcer
from trainctl.cluster.kubelet.runtime import process_start_time
from trainctl.cluster.pidfiles import read_pid_file, wait_pid_exit
from trainctl.kube.client import KubeClient

from tests.support.cluster import trainctl_local as trainctl
from tests.support.pods import main_pid, pod_fifo, read_fifo, running_sleeper, wait_pod


def test_up_detach_status_down(tmp_path):
    directory = tmp_path / "cluster"
    up = trainctl("up", "--dir", str(directory), "--detach", "--no-controller", "--gpus", "1", cwd=tmp_path)
    try:
        assert up.returncode == 0, up.stderr
        assert f"export KUBECONFIG={directory / 'kubeconfig'}" in up.stdout

        again = trainctl("up", "--dir", str(directory), "--detach")
        assert again.returncode == 1
        assert "already running" in again.stderr and "Traceback" not in again.stderr

        status = trainctl("status", "--dir", str(directory))
        assert status.returncode == 0, status.stderr
        assert "kubelet     running" in status.stdout
        assert "Node trainctl-local: Ready=True" in status.stdout and "nvidia.com/gpu=1" in status.stdout
        assert ", pod sandbox: " in status.stdout  # which path runs: bwrap here, none where it cannot

        # A pod started with kubectl runs in the directory `up` was started from.
        env = {**os.environ, "KUBECONFIG": str(directory / "kubeconfig"), "HOME": str(tmp_path)}
        fifo = pod_fifo(tmp_path / "ready")  # in the working directory: the pod sees it
        run = subprocess.run(["kubectl", "run", "sleeper", "--image=python", "--restart=Never", "--command", "--",
                              "python", "-c", "import os, sys, time\nopen(sys.argv[1], 'w').write(os.getcwd())\n"
                              "time.sleep(600)", str(fifo)], env=env, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert read_fifo(fifo) == str(tmp_path)
        api = KubeClient.from_kubeconfig(str(directory / "kubeconfig"), qps=0)
        pid = main_pid(wait_pod(api, "sleeper", lambda p: p["status"].get("phase") == "Running"))

        # The supervisor restarts a crashed kubelet, which fails the pods it can no longer run.
        os.kill(read_pid_file(directory / "run" / "kubelet.pid"), signal.SIGKILL)
        failed = wait_pod(api, "sleeper", lambda p: p["status"].get("phase") == "Failed")
        assert failed["status"]["reason"] == "KubeletRestarted"
        assert process_start_time(pid) is None
    finally:
        down = trainctl("down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    assert "stopped" in down.stdout
    status = trainctl("status", "--dir", str(directory))
    assert status.returncode == 1
    assert "No local cluster is running" in status.stdout
    for name in ("apiserver", "kubelet", "supervisor"):
        assert read_pid_file(directory / "run" / f"{name}.pid") is None


def test_bad_input_gets_one_clear_line(tmp_path):
    down = trainctl("down", "--dir", str(tmp_path / "nothing-here"))
    assert (down.returncode, down.stderr.strip()) == (1, f"trainctl local: no local cluster in {tmp_path / 'nothing-here'}")
    bad = trainctl("up", "--gpus", "two")
    assert bad.returncode == 2
    assert "argument --gpus: expected a whole number, got 'two'" in bad.stderr
    # flags handed on to the controller or the control plane are checked before anything starts
    for flag, value, message in (("--node-lost-grace", "soon", "expected a duration such as 30s or 2m, or 'never'"),
                                 ("--node-monitor-grace-period", "0", "invalid duration '0': must be positive"),
                                 ("--hpa-sync-period", "x", "invalid duration 'x'"),
                                 ("--horizontal-pod-autoscaler-cpu-initialization-period", "5 minutes", "invalid duration")):
        bad = trainctl("up", "--dir", str(tmp_path / "never-started"), "--detach", flag, value)
        assert bad.returncode == 2 and f"argument {flag}" in bad.stderr and f": {message}" in bad.stderr, bad.stderr
    assert not (tmp_path / "never-started").exists()


def test_foreground_up_stops_everything_on_sigterm(tmp_path):
    directory = tmp_path / "cluster"
    up = subprocess.Popen([sys.executable, "-m", "trainctl.cli.main", "local", "up", "--dir", str(directory),
                           "--no-controller"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert up.stdout.readline().startswith(f"Local cluster is ready in {directory}")
        pids = [read_pid_file(directory / "run" / f"{name}.pid") for name in ("apiserver", "kubelet")]
        assert all(pids)
        up.send_signal(signal.SIGTERM)
        assert up.wait(60) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert "trainctl local: stopping" in up.stderr.read()
    assert all(process_start_time(pid) is None for pid in pids)


def test_after_a_supervisor_crash_status_tells_up_refuses_and_down_stops_everything(tmp_path):
    """A detached cluster outlives a crash of its supervisor: it is reported, never silently
    killed by a new `up`, and `down` leaves none of its processes."""
    directory = tmp_path / "cluster"
    up = trainctl("up", "--dir", str(directory), "--detach", "--no-controller", cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    router = ("network",) if (directory / "run" / "network.pid").exists() else ()  # the isolated pod network's
    components = {name: read_pid_file(directory / "run" / f"{name}.pid")
                  for name in ("apiserver", *router, "scheduler", "kubelet", "controlplane")}
    supervisor = read_pid_file(directory / "run" / "supervisor.pid")
    try:
        api = KubeClient.from_kubeconfig(str(directory / "kubeconfig"), qps=0)
        pod = main_pid(running_sleeper(api, tmp_path, "sleeper"))
        os.kill(supervisor, signal.SIGKILL)  # the supervisor crashes; its components run on
        assert wait_pid_exit(supervisor, 30)

        status = trainctl("status", "--dir", str(directory))
        assert status.returncode == 3, status.stdout + status.stderr
        assert (f"Local cluster in {directory}: supervisor not running; {len(components)} components and 1 pod process group "
                "still running without it (orphaned)") in status.stdout
        for name, pid in components.items():
            assert f"{name:<11} running, pid {pid}" in status.stdout
        assert "default/sleeper: Running" in status.stdout  # the API server still answers
        assert f"trainctl local down --dir {directory}" in status.stdout

        for command in (("up", "--dir", str(directory), "--no-controller"),
                        ("up", "--dir", str(directory), "--detach"),
                        ("node", "start", "trainctl-local", "--dir", str(directory))):
            refused = trainctl(*command, cwd=tmp_path)
            assert refused.returncode == 1, refused.stdout + refused.stderr
            assert (f"the supervisor of the local cluster in {directory} is not running, but what it started "
                    f"still runs: ") in refused.stderr and f"apiserver (pid {components['apiserver']})" in refused.stderr
            assert f"stop it with: trainctl local down --dir {directory}" in refused.stderr
        assert all(process_start_time(pid) for pid in (pod, *components.values())), "a refused `up` killed nothing"
    finally:
        down = trainctl("down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    left = down.stdout.split("stopped what it left: ", 1)[1].split(")", 1)[0].split(", ")
    assert set(components) | {"1 pod process group"} == set(left), down.stdout
    assert all(process_start_time(pid) is None for pid in (pod, *components.values()))
    status = trainctl("status", "--dir", str(directory))
    assert (status.returncode, status.stdout.strip()) == (1, f"No local cluster is running in {directory}.")


def test_a_killed_foreground_supervisor_takes_its_components_and_pods_with_it(tmp_path):
    directory = tmp_path / "cluster"
    up = subprocess.Popen([sys.executable, "-m", "trainctl.cli.main", "local", "up", "--dir", str(directory),
                           "--no-controller"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path)
    try:
        assert up.stdout.readline().startswith(f"Local cluster is ready in {directory}")
        components = [read_pid_file(directory / "run" / f"{name}.pid")
                      for name in ("apiserver", "scheduler", "kubelet", "controlplane")]
        api = KubeClient.from_kubeconfig(str(directory / "kubeconfig"), qps=0)
        pod = main_pid(running_sleeper(api, tmp_path, "sleeper"))
        up.kill()
        up.wait()
        assert all(wait_pid_exit(pid, 60) for pid in (*components, pod))
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        trainctl("down", "--dir", str(directory))
    status = trainctl("status", "--dir", str(directory))
    assert status.returncode == 1, status.stdout


class FlakyComponent:
    """Crashes at once after every start; every other start fails outright."""

    name = "apiserver"
    log_file = "apiserver.log"

    def __init__(self) -> None:
        self.starts = 0
        self.process = subprocess.Popen(["true"])

    @property
    def pid(self) -> int:
        return self.process.pid

    def start(self) -> None:
        from trainctl.cluster.local_cluster import ClusterError

        self.starts += 1
        self.process = subprocess.Popen(["true"])
        if self.starts % 2:
            self.process.wait()
            raise ClusterError("apiserver exited during start-up")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def test_a_failed_restart_counts_as_a_crash_and_is_retried():
    from types import SimpleNamespace

    from trainctl.cluster import supervisor

    component = FlakyComponent()
    said: list[str] = []
    assert supervisor.supervise(SimpleNamespace(components=[component], nodes=[], directory=None), said.append) == 1
    assert component.starts == supervisor.MAX_RESTARTS  # failed starts did not end supervision
    err = "\n".join(said)
    assert "apiserver exited during start-up" in err and "giving up" in err


def test_node_commands_with_the_supervisor(tmp_path):
    import time

    from trainctl.kube.restmapper import NODES

    directory = tmp_path / "cluster"
    up = trainctl("up", "--dir", str(directory), "--detach", "--no-controller", "--nodes", "2",
                  "--node-names", "left,right", "--node-cpu", "1", cwd=tmp_path)
    try:
        assert up.returncode == 0, up.stderr
        assert "nodes left, right" in up.stdout
        api = KubeClient.from_kubeconfig(str(directory / "kubeconfig"), qps=0)
        assert sorted(n["metadata"]["name"] for n in api.list(NODES)[0]) == ["left", "right"]
        kubelet = read_pid_file(directory / "run" / "kubelet-right.pid")

        kill = trainctl("node", "kill", "right", "--dir", str(directory))
        assert kill.returncode == 0, kill.stderr
        assert process_start_time(kubelet) is None
        time.sleep(2)  # the supervisor saw the exit and must leave the node down
        assert read_pid_file(directory / "run" / "kubelet-right.pid") is None
        status = trainctl("status", "--dir", str(directory))
        assert "Node right: Ready=" in status.stdout and ", killed," in status.stdout
        assert "kubelet-right not running" in status.stdout

        assert trainctl("node", "freeze", "right", "--dir", str(directory)).returncode == 1  # killed: say so
        assert trainctl("node", "kill", "nowhere", "--dir", str(directory)).returncode == 1

        start = trainctl("node", "start", "right", "--dir", str(directory))
        assert start.returncode == 0, start.stderr
        deadline = time.monotonic() + 60
        while read_pid_file(directory / "run" / "kubelet-right.pid") in (None, kubelet) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert read_pid_file(directory / "run" / "kubelet-right.pid") not in (None, kubelet)

        assert trainctl("node", "freeze", "left", "--dir", str(directory)).returncode == 0
        assert "frozen" in trainctl("status", "--dir", str(directory)).stdout
        assert trainctl("node", "thaw", "left", "--dir", str(directory)).returncode == 0
    finally:
        down = trainctl("down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr

def test_up_runs_the_control_plane_with_its_flags_and_down_removes_the_clusters_groups(tmp_path):
    directory = tmp_path / "cluster"
    up = trainctl("up", "--dir", str(directory), "--detach", "--no-controller", "--hpa-sync-period", "2s",
                  "--node-monitor-grace-period", "10s", "--horizontal-pod-autoscaler-cpu-initialization-period", "1m",
                  "--horizontal-pod-autoscaler-initial-readiness-delay", "10s",
                  "--horizontal-pod-autoscaler-downscale-stabilization", "2m", cwd=tmp_path)
    try:
        assert up.returncode == 0, up.stderr
        status = trainctl("status", "--dir", str(directory))
        assert "controlplane running" in status.stdout, status.stdout
        pid = read_pid_file(directory / "run" / "controlplane.pid")
        argv = open(f"/proc/{pid}/cmdline").read().split("\0")
        assert argv[argv.index("--hpa-sync-period") + 1] == "2s"
        assert argv[argv.index("--node-monitor-grace-period") + 1] == "10s"
        for flag, value in (("--horizontal-pod-autoscaler-cpu-initialization-period", "1m"),
                            ("--horizontal-pod-autoscaler-initial-readiness-delay", "10s"),
                            ("--horizontal-pod-autoscaler-downscale-stabilization", "2m")):
            assert argv[argv.index(flag) + 1] == value
        kubelet_log = (directory / "logs" / "kubelet.log").read_text()
        assert "resource limits: " in kubelet_log
        groups = [hierarchy.mount / "trainctl" / enforcer.cluster_key(directory)
                  for hierarchy in cgroups.system_hierarchies()]
        if "resource limits: cgroup" in kubelet_log:  # the node's groups exist while it runs
            assert any(path.is_dir() for path in groups), groups
    finally:
        down = trainctl("down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    assert read_pid_file(directory / "run" / "controlplane.pid") is None
    assert not [path for path in groups if path.exists()]
