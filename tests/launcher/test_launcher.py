"""The launcher's watch, timeout and progress logic, against the real API server.

The ``StatusDriver`` plays the controller (conditions through ``/status``, owned pods), so
every outcome is produced by real HTTP watches from the real Python client.
"""

from __future__ import annotations

import time

import pytest

from trainctl.launch import JobExists, Launcher, Outcome

from tests.support.conditions import true_condition
from tests.support.jobs import unique
from tests.support.launch import NAMESPACE, Background, RecordingView, launched_job

pytestmark = pytest.mark.timeout(60)


def start(kube, view, job, **options):
    return Background(Launcher(kube).launch, job, NAMESPACE, view, **options)


def test_succeeded_job_returns_its_condition_status_and_progress(kube, driver, view):
    name = unique("ok")
    run = start(kube, view, launched_job(name, workers=1))
    view.wait_created()
    driver.set_status(name, true_condition("Created", f"PyTorchJob {name} is created."))
    view.wait_state("Created")
    running = {"Master": {"active": 1}, "Worker": {"active": 1}}
    driver.set_status(name, true_condition("Created", "created"), true_condition("Running", "running"), replicas=running)
    view.wait_state("Running")
    done = {"Master": {"succeeded": 1}, "Worker": {"succeeded": 1}}
    message = f"PyTorchJob {name} is successfully completed."
    driver.set_status(name, true_condition("Created", "created"), true_condition("Succeeded", message), replicas=done)

    result = run.join()
    assert result.outcome is Outcome.SUCCEEDED and result.succeeded
    assert result.message == message
    assert result.condition["type"] == "Succeeded" and result.condition["reason"] == "PyTorchJobSucceeded"
    assert result.status["replicaStatuses"] == done
    assert view.states == ["Pending", "Created", "Running", "Succeeded"]
    assert "Master 1 active; Worker 1 active" in view.buffer.getvalue()
    assert not result.deleted and driver.exists(name)


def test_a_succeeded_job_is_reported_with_the_counts_its_next_status_write_settles(kube, driver, view):
    """The controller sets Succeeded while some replicas still count active, and counts them succeeded a pass later."""
    name = unique("settle")
    run = start(kube, view, launched_job(name, workers=2))
    view.wait_created()
    message = f"PyTorchJob {name} is successfully completed."
    succeeded = (true_condition("Created", "created"), true_condition("Succeeded", message))
    driver.set_status(name, *succeeded, replicas={"Worker": {"active": 2, "succeeded": 1}})
    view.wait_state("Succeeded")
    final = {"Worker": {"succeeded": 3}}
    driver.set_status(name, *succeeded, replicas=final)

    result = run.join()
    assert result.outcome is Outcome.SUCCEEDED
    assert result.status["replicaStatuses"] == final


def test_failed_job_propagates_the_failure_message(kube, driver, view):
    name = unique("fail")
    run = start(kube, view, launched_job(name))
    view.wait_created()
    message = f"PyTorchJob {name} is failed because 1 Master replica(s) failed."
    driver.set_status(
        name, true_condition("Created", "created"), true_condition("Failed", message), replicas={"Master": {"failed": 1}}
    )

    result = run.join()
    assert result.outcome is Outcome.FAILED and not result.succeeded
    assert result.message == message
    assert result.status["replicaStatuses"] == {"Master": {"failed": 1}}


def test_failed_wins_when_msjob_style_status_has_both_terminal_conditions(kube, driver, view):
    name = unique("both")
    run = start(kube, view, launched_job(name))
    view.wait_created()
    driver.set_status(name, true_condition("Succeeded", "worker 0 succeeded"), true_condition("Failed", "worker 1 failed"))
    result = run.join()
    assert result.outcome is Outcome.FAILED and result.message == "worker 1 failed"


