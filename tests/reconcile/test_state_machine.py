"""The job state machine: conditions, their order, replicaStatuses, times, events, metrics."""

from __future__ import annotations

import copy

import pytest

from tests.support.jobs import msjob, pytorchjob
from tests.support.reconcile import Cluster, at, conditions, terminated

SELECTOR = ("training.kubeflow.org/job-name=mnist,training.kubeflow.org/operator-name=pytorchjob-controller,"
            "training.kubeflow.org/replica-type={}")


def running_cluster(job=None):
    cluster = Cluster(job or pytorchjob("mnist"))
    cluster.step()
    cluster.set_all("Running")
    return cluster


def test_created_then_running_with_reference_messages():
    cluster = Cluster(pytorchjob("mnist"))
    first = cluster.step()
    assert conditions(first.status) == [("Created", "True", "PyTorchJobCreated")]
    assert first.status["conditions"][0]["message"] == "PyTorchJob mnist is created."
    assert first.status["startTime"] == "2024-05-01T12:00:00Z"
    assert first.metrics == ["created"]
    cluster.set_all("Running")
    plan = cluster.step(at(10))
    assert conditions(plan.status) == [("Created", "True", "PyTorchJobCreated"), ("Running", "True", "PyTorchJobRunning")]
    assert plan.status["conditions"][1]["message"] == "PyTorchJob mnist is running."
    assert plan.status["replicaStatuses"] == {
        "Master": {"active": 1, "selector": SELECTOR.format("master")},
        "Worker": {"active": 2, "selector": SELECTOR.format("worker")},
    }
    assert plan.status["startTime"] == "2024-05-01T12:00:00Z"
    assert plan.events == [] and plan.metrics == []


def test_master_success_decides_and_moves_active_to_succeeded_when_finished():
    cluster = running_cluster()
    cluster.step()
    cluster.set_phase("mnist-master-0", "Succeeded")
    plan = cluster.step(at(60))
    assert conditions(plan.status) == [
        ("Created", "True", "PyTorchJobCreated"),
        ("Running", "False", "PyTorchJobRunning"),
        ("Succeeded", "True", "PyTorchJobSucceeded"),
    ]
    # training-operator's text for a job with a Master; Worker-only jobs name the namespace.
    assert plan.status["conditions"][-1]["message"] == "PyTorchJob mnist is successfully completed."
    assert [e.message for e in plan.events] == ["PyTorchJob mnist is successfully completed."]
    assert plan.status["completionTime"] == "2024-05-01T12:01:00Z"
    assert [(e.type, e.reason) for e in plan.events] == [("Normal", "PyTorchJobSucceeded")]
    assert plan.metrics == ["succeeded"]
    running = plan.status["conditions"][1]
    # Only Running's status flips; it keeps the times it became True (kubeflow's filterOutCondition).
    assert running["lastTransitionTime"] == running["lastUpdateTime"] == "2024-05-01T12:00:00Z"
    assert running["message"] == "PyTorchJob mnist is running."
    finished = cluster.step(at(61))
    assert finished.deletes == []  # cleanPodPolicy None: workers keep running
    assert finished.status["replicaStatuses"]["Worker"] == {"succeeded": 2, "selector": SELECTOR.format("worker")}
    assert cluster.reconcile(at(62)).empty


@pytest.mark.parametrize("elastic, succeeded, done", [(False, 1, False), (False, 2, True), (True, 1, True)])
def test_worker_only_success(elastic, succeeded, done):
    job = pytorchjob("mnist", master=False, workers=2)
    if elastic:
        job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 2, "rdzvHost": "etcd"}
    cluster = running_cluster(job)
    for i in range(succeeded):
        cluster.set_phase(f"mnist-worker-{i}", "Succeeded")
    plan = cluster.step()
    assert (("Succeeded", "True", "PyTorchJobSucceeded") in conditions(plan.status)) is done
    if not done:
        assert conditions(plan.status)[-1] == ("Running", "True", "PyTorchJobRunning")
        assert plan.status["conditions"][-1]["message"] == "PyTorchJob default/mnist is running."
    else:
        assert plan.status["conditions"][-1]["message"] == "PyTorchJob default/mnist successfully completed."


