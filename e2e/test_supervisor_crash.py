"""The supervisor of a detached cluster killed with SIGKILL while a job trains, as a user meets it.

The cluster runs on without its supervisor. ``trainctl local status`` says so (exit 3, every
component with its pid, the pods still Running as they are); ``trainctl local up`` on the
directory refuses (exit 1, pointing at ``down``) and kills nothing; ``trainctl local down``
stops every process of the cluster, checked by pid: components, pods, and what the pods
started. The next ``up`` runs one node where there were two: the other node is gone, the pods
whose processes ``down`` stopped are reported Failed, and the job's replacements run (each
Running pod with its process) and train on from the last checkpoint.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trainctl.cluster.kubelet.runtime import process_start_time
from trainctl.cluster.local_cluster import NETWORK_FILE
from trainctl.cluster.network import isolation
from trainctl.cluster.pidfiles import read_pid_file, wait_pid_exit

from tests.support.cluster import TEST_NETWORK_VARIABLE, scratch_workdir, trainctl_local
from tests.support.kubectl import Kubectl
from tests.support.net import free_port
from tests.support.pods import descendants, main_pid
from tests.support.samples import containers, load_sample, replica_specs, set_arg

# Two cluster starts, two rounds of torch start-up: minutes on a loaded machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

JOB = "pytorch-ddp"
COMPONENTS = ("apiserver", "scheduler", "kubelet", "kubelet-trainctl-local-2", "controlplane", "controller")


def pods(kubectl: Kubectl) -> list[dict[str, Any]]:
    return kubectl.json("get", "pods")["items"]


def processes(kubectl: Kubectl) -> dict[str, list[int]]:
    """Each Running pod's container process and everything it started, by pod name."""
    found = {}
    for pod in pods(kubectl):
        pid = main_pid(pod) if pod["status"].get("phase") == "Running" else None
        if pid is not None:
            found[pod["metadata"]["name"]] = [pid, *descendants(pid)]
    return found


def running_without_a_process(kubectl: Kubectl) -> list[str]:
    return [pod["metadata"]["name"] for pod in pods(kubectl) if pod["status"].get("phase") == "Running"
            and ((pid := main_pid(pod)) is None or process_start_time(pid) is None)]


def step_of(line: str, event: str = "step") -> int | None:
    """N of a ``[event] step=N ...`` line of train.py, else None."""
    if not line.startswith(f"[{event}] "):
        return None
    return int(line.split("step=", 1)[1].split()[0])


def follow_master(kubectl: Kubectl, until: Callable[[str], bool]) -> None:
    """Read the master's log as it comes until a line satisfies ``until``."""
    follow = kubectl.popen("logs", "-f", f"{JOB}-master-0")
    try:
        assert follow.stdout is not None
        for line in follow.stdout:
            if until(line):
                return
        raise AssertionError(f"the master's log ended first: {follow.stderr.read() if follow.stderr else ''}")
    finally:
        follow.kill()
        follow.wait()


def trained_past_its_checkpoint() -> Callable[[str], bool]:
    resumed: list[int] = []

    def until(line: str) -> bool:
        if (step := step_of(line, "resume")) is not None:
            resumed.append(step)
        return bool(resumed) and (step_of(line) or 0) > resumed[0]
    return until