@pytest.mark.parametrize("delete", [True, False], ids=["delete-when-done", "keep"])
def test_timeout_is_kept_exactly_and_the_job_deleted_only_if_asked(kube, driver, view, delete):
    name = unique("slow")
    timeout = 1.5
    run = start(kube, view, launched_job(name), timeout=timeout, delete_when_done=delete)
    view.wait_created()
    driver.set_status(
        name, true_condition("Created", "created"), true_condition("Running", "running"), replicas={"Master": {"active": 1}}
    )

    result = run.join()
    elapsed = time.monotonic() - run.started
    assert result.outcome is Outcome.TIMED_OUT
    assert timeout <= result.duration < timeout + 10
    assert elapsed < timeout + 10  # returned on its own clock, not after a server-side watch timeout
    assert result.message == f"PyTorchJob {NAMESPACE}/{name} did not finish within 1.5s (last condition: Running)"
    assert result.deleted is delete
    assert driver.exists(name) is not delete


def test_job_deleted_by_someone_else_ends_the_wait(kube, driver, view):
    name = unique("gone")
    run = start(kube, view, launched_job(name))
    view.wait_created()
    driver.set_status(name, true_condition("Created", "created"))
    view.wait_state("Created")
    driver.delete_job(name)
    result = run.join()
    assert result.outcome is Outcome.DELETED and result.deleted
    assert "was deleted while Created" in result.message


def test_restarts_count_in_place_restarts_and_recreated_pods(kube, driver, view):
    name = unique("restarts")
    run = start(kube, view, launched_job(name, workers=1))
    view.wait_created()
    job = driver.job(name)
    driver.create_pod(job, "master", 0)  # left Pending: a bare API server has no log to stream
    driver.create_pod(job, "worker", 0)
    driver.set_pod_running(f"{name}-worker-0")
    view.wait_until(lambda v: v.progress[-1].pod_phases.get(f"{name}-worker-0") == "Running")
    driver.set_pod_running(f"{name}-worker-0", restart_count=2)  # two in-place restarts
    view.wait_until(lambda v: v.progress[-1].restarts == 2)
    driver.delete_pod(f"{name}-worker-0")  # the operator recreates it under the same name
    view.wait_until(lambda v: f"{name}-worker-0" not in v.progress[-1].pod_phases)
    driver.create_pod(job, "worker", 0)
    driver.set_status(name, true_condition("Restarting", "restarting"))
    view.wait_state("Restarting")
    driver.set_status(name, true_condition("Succeeded", "done"))

    result = run.join()
    assert result.restarts == 3
    assert result.pods == [f"{name}-master-0", f"{name}-worker-0"]
    assert "restarts 3" in view.buffer.getvalue()


def test_a_pod_the_scheduler_cannot_place_is_noted_once_with_its_reason(kube, driver, view):
    name = unique("unplaced")
    run = start(kube, view, launched_job(name, workers=1))
    view.wait_created()
    job = driver.job(name)
    driver.create_pod(job, "master", 0)
    driver.create_pod(job, "worker", 0)
    pod = f"{name}-worker-0"
    insufficient = "0/1 nodes are available: 1 Insufficient cpu."
    driver.set_pod_unschedulable(pod, insufficient)
    view.wait_until(lambda v: f"{pod} is Pending: {insufficient}" in v.notes)
    driver.set_pod_unschedulable(pod, insufficient)  # the scheduler retries: same reason, no new note
    driver.set_pod_running(f"{name}-master-0")
    view.wait_until(lambda v: v.progress[-1].pod_phases.get(f"{name}-master-0") == "Running")
    driver.set_pod_running(pod)
    view.wait_until(lambda v: v.progress[-1].pod_phases.get(pod) == "Running")
    driver.set_status(name, true_condition("Succeeded", "done"))
    run.join()
    assert [n for n in view.notes if " is Pending: " in n] == [f"{pod} is Pending: {insufficient}"]