def test_never_policy_fails_the_job_on_a_failed_pod():
    job = pytorchjob("mnist")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Never"
    cluster = running_cluster(job)
    cluster.set_phase("mnist-worker-1", "Failed", containerStatuses=terminated(1))
    plan = cluster.step(at(5))
    assert conditions(plan.status)[-1] == ("Failed", "True", "PyTorchJobFailed")
    assert plan.status["conditions"][-1]["message"] == "PyTorchJob mnist is failed because 1 Worker replica(s) failed."
    assert plan.status["completionTime"] == "2024-05-01T12:00:05Z"
    assert plan.deletes == [] and plan.creates == []
    assert [(e.type, e.reason) for e in plan.events] == [("Normal", "PyTorchJobFailed")]
    assert plan.metrics == ["failed"]


@pytest.mark.parametrize("policy", ["OnFailure", "Always"])
def test_failed_pod_is_deleted_and_recreated_under_the_same_name(policy):
    job = pytorchjob("mnist")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = policy
    cluster = running_cluster(job)
    cluster.step()
    cluster.set_phase("mnist-worker-1", "Failed")
    plan = cluster.step(at(5))
    assert [(d.kind, d.name) for d in plan.deletes] == [("Pod", "mnist-worker-1")]
    assert plan.deletes[0].uid == cluster.pods["mnist-worker-1"]["metadata"]["uid"] if "mnist-worker-1" in cluster.pods else True
    assert conditions(plan.status)[-1] == ("Restarting", "True", "PyTorchJobRestarting")
    # The Master's Running replaces the pod pass's Restarting, then the failed Worker sets it
    # again with UpdateJobStatus' message, as in the reference.
    assert plan.status["conditions"][-1]["message"] == "PyTorchJob mnist is restarting because 1 Worker replica(s) failed."
    assert plan.status["restartCount"] == 1
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "PyTorchJobRestarting")]
    assert plan.metrics == ["restarted"]
    again = cluster.step(at(6))
    assert [o["metadata"]["name"] for o in again.creates] == ["mnist-worker-1"]
    assert again.events == [] and again.metrics == []
    cluster.set_phase("mnist-worker-1", "Running")
    back = cluster.step(at(7))
    assert conditions(back.status) == [("Created", "True", "PyTorchJobCreated"), ("Running", "True", "PyTorchJobRunning")]


@pytest.mark.parametrize(
    "statuses, restarted",
    [
        (terminated(137), True),  # SIGKILL: retryable
        (terminated(130), True),
        ([], True),  # no terminated state: 0xBEEF, retryable in the reference
        (terminated(1), False),
        (terminated(127), False),
    ],
)
def test_exit_code_policy(statuses, restarted):
    job = pytorchjob("mnist")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    cluster = running_cluster(job)
    cluster.step()
    cluster.set_phase("mnist-worker-0", "Failed", containerStatuses=statuses)
    plan = cluster.step(at(3))
    assert bool(plan.deletes) is restarted
    if restarted:
        assert conditions(plan.status)[-1][0] == "Restarting"
    else:
        assert conditions(plan.status)[-1] == ("Failed", "True", "PyTorchJobFailed")
        assert plan.status["conditions"][-1]["message"] == 'job "mnist" is failing because "Worker" replica(s) failed.'
        assert [(e.type, e.reason) for e in plan.events] == [("Warning", "PyTorchJobFailed")]
        assert plan.status["completionTime"] == "2024-05-01T12:00:03Z"


def test_exit_code_pod_runs_with_never():
    job = pytorchjob("mnist")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    pods = [o for o in Cluster(job).reconcile().creates if o["kind"] == "Pod"]
    assert [p["spec"]["restartPolicy"] for p in pods] == ["OnFailure", "Never", "Never"]


