"""The launcher and ``trainctl run`` on the whole embedded cluster: API server, kubelet, controller.

Real jobs run as local processes; the controller sets the conditions. These are the
end-to-end checks of what the bare-API-server tests check piece by piece: the outcome,
the failure message, the exact timeout, and the lead pod's log across a restart.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from trainctl.cluster.kubelet.runtime import ProcessRegistry
from trainctl.cluster.local_cluster import NETWORK_FILE, LocalCluster, cleanup_leftovers, find_leftovers
from trainctl.cluster.pidfiles import wait_pid_exit
from trainctl.launch import Launcher, Outcome, connect

from tests.support.jobs import unique
from tests.support.launch import NAMESPACE, RecordingView, StatusDriver, launched_job
from tests.support.pods import pod_scratch
from tests.support.repo import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), controller=True, workdir=REPO, backoff_base=0.2) as running:
        yield running


@pytest.fixture
def launcher(cluster: LocalCluster) -> Launcher:
    return Launcher(connect(str(cluster.kubeconfig)))


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def fails_once(marker: Path, first: str, exit_code: int, then: str) -> str:
    """Python that prints ``first`` and exits ``exit_code`` on its first run, ``then`` after."""
    return (
        "import pathlib, sys\n"
        f"marker = pathlib.Path({str(marker)!r})\n"
        "if not marker.exists():\n"
        f"    marker.touch(); print({first!r}, flush=True); sys.exit({exit_code})\n"
        f"print({then!r}, flush=True)\n"
    )


def test_a_job_that_succeeds_streams_the_masters_log(launcher):
    name = unique("hello")
    job = launched_job(name, python("for i in range(3): print('step', i, flush=True)"), workers=1)
    view = RecordingView()
    result = launcher.launch(job, NAMESPACE, view, timeout=60)
    assert result.outcome is Outcome.SUCCEEDED, view.buffer.getvalue()
    assert result.condition["reason"] == "PyTorchJobSucceeded"
    assert view.lines == [(f"{name}-master-0", f"step {i}") for i in range(3)]
    assert any(f"{name}-worker-0" in p.pod_phases for p in view.progress)
    assert f"{name}-master-0" in result.pods
    # a job this short may finish before the controller ever writes Running: the states the
    # view saw are those of the lifecycle, in its order, ending in Succeeded
    lifecycle = ["Pending", "Created", "Running", "Succeeded"]
    assert view.states[-1] == "Succeeded" and set(view.states) <= set(lifecycle), view.states
    assert [lifecycle.index(s) for s in view.states] == sorted(lifecycle.index(s) for s in view.states), view.states


def test_a_job_that_fails_reports_the_controllers_message(launcher):
    name = unique("broken")
    view = RecordingView()
    job = launched_job(name, python("import sys; print('giving up', flush=True); sys.exit(3)"))
    result = launcher.launch(job, NAMESPACE, view, timeout=60)
    assert result.outcome is Outcome.FAILED
    failed = next(c for c in result.status["conditions"] if c["type"] == "Failed")
    assert result.message == failed["message"] and "Master" in result.message
    assert (f"{name}-master-0", "giving up") in view.lines


def test_a_job_that_runs_too_long_is_stopped_at_the_timeout_and_deleted(launcher, cluster):
    name = unique("sleepy")
    view = RecordingView()
    job = launched_job(name, python("import time; print('sleeping', flush=True); time.sleep(300)"))
    result = launcher.launch(job, NAMESPACE, view, timeout=4, delete_when_done=True)
    assert result.outcome is Outcome.TIMED_OUT
    assert 4 <= result.duration < 10  # not before the deadline, and without waiting for the pod
    assert result.deleted
    assert not StatusDriver(launcher.api).exists(name)


def test_the_masters_log_is_followed_across_a_container_restart(launcher, cluster):
    name = unique("flaky")
    code = fails_once(pod_scratch(cluster.directory, NAMESPACE) / f"{name}.attempted", "attempt 1 fails", 1, "attempt 2 works")
    view = RecordingView()
    result = launcher.launch(launched_job(name, python(code), restart_policy="OnFailure"), NAMESPACE, view, timeout=60)
    assert result.outcome is Outcome.SUCCEEDED, view.buffer.getvalue()
    pod = f"{name}-master-0"
    assert view.lines == [(pod, "attempt 1 fails"), (pod, "attempt 2 works")]
    assert f"{pod}: following restart 1 of container pytorch" in view.notes
    assert result.restarts == 1


def test_run_without_a_configured_cluster_starts_a_throwaway_one(tmp_path):
    job = launched_job("throwaway", python("print('trained on a throwaway cluster', flush=True)"))
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env.update(HOME=str(home), TMPDIR=str(tmp_path / "tmp"))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "trainctl.cli.main", "run", "-f", str(manifest), "--timeout", "90s"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=110,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "starting a throwaway local cluster" in out
    # which pod network it chose, and why, as `trainctl local status` says it
    network = next(line for line in out.splitlines() if line.startswith("--- pod network: "))
    assert network.removeprefix("--- pod network: ").startswith(("isolated: ", "shared: ")), network
    assert network.endswith(")") and " (" in network, network
    assert "throwaway-master-0 | trained on a throwaway cluster" in out
    assert "PyTorchJob default/throwaway succeeded after" in out
    log_line = next(line for line in out.splitlines() if line.strip().startswith("logs:"))
    saved = Path(log_line.split("logs:", 1)[1].strip())
    assert saved.name == "throwaway-master-0.log"
    assert saved.parent.parent == tmp_path / "tmp"  # kept under TMPDIR, as the summary says
    assert "trained on a throwaway cluster" in saved.read_text()
    assert not (home / ".kube").exists()  # nothing written where a real kubeconfig would live
    assert time.monotonic() - started < 100


def test_the_masters_log_is_followed_when_the_pod_is_recreated(launcher, cluster):
    """ExitCode policy: a retryable exit (137) makes the controller delete and recreate the pod."""
    name = unique("recreated")
    code = fails_once(pod_scratch(cluster.directory, NAMESPACE) / f"{name}.attempted", "first pod dies", 137, "second pod works")
    view = RecordingView()
    result = launcher.launch(launched_job(name, python(code), restart_policy="ExitCode"), NAMESPACE, view, timeout=60)
    assert result.outcome is Outcome.SUCCEEDED, view.buffer.getvalue()
    pod = f"{name}-master-0"
    assert view.lines == [(pod, "first pod dies"), (pod, "second pod works")]
    assert "Restarting" in view.states
    assert result.restarts == 1


def test_a_killed_run_takes_its_throwaway_cluster_with_it(tmp_path):
    """The throwaway cluster lives in a temporary directory nobody knows of: if `trainctl run`
    is killed (SIGKILL: no clean-up runs), its components must not run on unseen."""
    job = launched_job("orphan", python("import time; time.sleep(600)"))
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env.update(HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path / "tmp"))
    run = subprocess.Popen([sys.executable, "-m", "trainctl.cli.main", "run", "-f", str(manifest)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 90
        pods: list[int] = []
        while not pods and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.2)
            pods = [record.pid for registry in (tmp_path / "tmp").glob("trainctl-run-*/kubelet/*/processes")
                    for record in ProcessRegistry(registry).records() if record.alive()]
        assert pods, "the job's pod never ran"
        directory = next((tmp_path / "tmp").glob("trainctl-run-*"))
        running = find_leftovers(directory).components
        expected = {"apiserver", "scheduler", "kubelet", "controlplane", "controller"}
        if (directory / NETWORK_FILE).read_text().split()[0] == "isolated":
            expected.add("network")  # the pod network's router
        assert set(running) == expected, running
        components = list(running.values())
        run.kill()
        run.wait()
        assert all(wait_pid_exit(pid, 120) for pid in (*components, *pods))  # generous: a loaded machine
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for directory in (tmp_path / "tmp").glob("trainctl-run-*"):
            cleanup_leftovers(directory)