def test_a_warning_event_on_the_job_is_noted_once_as_it_happens(kube, driver, view):
    """A pod the API server refuses leaves the job without pods; the controller's Warning says why."""
    name = unique("nopods")
    run = start(kube, view, launched_job(name, workers=1))
    view.wait_created()
    job = driver.job(name)
    refused = (f'Error creating: pods "{name}-worker-0" is invalid: spec.containers[0].resources.limits[cpu]: '
               'Invalid value: "lots": quantities must match the regular expression')
    driver.job_event(job, "Warning", "FailedCreatePod", refused)
    view.wait_until(lambda v: f"Warning FailedCreatePod: {refused}" in v.notes)
    driver.job_event(job, "Warning", "FailedCreatePod", refused)  # the controller retries: same words, no new note
    driver.job_event(job, "Normal", "SuccessfulCreateService", "Created service: x")
    driver.job_event(job, "Warning", "FailedCreateService", "services is forbidden")
    view.wait_until(lambda v: "Warning FailedCreateService: services is forbidden" in v.notes)
    driver.set_status(name, true_condition("Failed", "no pods"))
    run.join()
    assert [n for n in view.notes if n.startswith("Warning")] == [
        f"Warning FailedCreatePod: {refused}", "Warning FailedCreateService: services is forbidden"]


def test_existing_job_is_an_error_unless_replace(kube, driver, view):
    name = unique("twice")
    launcher = Launcher(kube)
    first = launcher.create(launched_job(name), NAMESPACE)
    with pytest.raises(JobExists, match=f"PyTorchJob {NAMESPACE}/{name} already exists"):
        launcher.create(launched_job(name), NAMESPACE)

    second = launcher.create(launched_job(name), NAMESPACE, replace=True, deadline=time.monotonic() + 30)
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert driver.job(name)["metadata"]["uid"] == second["metadata"]["uid"]


def test_missing_namespace_is_one_clear_error(kube, view):
    from trainctl.launch import LaunchError

    with pytest.raises(LaunchError, match=r"^cannot create PyTorchJob no-such-ns/x: .*no-such-ns"):
        Launcher(kube).create(launched_job("x"), "no-such-ns")


def test_following_a_job_that_is_already_gone_ends_at_once(kube, driver, view):
    name = unique("vanished")
    launcher = Launcher(kube)
    created = launcher.create(launched_job(name), NAMESPACE)
    driver.delete_job(name)
    result = launcher.follow(created, view, deadline=time.monotonic() + 20)
    assert result.outcome is Outcome.DELETED
    assert result.duration < 10  # at once, not at the 20 s deadline


class InterruptedView(RecordingView):
    """Ctrl-C arrives while the launcher shows the job's first progress."""

    def show(self, progress):
        super().show(progress)
        raise KeyboardInterrupt


@pytest.mark.parametrize("delete", [True, False], ids=["delete-on-interrupt", "keep"])
def test_ctrl_c_ends_the_wait_and_deletes_the_job_only_if_asked(kube, driver, delete):
    name = unique("interrupted")
    result = Launcher(kube).launch(launched_job(name), NAMESPACE, InterruptedView(), delete_on_interrupt=delete)
    assert result.outcome is Outcome.INTERRUPTED and not result.succeeded
    assert result.message == f"interrupted while PyTorchJob {NAMESPACE}/{name} was Pending"
    assert result.deleted is delete
    assert driver.exists(name) is not delete


def test_a_cluster_without_the_crd_gets_a_hint(apiserver, view):
    from trainctl.launch import LaunchError, connect

    with pytest.raises(LaunchError) as error:
        Launcher(connect(str(apiserver.kubeconfig))).create(launched_job("x"), NAMESPACE)
    assert str(error.value).startswith(f"cannot create PyTorchJob {NAMESPACE}/x: ")
    assert str(error.value).endswith("(is the PyTorchJob CRD, pytorchjobs.kubeflow.org, installed?)")