@pytest.mark.parametrize(
    "code, outcome",
    [(137, "Restarting"), (143, "Restarting"), (138, "Restarting"), (1, "Failed"), (139, "Failed"), (None, "Failed")],
)
def test_msjob_exit_codes(code, outcome):
    job = msjob("ms", workers=2)
    job["spec"]["msReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    cluster = Cluster(job)
    cluster.step()
    cluster.step()
    cluster.set_all("Running")
    cluster.step()
    cluster.set_phase("ms-worker-1", "Failed", containerStatuses=terminated(code, "mindspore") if code is not None else [])
    plan = cluster.step(at(1))
    assert conditions(plan.status)[-1][:2] == (outcome, "True")
    if outcome == "Failed":
        assert plan.status["conditions"][-1]["message"] == "MSJob default/ms has failed because 1 Worker replica(s) failed."
    else:
        assert plan.status["conditions"][-1]["message"] == "MSJob ms is restarting because Worker replica(s) failed."


@pytest.mark.parametrize(
    "policy, worker0, worker1, expected",
    [
        ("", "Succeeded", "Running", "Succeeded"),  # worker 0 decides by default
        ("AllWorkers", "Succeeded", "Running", "Running"),
        ("AllWorkers", "Succeeded", "Succeeded", "Succeeded"),
        ("", "Running", "Succeeded", "Running"),
    ],
)
def test_msjob_success_policy(policy, worker0, worker1, expected):
    job = msjob("ms", workers=2, successPolicy=policy)
    cluster = Cluster(job)
    cluster.step()
    cluster.step()
    cluster.set_all("Running")
    cluster.set_phase("ms-worker-0", worker0, containerStatuses=terminated(0, "mindspore"))
    cluster.set_phase("ms-worker-1", worker1)
    plan = cluster.step()
    assert conditions(plan.status)[-1][:2] == (expected, "True")
    expected_message = "MSJob default/ms successfully completed." if expected == "Succeeded" else "MSJob default/ms is running."
    assert plan.status["conditions"][-1]["message"] == expected_message


def test_msjob_failed_scheduler_fails_the_job_but_dynamic_workers_do_not():
    job = msjob("ms", workers=2, enableDynamicWorker=True)
    cluster = Cluster(job)
    cluster.step()
    cluster.step()
    cluster.set_all("Running")
    cluster.set_phase("ms-worker-1", "Failed", containerStatuses=terminated(1, "mindspore"))
    assert conditions(cluster.step().status)[-1] == ("Running", "True", "MSJobRunning")
    cluster.set_phase("ms-scheduler-0", "Failed", containerStatuses=terminated(1, "mindspore"))
    plan = cluster.step()
    assert conditions(plan.status)[-1] == ("Failed", "True", "MSJobFailed")


def test_suspend_then_resume_keeps_the_pinned_condition_order():
    cluster = running_cluster()
    cluster.step()
    cluster.job["spec"]["runPolicy"] = {"suspend": True}
    plan = cluster.step(at(30))
    assert sorted((d.kind, d.name) for d in plan.deletes) == sorted(
        [("Pod", n) for n in ("mnist-master-0", "mnist-worker-0", "mnist-worker-1")]
        + [("Service", n) for n in ("mnist-master-0", "mnist-worker-0", "mnist-worker-1")]
    )
    assert conditions(plan.status) == [
        ("Created", "True", "PyTorchJobCreated"),
        ("Running", "False", "PyTorchJobSuspended"),
        ("Suspended", "True", "PyTorchJobSuspended"),
    ]
    assert plan.status["conditions"][-1]["message"] == "PyTorchJob mnist is suspended."
    assert [(e.type, e.reason) for e in plan.events] == [("Normal", "PyTorchJobSuspended")]
    assert plan.status["startTime"] == "2024-05-01T12:00:00Z"  # not cleared on suspend
    assert cluster.reconcile(at(31)).empty  # no repeated event while suspended
    cluster.job["spec"]["runPolicy"] = {"suspend": False}
    resumed = cluster.step(at(40))
    assert resumed.status["startTime"] == "2024-05-01T12:00:40Z"
    assert [(e.type, e.reason) for e in resumed.events] == [("Normal", "PyTorchJobResumed")]
    assert len([o for o in resumed.creates if o["kind"] == "Pod"]) == 3
    cluster.set_all("Running")
    running = cluster.step(at(41))
    assert conditions(running.status) == [
        ("Created", "True", "PyTorchJobCreated"),
        ("Suspended", "False", "PyTorchJobResumed"),
        ("Running", "True", "PyTorchJobRunning"),
    ]


def test_job_created_suspended():
    job = pytorchjob("mnist", runPolicy={"suspend": True})
    plan = Cluster(job).reconcile()
    assert conditions(plan.status) == [("Created", "True", "PyTorchJobCreated"), ("Suspended", "True", "PyTorchJobSuspended")]
    assert "startTime" not in plan.status and plan.creates == []


@pytest.mark.parametrize(
    "policy, deleted",
    [
        ("None", []),
        ("All", ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]),
        ("Running", ["mnist-worker-0", "mnist-worker-1"]),  # the Pending worker goes too
    ],
)
def test_clean_pod_policy_on_success(policy, deleted):
    job = pytorchjob("mnist", runPolicy={"cleanPodPolicy": policy})
    cluster = running_cluster(job)
    cluster.set_phase("mnist-worker-1", "Pending")
    cluster.set_phase("mnist-master-0", "Succeeded")
    cluster.step()
    plan = cluster.step()
    assert sorted(d.name for d in plan.deletes if d.kind == "Pod") == deleted
    assert sorted(d.name for d in plan.deletes if d.kind == "Service") == deleted


