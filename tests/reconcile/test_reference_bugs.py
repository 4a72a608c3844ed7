"""One test per reference bug trainctl fixes (kubeflow-pytorchjob.md §8–§9, msjob-mindspore.md §2.13).

Each test is named after the bug; docs/compatibility.md lists the same fixes.
"""

from __future__ import annotations

from trainctl.controller.reconcile import ReconcileConfig
from trainctl.controller.reconcile import plan as plans

from tests.support.jobs import msjob, pytorchjob
from tests.support.reconcile import Cluster, at, by_name, conditions, env_dict, terminated


def running(job, config=None):
    cluster = Cluster(job, config or ReconcileConfig())
    cluster.step()
    cluster.step()
    cluster.set_all("Running")
    cluster.step()
    return cluster


def test_pet_standalone_has_a_value_torchrun_accepts():
    job = pytorchjob("solo", master=False, workers=1)
    job["spec"]["elasticPolicy"] = {"standalone": True}
    env = env_dict(by_name(Cluster(job).reconcile().creates)["solo-worker-0"])
    assert env["PET_STANDALONE"] == "1"
    int(env["PET_STANDALONE"])  # what torchrun does with the switch


def test_empty_rdzv_conf_is_harmless():
    job = pytorchjob("el", master=False, workers=2)
    job["spec"]["elasticPolicy"] = {"rdzvConf": [], "minReplicas": 1, "maxReplicas": 2}
    job["metadata"]["annotations"] = {"trainctl.io/reference-env": "true"}
    env = env_dict(by_name(Cluster(job).reconcile().creates)["el-worker-0"])
    assert "PET_RDZV_CONF" not in env and env["PET_NNODES"] == "1:2"


def test_msjob_pods_never_created_without_their_env():
    cluster = Cluster(msjob("ms", workers=2))
    first = cluster.reconcile()
    assert [o["kind"] for o in first.creates] == ["Service"]
    cluster.apply(first)
    cluster.services["ms-scheduler-0"]["spec"]["clusterIP"] = ""  # not allocated yet
    assert [o["kind"] for o in cluster.reconcile().creates] == []
    cluster.services["ms-scheduler-0"]["spec"]["clusterIP"] = "10.96.3.4"
    pods = [o for o in cluster.reconcile().creates if o["kind"] == "Pod"]
    assert len(pods) == 3 and all(env_dict(p)["MS_SCHED_PORT"] == "2222" for p in pods)


def test_world_size_counts_devices_issue_1790():
    job = pytorchjob("gpu", workers=1)
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    env = env_dict(by_name(Cluster(job).reconcile().creates)["gpu-worker-0"])
    assert (env["WORLD_SIZE"], env["PET_NPROC_PER_NODE"]) == ("16", "8")


def test_backoff_limit_counts_the_controllers_own_restarts_issue_2045():
    job = pytorchjob("mnist", runPolicy={"backoffLimit": 2})
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    cluster = running(job)
    for attempt in (1, 2):
        cluster.set_phase("mnist-worker-0", "Failed", containerStatuses=terminated(137))
        plan = cluster.step(at(attempt * 10))
        assert plan.status["restartCount"] == attempt
        if attempt == 1:
            cluster.step(at(attempt * 10 + 1))
            cluster.set_phase("mnist-worker-0", "Running")
    final = cluster.step(at(30))
    assert conditions(final.status)[-1] == ("Failed", "True", "PyTorchJobFailed")
    assert final.status["conditions"][-1]["message"] == "Job mnist has failed because it has reached the specified backoff limit"
    assert final.metrics == ["failed"]


def test_completion_time_set_on_exit_code_failure_so_ttl_works():
    job = pytorchjob("mnist", runPolicy={"ttlSecondsAfterFinished": 60})
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    cluster = running(job)
    cluster.set_phase("mnist-worker-0", "Failed", containerStatuses=terminated(2))
    failed = cluster.step(at(10))
    assert failed.status["completionTime"] == "2024-05-01T12:00:10Z"
    assert failed.metrics == ["failed"]
    assert cluster.step(at(20)).requeue_after == 50
    assert cluster.reconcile(at(71)).delete_job


def test_clean_pod_policy_honoured_on_backoff_failure_issue_3419():
    job = pytorchjob("mnist", runPolicy={"backoffLimit": 0, "cleanPodPolicy": "None"})
    cluster = running(job)
    cluster.pods["mnist-worker-0"]["status"]["containerStatuses"] = [{"name": "pytorch", "restartCount": 1}]
    plan = cluster.step(at(10))
    assert conditions(plan.status)[-1][:2] == ("Failed", "True")
    assert plan.deletes == []  # the logs stay


def test_clean_pod_policy_honoured_on_deadline_failure_issue_3419():
    job = pytorchjob("mnist", runPolicy={"activeDeadlineSeconds": 100, "cleanPodPolicy": "Running"})
    cluster = running(job)
    cluster.set_phase("mnist-worker-1", "Succeeded")
    plan = cluster.step(at(100))
    assert plan.status["conditions"][-1]["message"] == "Job mnist has failed because it was active longer than specified deadline"
    assert sorted(d.name for d in plan.deletes if d.kind == "Pod") == ["mnist-master-0", "mnist-worker-0"]


