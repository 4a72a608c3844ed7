"""The controller against the embedded API server: jobs run to completion, exactly once."""

from __future__ import annotations

import collections
import urllib.request

from trainctl.kube.restmapper import CRDS, PYTORCHJOBS

from tests.support.conditions import condition
from tests.support.controller import expected_replicas, job_events, master_succeeds_when_all_run, ready
from tests.support.jobs import pytorchjob
from tests.support.net import free_port
from tests.support.podphase import PodPhaseDriver


def _names(objs):
    return sorted(o["metadata"]["name"] for o in objs)


def test_a_job_runs_to_success_with_each_child_created_once(kube, start_manager, jobs, pods, services, events, rbac_allowed):
    manager = start_manager()
    driver = PodPhaseDriver(kube, "default", master_succeeds_when_all_run).start()
    try:
        expected_replicas["mnist"] = 3
        kube.create(PYTORCHJOBS, pytorchjob("mnist", workers=2, restart="OnFailure", uid=None))
        done = jobs.wait(lambda: condition(jobs.get("mnist"), "Succeeded"), what="mnist Succeeded")
        assert done["reason"] == "PyTorchJobSucceeded"
    finally:
        driver.stop()

    job = jobs.get("mnist")
    assert job["status"].get("startTime") and job["status"].get("completionTime")
    mine = [p for p in pods.list() if p["metadata"]["labels"].get("training.kubeflow.org/job-name") == "mnist"]
    assert _names(mine) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert len(driver.created) == 3, "a pod was created twice"
    assert _names(s for s in services.list() if s["metadata"]["name"].startswith("mnist-")) == _names(mine)
    for child in mine:
        (owner,) = child["metadata"]["ownerReferences"]
        assert owner["uid"] == job["metadata"]["uid"] and owner["controller"] is True

    reasons = [e["reason"] for e in events.wait(lambda: job_events(events, "mnist"), what="events")]
    events.wait(lambda: "PyTorchJobSucceeded" in [e["reason"] for e in job_events(events, "mnist")], what="success event")
    reasons = collections.Counter(e["reason"] for e in job_events(events, "mnist"))
    assert reasons["PyTorchJobSucceeded"] == 1, reasons

    counters = manager.metrics.jobs
    assert counters["succeeded"].labels(job_namespace="default", framework="pytorch")._value.get() == 1
    assert manager.client.calls <= rbac_allowed, manager.client.calls - rbac_allowed


def test_a_failed_pod_is_replaced_and_the_job_still_succeeds(kube, start_manager, jobs, pods):
    manager = start_manager()
    failed_uids: set[str] = set()

    def outcome(pod, running):
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        if name == "flaky-worker-0" and not failed_uids:
            failed_uids.add(uid)
            return "Failed"
        # The master finishes only once the replacement worker runs.
        replaced = any(p["metadata"]["name"] == "flaky-worker-0" and p["metadata"]["uid"] not in failed_uids for p in running)
        return master_succeeds_when_all_run(pod, running) if failed_uids and replaced else None

    expected_replicas["flaky"] = 2
    driver = PodPhaseDriver(kube, "default", outcome).start()
    try:
        kube.create(PYTORCHJOBS, pytorchjob("flaky", workers=1, restart="OnFailure", uid=None))
        jobs.wait(lambda: condition(jobs.get("flaky"), "Succeeded"), what="flaky Succeeded")
    finally:
        driver.stop()
    # The worker was created twice (the replacement), the master once.
    assert len(driver.created) == 3
    assert manager.metrics.jobs["restarted"].labels(job_namespace="default", framework="pytorch")._value.get() >= 1


def _without_validation(schema):
    """The schema minus its CEL rules: a cluster whose CRD does not guard the spec."""
    if isinstance(schema, dict):
        return {k: _without_validation(v) for k, v in schema.items() if k != "x-kubernetes-validations"}
    if isinstance(schema, list):
        return [_without_validation(v) for v in schema]
    return schema