@pytest.mark.parametrize("policy, as_observed", [("Running", True), ("All", False)])
def test_running_policy_deletes_only_the_version_it_saw_running(policy, as_observed):
    # The pod may finish between the cache read and the delete; a resourceVersion
    # precondition turns that into a conflict and a fresh look instead of a lost log.
    cluster = running_cluster(pytorchjob("mnist", runPolicy={"cleanPodPolicy": policy}))
    cluster.set_phase("mnist-master-0", "Succeeded")
    cluster.step()
    plan = cluster.reconcile()
    pods = [d for d in plan.deletes if d.kind == "Pod"]
    assert {d.name for d in pods} >= {"mnist-worker-0", "mnist-worker-1"}
    for d in pods:
        seen = cluster.pods[d.name]["metadata"]["resourceVersion"]
        assert d.resource_version == (seen if as_observed else None)
        assert d.uid == cluster.pods[d.name]["metadata"]["uid"]
    services = [d for d in plan.deletes if d.kind == "Service"]
    assert services and all(d.resource_version is None for d in services)


def test_a_non_retryable_exit_next_to_a_retryable_one_fails_without_restarting():
    # Worker 1 exits 1; the master, losing its peer, leaves with 143 before the controller
    # looks. The job fails; the master is not deleted for a restart that cannot help.
    job = pytorchjob("mnist")
    for rtype in ("Master", "Worker"):
        job["spec"]["pytorchReplicaSpecs"][rtype]["restartPolicy"] = "ExitCode"
    cluster = running_cluster(job)
    cluster.step()
    cluster.set_phase("mnist-worker-1", "Failed", containerStatuses=terminated(1))
    cluster.set_phase("mnist-master-0", "Failed", containerStatuses=terminated(143))
    plan = cluster.step(at(3))
    assert plan.deletes == [] and plan.creates == []
    assert conditions(plan.status)[-1] == ("Failed", "True", "PyTorchJobFailed")
    assert "Restarting" not in {t for t, _, _ in conditions(plan.status)}
    assert not plan.status.get("restartCount")
    assert plan.metrics == ["failed"]


def test_backoff_limit_counts_restarts_of_a_duplicate_pod_on_one_index():
    cluster = running_cluster(pytorchjob("mnist", runPolicy={"backoffLimit": 3}))
    cluster.step()
    twin = copy.deepcopy(cluster.pods["mnist-worker-0"])
    twin["metadata"].update(name="mnist-worker-0-twin", uid="uid-twin")
    twin["status"] = {"phase": "Running", "containerStatuses": [{"name": "pytorch", "restartCount": 5}]}
    cluster.pods["mnist-worker-0-twin"] = twin
    assert conditions(cluster.step(at(10)).status)[-1] == ("Failed", "True", "PyTorchJobFailed")


def test_msjob_default_clean_pod_policy_is_running():
    cluster = Cluster(msjob("ms", workers=2))
    cluster.step()
    cluster.step()
    cluster.set_all("Running")
    cluster.set_phase("ms-worker-0", "Succeeded", containerStatuses=terminated(0, "mindspore"))
    cluster.step()
    plan = cluster.step()
    assert sorted(d.name for d in plan.deletes if d.kind == "Pod") == ["ms-scheduler-0", "ms-worker-1"]
    assert [d.name for d in plan.deletes if d.kind == "Service"] == ["ms-scheduler-0"]


