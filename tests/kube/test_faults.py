"""Faults the controller must survive: a flaky API server, cut watches, being killed."""

from __future__ import annotations

import collections
import ssl

from trainctl.kube.restmapper import PYTORCHJOBS

from tests.support.conditions import condition
from tests.support.controller import expected_replicas, master_succeeds_when_all_run, ready
from tests.support.faultproxy import FaultProxy
from tests.support.jobs import pytorchjob
from tests.support.net import free_port
from tests.support.podphase import PodPhaseDriver


def _pods_per_name(pods, prefix):
    return collections.Counter(p["metadata"]["name"] for p in pods.list() if p["metadata"]["name"].startswith(prefix))


def test_jobs_complete_through_errors_and_dropped_watches(apiserver, kube, start_manager, jobs, pods, rbac_allowed):
    tls = ssl.create_default_context(cafile=kube.configuration.ssl_ca_cert)
    with FaultProxy(apiserver.url, error_rate=0.2, drop_watch_after=7, seed=11, ssl_context=tls) as proxy:
        manager = start_manager(server_url=proxy.url)
        driver = PodPhaseDriver(kube, "default", master_succeeds_when_all_run).start()
        try:
            names = [f"flaky-net-{i}" for i in range(3)]
            for name in names:
                expected_replicas[name] = 3
                kube.create(PYTORCHJOBS, pytorchjob(name, workers=2, restart="OnFailure", uid=None))
            for name in names:
                jobs.wait(lambda name=name: condition(jobs.get(name), "Succeeded"), timeout=120, what=f"{name} Succeeded")
        finally:
            driver.stop()
            manager.stop()  # while its API server is still reachable
        assert proxy.injected.get(500) and proxy.injected.get(429), proxy.injected
        assert proxy.dropped_watches > 0
    assert len(driver.created) == 9, "duplicate pods were created"
    for name in names:
        assert len(_pods_per_name(pods, name)) == 3
    # Every success counted once, although requests failed and streams were cut.
    succeeded = manager.metrics.jobs["succeeded"].labels(job_namespace="default", framework="pytorch")
    jobs.wait(lambda: succeeded._value.get() >= 3, timeout=30, what="3 successes counted")
    assert succeeded._value.get() == 3
    assert manager.client.calls <= rbac_allowed


def test_killed_at_any_point_and_restarted_every_job_finishes_without_duplicates(kube, controller_process, jobs, pods):
    """Each round creates a job and SIGKILLs the controller at a different moment of its
    life: mid pod creation, right after the first status write, once Running, once
    Succeeded (before the follow-up work). A last controller finishes everything."""

    def job_pods(name):
        return [p for p in pods.list() if p["metadata"]["labels"].get("training.kubeflow.org/job-name") == name]

    kill_points = {
        "crashy-creating": lambda name: job_pods(name),
        "crashy-created": lambda name: condition(jobs.get(name), "Created"),
        # Running may be skipped when the pods start and finish within one batch window.
        "crashy-running": lambda name: condition(jobs.get(name), "Running") or condition(jobs.get(name), "Succeeded"),
        "crashy-succeeded": lambda name: condition(jobs.get(name), "Succeeded"),
    }
    driver = PodPhaseDriver(kube, "default", master_succeeds_when_all_run).start()
    try:
        for name, reached in kill_points.items():
            expected_replicas[name] = 4
            kube.create(PYTORCHJOBS, pytorchjob(name, workers=3, restart="OnFailure", uid=None))
            proc = controller_process("--metrics-port", "0", "--health-port", "0").start()
            pods.wait(lambda reached=reached, name=name: reached(name), timeout=60, what=f"{name}: kill point")
            proc.kill()
        health = free_port()
        final = controller_process("--metrics-port", "0", "--health-port", str(health), "--bind-address", "127.0.0.1").start()
        for name in kill_points:
            jobs.wait(lambda name=name: condition(jobs.get(name), "Succeeded"), timeout=120, what=f"{name} Succeeded")
        jobs.wait(lambda: ready(health), timeout=30, what="the last controller ready")
        assert final.terminate() == 0
    finally:
        driver.stop()
    assert len(driver.created) == 4 * len(kill_points), "a pod was created twice"
    for name in kill_points:
        per_name = _pods_per_name(pods, name + "-")
        assert len(per_name) == 4 and set(per_name.values()) == {1}
    uids = {j["metadata"]["uid"] for j in jobs.list()}
    for pod in pods.list():
        assert pod["metadata"]["ownerReferences"][0]["uid"] in uids, "orphaned pod"


def test_a_spec_change_that_caused_a_status_conflict_is_not_lost(apiserver, kube, start_manager, jobs, pods):
    """A real concurrent writer: the job is scaled between the controller's read and its
    status write. The write conflicts, is re-applied on the re-read job, and the scale-up
    is carried out."""

    def scale_up(path: str) -> None:
        job = kube.get(PYTORCHJOBS, "default", "racy")
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2
        kube.replace(PYTORCHJOBS, job)

    tls = ssl.create_default_context(cafile=kube.configuration.ssl_ca_cert)
    with FaultProxy(apiserver.url, status_conflicts=1, before_status_conflict=scale_up, ssl_context=tls) as proxy:
        manager = start_manager(server_url=proxy.url)
        try:
            kube.create(PYTORCHJOBS, pytorchjob("racy", workers=1, restart="OnFailure", uid=None))
            pods.wait(lambda: pods.get("racy-worker-1"), timeout=30, what="the scaled-up worker")
        finally:
            manager.stop()
        assert proxy.status_conflicts_sent == 1