def test_a_killed_supervisor_is_reported_refused_stopped_and_its_job_trains_on(tmp_path: Path) -> None:
    workdir = scratch_workdir(tmp_path)
    directory = tmp_path / "cluster"
    kubectl = Kubectl.for_kubeconfig(directory / "kubeconfig", tmp_path / "home")
    job = load_sample("pytorch/ddp.yaml")
    set_arg(job, "--steps", "400")
    set_arg(job, "--step-sleep", "0.2")  # 80 s at least: it trains through the whole crash
    # A Master and one Worker that cannot share a node of one CPU: one pod on each node.
    # Their port is a free one: other clusters on this machine may be training on 23456.
    replica_specs(job)["Worker"]["replicas"] = 1
    port = free_port("0.0.0.0")
    for container in containers(job):
        container["resources"]["requests"]["cpu"] = "600m"
        container["ports"] = [{"name": "pytorchjob-port", "containerPort": port}]
    up = trainctl_local("up", "--dir", str(directory), "--detach", "--nodes", "2", "--workdir", str(workdir),
                        "--network", os.environ.get(TEST_NETWORK_VARIABLE, isolation.AUTO))
    assert up.returncode == 0, up.stderr
    # The isolated pod network has one component more: its router.
    isolated = (directory / NETWORK_FILE).read_text().split()[0] == isolation.ISOLATED
    names = (*COMPONENTS, "network") if isolated else COMPONENTS
    try:
        kubectl.apply(job)
        kubectl("wait", f"pytorchjob/{JOB}", "--for=condition=Running", "--timeout=180s", timeout=200)
        kubectl("wait", "--for=jsonpath={.status.phase}=Running", "pods", "--all", "--timeout=180s", timeout=200)
        follow_master(kubectl, lambda line: step_of(line, "checkpoint") is not None)  # one to resume from
        assert {pod["spec"]["nodeName"] for pod in pods(kubectl)} == {"trainctl-local", "trainctl-local-2"}
        components = {name: read_pid_file(directory / "run" / f"{name}.pid") for name in names}
        assert all(components.values()), components
        training = processes(kubectl)
        assert len(training) == 2, training
        before = {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in pods(kubectl)}

        supervisor = read_pid_file(directory / "run" / "supervisor.pid")
        assert supervisor is not None
        os.kill(supervisor, signal.SIGKILL)
        assert wait_pid_exit(supervisor, 30)

        status = trainctl_local("status", "--dir", str(directory))
        assert status.returncode == 3, status.stdout + status.stderr
        assert (f"supervisor not running; {len(names)} components and 2 pod process groups still running without it "
                "(orphaned)") in status.stdout, status.stdout
        for name, pid in components.items():
            assert f"running, pid {pid}" in status.stdout.split(f"  {name} ", 1)[1].split("\n", 1)[0], status.stdout
        assert "Pods: 2 (2 Running)" in status.stdout, status.stdout
        assert f"trainctl local down --dir {directory}" in status.stdout

        again = trainctl_local("up", "--dir", str(directory), "--detach", "--workdir", str(workdir))
        assert again.returncode == 1, again.stdout + again.stderr
        assert f"is not running, but what it started still runs: apiserver (pid {components['apiserver']})" in again.stderr
        assert f"stop it with: trainctl local down --dir {directory}" in again.stderr
        # Nothing was killed: the job trains on, and kubectl still sees it do so.
        assert all(process_start_time(pid) for pid in [*components.values(), *(p[0] for p in training.values())])
        assert {pod["metadata"]["name"]: pod["status"]["phase"] for pod in pods(kubectl)} == dict.fromkeys(before, "Running")

        down = trainctl_local("down", "--dir", str(directory))
        assert down.returncode == 0, down.stderr
        assert "its supervisor was gone; stopped what it left: " in down.stdout, down.stdout
        every = [*components.values(), *(pid for group in training.values() for pid in group)]
        assert [pid for pid in every if process_start_time(pid) is not None] == []
        assert trainctl_local("status", "--dir", str(directory)).returncode == 1

        # Next run: one node. Nothing Running without its process; the job trains on.
        up = trainctl_local("up", "--dir", str(directory), "--detach", "--workdir", str(workdir))
        assert up.returncode == 0, up.stderr
        assert [node["metadata"]["name"] for node in kubectl.json("get", "nodes")["items"]] == ["trainctl-local"]
        assert running_without_a_process(kubectl) == []
        kubectl("wait", "--for=jsonpath={.status.phase}=Running", *(f"pod/{name}" for name in before),
                "--timeout=180s", timeout=200)
        follow_master(kubectl, trained_past_its_checkpoint())
        after = {pod["metadata"]["name"]: pod for pod in pods(kubectl)}
        assert set(after) == set(before)
        assert all(after[name]["metadata"]["uid"] != uid for name, uid in before.items()), "every pod was replaced"
        assert {pod["spec"]["nodeName"] for pod in after.values()} == {"trainctl-local"}
        assert running_without_a_process(kubectl) == []
    finally:
        leftovers = [pid for pid in (read_pid_file(path) for path in (directory / "run").glob("*.pid")) if pid]
        down = trainctl_local("down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    assert [pid for pid in leftovers if process_start_time(pid) is not None] == []
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    assert str(directory) not in ps, ps