def test_an_invalid_job_fails_naming_the_field_and_others_still_run(kube, start_manager, jobs, events):
    crd = kube.get(CRDS, None, "pytorchjobs.kubeflow.org")
    crd["spec"] = _without_validation(crd["spec"])
    kube.replace(CRDS, crd)
    start_manager()
    bad = pytorchjob("bad", workers=1, restart="OnFailure", uid=None)
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2  # a PyTorchJob has one Master
    kube.create(PYTORCHJOBS, bad)
    expected_replicas["good"] = 2
    driver = PodPhaseDriver(kube, "default", master_succeeds_when_all_run).start()
    try:
        kube.create(PYTORCHJOBS, pytorchjob("good", workers=1, restart="OnFailure", uid=None))
        failed = jobs.wait(lambda: condition(jobs.get("bad"), "Failed"), what="bad Failed")
        jobs.wait(lambda: condition(jobs.get("good"), "Succeeded"), what="good Succeeded")
    finally:
        driver.stop()
    assert "spec.pytorchReplicaSpecs[Master].replicas" in failed["message"]
    warning = events.wait(
        lambda: [e for e in job_events(events, "bad") if "spec.pytorchReplicaSpecs[Master].replicas" in e.get("message", "")],
        what="an event naming the field",
    )
    assert warning[0]["type"] in ("Warning", "Normal")


def test_probes_and_metrics_are_served(controller_process, kube, jobs):
    metrics_port, health_port = free_port(), free_port()
    proc = controller_process(
        "--metrics-port",
        str(metrics_port),
        "--health-port",
        str(health_port),
        "--bind-address",
        "127.0.0.1",
        "--log-format",
        "json",
    ).start()

    jobs.wait(lambda: ready(health_port), timeout=30, what="/readyz")
    with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/healthz", timeout=1) as r:
        assert r.status == 200
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=1) as r:
        text = r.read().decode()
    assert 'trainctl_api_requests_total{code="200",verb="list"}' in text
    assert "trainctl_workqueue_depth" in text
    assert proc.terminate() == 0
    log = proc.log()
    assert '"msg": "starting"' in log and '"msg": "stopped"' in log


def test_a_missing_gang_scheduler_crd_stops_the_controller_with_one_clear_line(controller_process):
    proc = controller_process("--gang-scheduler", "volcano", "--metrics-port", "0", "--health-port", "0").start()
    assert proc.proc.wait(60) == 1
    log = proc.log()
    assert "needs the PodGroup CRD (podgroups.scheduling.volcano.sh/v1beta1), which is not installed" in log
    assert "Traceback" not in log


def test_bad_configuration_is_one_line_not_a_traceback(tmp_path):
    import subprocess
    import sys

    broken = tmp_path / "kubeconfig"
    broken.write_text("clusters: [\n")
    for path in (tmp_path / "missing", broken):
        out = subprocess.run(
            [sys.executable, "-m", "trainctl.cli.main", "controller", "--kubeconfig", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 1
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("trainctl controller: "), out.stderr


def test_an_api_server_that_is_not_up_yet_is_waited_for_not_fatal(tmp_path):
    import signal
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainctl.cli.main", "controller", "--kubeconfig", str(kubeconfig),
         "--metrics-port", "0", "--health-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        time.sleep(15)  # longer than one request's retries
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "API server not answering yet, retrying" in (proc.stdout.read() if proc.stdout else "")


def test_a_child_the_api_server_refuses_is_reported_once_as_a_warning(kube, start_manager, events):
    manager = start_manager()
    job = pytorchjob("refused", workers=None, restart="OnFailure", uid=None)
    # Pod annotations must be strings; the job's loosely-typed template lets this through.
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"] = {"annotations": {"retries": 3}}
    kube.create(PYTORCHJOBS, job)
    warning = events.wait(
        lambda: [e for e in job_events(events, "refused") if e["reason"] == "FailedCreatePod"], what="FailedCreatePod event"
    )
    assert warning[0]["type"] == "Warning" and warning[0]["message"].startswith("Error creating: ")
    # The job keeps being retried with back-off, but the same refusal is not reported again.
    jobs_key = ("PyTorchJob", "default", "refused")
    events.wait(lambda: manager.queue.failures(jobs_key) >= 3, what="three retries")
    assert len([e for e in job_events(events, "refused") if e["reason"] == "FailedCreatePod"]) == 1