def test_managed_by_another_controller_is_left_alone():
    job = pytorchjob("mnist", runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"})
    plan = Cluster(job).reconcile()
    assert plan.empty and plan.metrics == [] and plan.requeue_after is None


def test_invalid_job_gets_a_failed_condition_naming_the_field_and_nothing_else():
    job = pytorchjob("mnist")
    del job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"]
    cluster = Cluster(job)
    plan = cluster.step()
    assert plan.creates == [] and plan.deletes == [] and plan.metrics == []
    assert conditions(plan.status) == [("Failed", "True", "PyTorchJobFailedValidation")]
    assert "spec.pytorchReplicaSpecs[Master].replicas: must be 1" in plan.status["conditions"][0]["message"]
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "PyTorchJobFailedValidation")]
    assert cluster.reconcile(at(5)).empty


def test_deleted_job_is_left_to_garbage_collection():
    job = pytorchjob("mnist")
    job["metadata"]["deletionTimestamp"] = "2024-05-01T11:00:00Z"
    assert Cluster(job).reconcile().empty


def test_scale_up_and_down_by_index():
    job = pytorchjob("mnist", master=False, workers=2)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 4, "rdzvHost": "etcd-host"}
    cluster = running_cluster(job)
    cluster.step()
    cluster.job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 4
    up = cluster.step()
    assert [(o["kind"], o["metadata"]["name"]) for o in up.creates] == [
        ("Service", "mnist-worker-2"), ("Service", "mnist-worker-3"), ("Pod", "mnist-worker-2"), ("Pod", "mnist-worker-3"),
    ]
    cluster.set_all("Running")
    cluster.job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    down = cluster.step()
    assert sorted((d.kind, d.name) for d in down.deletes) == [
        ("Pod", "mnist-worker-1"), ("Pod", "mnist-worker-2"), ("Pod", "mnist-worker-3"),
        ("Service", "mnist-worker-1"), ("Service", "mnist-worker-2"), ("Service", "mnist-worker-3"),
    ]


@pytest.mark.parametrize(
    "spec, status",
    [
        ("nope", None),
        ({"pytorchReplicaSpecs": {}, "runPolicy": "bad"}, None),
        ({"pytorchReplicaSpecs": "x"}, "weird"),
        ({"pytorchReplicaSpecs": "x"}, {"conditions": ["not-a-condition"]}),
        ({"pytorchReplicaSpecs": "x"}, {"conditions": "nope"}),
    ],
)
def test_malformed_job_gets_a_failed_condition_not_a_crash(spec, status):
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "x", "namespace": "default"}, "spec": spec}
    if status is not None:
        job["status"] = status
    plan = Cluster(job).reconcile()
    assert conditions(plan.status) == [("Failed", "True", "PyTorchJobFailedValidation")]
    assert plan.creates == [] and plan.deletes == []


def test_failed_is_sticky():
    job = pytorchjob("mnist")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Never"
    cluster = running_cluster(job)
    cluster.set_phase("mnist-worker-0", "Failed", containerStatuses=terminated(1))
    cluster.step(at(1))
    cluster.set_phase("mnist-master-0", "Succeeded")
    plan = cluster.step(at(2))
    assert [t for t, s, _ in conditions(cluster.job["status"]) if s == "True"] == ["Created", "Failed"]
    assert plan.events == [] and plan.metrics == []


def test_msjob_limit_failure_uses_the_kubeflow_common_reason():
    job = msjob("ms", workers=1, runPolicy={"activeDeadlineSeconds": 10})
    cluster = Cluster(job)
    cluster.step()
    cluster.step()
    cluster.set_all("Running")
    plan = cluster.step(at(10))
    assert conditions(plan.status)[-1] == ("Failed", "True", "JobFailed")
    assert plan.status["conditions"][-1]["message"] == "Job ms has failed because it was active longer than specified deadline"
    # ms-operator's default cleanPodPolicy is Running: the running pods go.
    assert sorted(d.name for d in plan.deletes if d.kind == "Pod") == ["ms-scheduler-0", "ms-worker-0"]


@pytest.mark.parametrize(
    "policy, pod_policy", [("Always", "Always"), ("OnFailure", "OnFailure"), ("Never", "Never"), ("ExitCode", "Never")]
)
def test_pod_restart_policy_mapping(policy, pod_policy):
    job = pytorchjob("mnist", master=False, workers=1)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = policy
    pod = next(o for o in Cluster(job).reconcile().creates if o["kind"] == "Pod")
    assert pod["spec"]["restartPolicy"] == pod_policy