def test_active_deadline_comes_back_as_requeue_after_issue_3358():
    job = pytorchjob("mnist", runPolicy={"activeDeadlineSeconds": 100})
    cluster = running(job)
    assert cluster.step(at(30)).requeue_after == 70
    assert cluster.reconcile(at(99.5)).requeue_after == 0.5


def test_ttl_comes_back_as_requeue_after():
    job = pytorchjob("mnist", runPolicy={"ttlSecondsAfterFinished": 30})
    cluster = running(job)
    cluster.set_phase("mnist-master-0", "Succeeded")
    cluster.step(at(10))
    plan = cluster.step(at(15))
    assert plan.requeue_after == 25 and not plan.delete_job
    expired = cluster.reconcile(at(40))
    assert expired.delete_job and expired.metrics == ["deleted"]


def test_pod_stuck_terminating_is_force_deleted_issue_2072():
    cluster = running(pytorchjob("mnist"), ReconcileConfig(force_delete_grace_seconds=60))
    cluster.pods["mnist-worker-0"]["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:30Z"
    waiting = cluster.step(at(40))
    assert waiting.deletes == [] and waiting.requeue_after == 50
    assert waiting.status["replicaStatuses"]["Worker"]["failed"] == 1  # lost pod counts as failed
    plan = cluster.step(at(90))
    assert [(d.name, d.force) for d in plan.deletes] == [("mnist-worker-0", True)]
    assert [o["metadata"]["name"] for o in cluster.step(at(91)).creates] == ["mnist-worker-0"]


def test_never_both_succeeded_and_failed():
    cluster = running(msjob("ms", workers=2))
    cluster.set_phase("ms-worker-0", "Succeeded", containerStatuses=terminated(0, "mindspore"))
    cluster.set_phase("ms-worker-1", "Failed", containerStatuses=terminated(1, "mindspore"))
    plan = cluster.step()
    types = {t for t, s, _ in conditions(plan.status) if s == "True"}
    assert "Succeeded" in types and "Failed" not in types


def test_msjob_exit_code_restart_does_not_fail_the_job():
    job = msjob("ms", workers=2)
    job["spec"]["msReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    cluster = running(job)
    cluster.set_phase("ms-worker-1", "Failed", containerStatuses=terminated(137, "mindspore"))
    plan = cluster.step()
    assert conditions(plan.status)[-1] == ("Restarting", "True", "MSJobRestarting")
    assert not any(t == "Failed" for t, _, _ in conditions(plan.status))


def test_events_only_on_transitions():
    job = pytorchjob("mnist")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCode"
    cluster = running(job)
    cluster.set_phase("mnist-worker-0", "Succeeded", containerStatuses=terminated(0))  # ExitedWithCode in the reference
    assert cluster.step(at(1)).events == []
    assert cluster.step(at(2)).events == []


def test_created_condition_set_by_reconcile_and_counted_once():
    cluster = Cluster(pytorchjob("mnist"))
    assert cluster.step().metrics == ["created"]
    assert cluster.step(at(1)).metrics == []  # a controller restart reconciles again: no recount


def test_pod_group_written_only_when_it_changes():
    cluster = Cluster(pytorchjob("mnist"), ReconcileConfig(gang_scheduler="volcano"))
    cluster.step()
    cluster.pod_group["status"] = {"phase": "Running"}
    cluster.step()
    assert cluster.step().updates == []


def test_elastic_pod_group_min_member_uses_min_replicas():
    job = pytorchjob("mnist", workers=4)
    job["spec"]["elasticPolicy"] = {"minReplicas": 2, "maxReplicas": 4}
    plan = Cluster(job, ReconcileConfig(gang_scheduler="volcano")).reconcile()
    group = next(o for o in plan.creates if o["kind"] == "PodGroup")
    assert group["spec"]["minMember"] == 3  # Master + minReplicas Workers


def test_replacements_say_which_pod_why_and_where():
    """The Event of a replacement names the pod, the cause and the node (the reference's
    ``Deleted pod: <name>`` says only which)."""
    cluster = running(pytorchjob("mnist"), ReconcileConfig(force_delete_grace_seconds=60))
    worker = cluster.pods["mnist-worker-1"]
    worker["spec"]["nodeName"] = "node-b"
    cluster.set_phase("mnist-worker-1", "Failed", containerStatuses=[
        {"name": "pytorch", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
    ])
    (restart,) = cluster.step(at(10)).deletes
    assert plans.delete_events(restart).success.message == (
        "Deleted pod: mnist-worker-1 (to be recreated: failed with exit code 137 (OOMKilled) on node node-b)"
    )
    lost = cluster.pods["mnist-worker-0"]
    lost["spec"]["nodeName"] = "node-a"
    lost["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:30Z"
    (forced,) = [d for d in cluster.step(at(90)).deletes if d.force]
    assert plans.delete_events(forced).success.message == (
        "Deleted pod: mnist-worker-0 (force-deleted: on node node-a, still terminating "
        "at least 60s after its deadline 2024-05-01T12:00:30Z)"
    )
    # Deletes that replace nothing keep the reference's words.
    cluster.job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    scaled = [d for d in cluster.step(at(91)).deletes if d.name == "mnist-worker-1"]
    assert sorted(plans.delete_events(d).success.message for d in scaled) == [
        "Deleted pod: mnist-worker-1", "Deleted service: mnist-worker-1"
    ]
