"""The other children: HPA, PodGroups, the rendezvous store; and template warnings."""

from __future__ import annotations

import pytest

from trainctl.controller.reconcile import ReconcileConfig

from tests.support.jobs import container, msjob, pytorchjob, replica
from tests.support.reconcile import Cluster, by_name, env_dict, env_of

METRICS = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]


def elastic(name="el", workers=2, **policy):
    job = pytorchjob(name, master=False, workers=workers)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 4, **policy}
    return job


def test_hpa_for_elastic_job_with_metrics():
    cluster = Cluster(elastic(metrics=METRICS, rdzvHost="etcd"))
    cluster.step()
    plan = cluster.step()
    hpa = next(o for o in plan.creates if o["kind"] == "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2" and hpa["metadata"]["name"] == "el"
    assert hpa["spec"] == {
        "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "el"},
        "minReplicas": 1,
        "maxReplicas": 4,
        "metrics": METRICS,
    }
    cluster.hpa["spec"]["currentReplicas"] = 2  # fields the API server owns do not count
    assert cluster.step().updates == []
    cluster.job["spec"]["elasticPolicy"]["maxReplicas"] = 6
    update = cluster.step().updates
    assert update[0]["spec"]["maxReplicas"] == 6 and update[0]["metadata"]["resourceVersion"]
    cluster.job["spec"]["runPolicy"] = {"suspend": True}
    assert [d.kind for d in cluster.step().deletes if d.kind == "HorizontalPodAutoscaler"] == ["HorizontalPodAutoscaler"]


def test_hpa_is_created_once_the_status_holds_the_scale_selector():
    # An HPA that reads the job's Scale before the selector is stored finds no pods
    # (SelectorRequired); the pass that writes the selector leaves the HPA to the next one.
    cluster = Cluster(elastic(metrics=METRICS))
    first = cluster.step()
    assert not [o for o in first.creates if o["kind"] == "HorizontalPodAutoscaler"]
    selector = first.status["replicaStatuses"]["Worker"]["selector"]
    assert selector == ("training.kubeflow.org/job-name=el,training.kubeflow.org/operator-name=pytorchjob-controller,"
                        "training.kubeflow.org/replica-type=worker")
    second = cluster.step()
    assert [o["metadata"]["name"] for o in second.creates if o["kind"] == "HorizontalPodAutoscaler"] == ["el"]


def test_no_hpa_without_metrics():
    assert not any(o["kind"] == "HorizontalPodAutoscaler" for o in Cluster(elastic()).reconcile().creates)


def test_volcano_pod_group_and_admission():
    job = pytorchjob("mnist", runPolicy={"schedulingPolicy": {"queue": "research", "priorityClass": "high"}})
    job["metadata"]["annotations"] = {"team": "nlp"}
    job["spec"]["pytorchReplicaSpecs"]["Worker"] = replica(
        2, containers=[container(resources={"requests": {"cpu": "500m", "memory": "1Gi"}})]
    )
    job["spec"]["pytorchReplicaSpecs"]["Master"] = replica(1, containers=[container(resources={"limits": {"cpu": "1"}})])
    cluster = Cluster(job, ReconcileConfig(gang_scheduler="Volcano"))
    plan = cluster.step()
    assert [o["kind"] for o in plan.creates if o["kind"] != "Service"] == ["PodGroup"]  # no pods before admission
    assert plan.requeue_after == 5
    group = plan.creates[0]
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["metadata"]["annotations"] == {"team": "nlp"}
    assert group["spec"] == {
        "minMember": 3,
        "queue": "research",
        "priorityClassName": "high",
        "minResources": {"cpu": "2", "memory": "2147483648"},
    }
    cluster.pod_group["status"] = {"phase": "Inqueue"}
    pods = by_name([o for o in cluster.step().creates if o["kind"] == "Pod"])
    master = pods["mnist-master-0"]
    assert master["spec"]["schedulerName"] == "volcano"
    assert master["metadata"]["annotations"] == {
        "scheduling.k8s.io/group-name": "mnist",
        "volcano.sh/task-spec": "master",
    }


def test_volcano_keeps_an_existing_queue():
    cluster = Cluster(pytorchjob("mnist"), ReconcileConfig(gang_scheduler="volcano"))
    cluster.step()
    cluster.pod_group["spec"]["queue"] = "set-by-admin"
    cluster.pod_group["status"] = {"phase": "Running"}
    assert cluster.step().updates == []


def test_scheduler_plugins_pod_group_does_not_wait():
    job = pytorchjob("mnist", runPolicy={"schedulingPolicy": {"minAvailable": 2, "scheduleTimeoutSeconds": 30}})
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] = "custom"
    plan = Cluster(job, ReconcileConfig(gang_scheduler="scheduler-plugins-scheduler")).reconcile()
    group = next(o for o in plan.creates if o["kind"] == "PodGroup")
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["spec"] == {"minMember": 2, "scheduleTimeoutSeconds": 30}
    pods = by_name([o for o in plan.creates if o["kind"] == "Pod"])
    assert pods["mnist-master-0"]["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "mnist"
    assert pods["mnist-master-0"]["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert pods["mnist-worker-0"]["spec"]["schedulerName"] == "custom"
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "SetPodTemplateSchedulerName")]


def test_template_restart_policy_is_overridden_with_one_warning():
    job = pytorchjob("mnist", workers=3)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["restartPolicy"] = "Always"
    cluster = Cluster(job)
    plan = cluster.step()
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "SetPodTemplateRestartPolicy")]
    assert {o["spec"]["restartPolicy"] for o in plan.creates if o["kind"] == "Pod"} == {"OnFailure"}
    assert cluster.step().events == []


# --- the rendezvous store ------------------------------------------------------------------------


def test_elastic_job_gets_a_rendezvous_store_and_agents_that_use_it():
    cluster = Cluster(elastic(maxRestarts=10))
    first = cluster.step()
    # The store first: agents start once its Service exists, so the name resolves for them.
    assert [
        (o["kind"], o["metadata"]["name"]) for o in first.creates if o["kind"] == "Pod" or "rdzv" in o["metadata"]["name"]
    ] == [
        ("Pod", "el-rdzv"),
        ("Service", "el-rdzv"),
    ]
    store = by_name([o for o in first.creates if o["kind"] == "Pod"])["el-rdzv"]
    assert store["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "el",
        "trainctl.io/component": "rendezvous",
    }
    assert store["spec"]["containers"][0]["image"] == "train:1"
    assert store["spec"]["containers"][0]["ports"] == [{"name": "rdzv", "containerPort": 23456}]
    plan = cluster.step()
    assert [o["metadata"]["name"] for o in plan.creates] == ["el-worker-0", "el-worker-1"]
    env = env_dict(by_name(plan.creates)["el-worker-1"])
    assert env["PET_RDZV_ENDPOINT"] == "el-rdzv:23456"
    assert env["PET_RDZV_CONF"] == "is_host=0,last_call_timeout=2,keep_alive_interval=1,keep_alive_max_attempt=5,join_timeout=600"
    assert env["PET_RDZV_ID"] == "uid-el"
    assert env["PET_MAX_RESTARTS"] == "14"  # the user's 10 + one per node that may leave
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert env["PET_LOCAL_ADDR"] == "status.podIP"


def test_a_container_that_sets_trainctls_extra_env_itself_keeps_its_value_once():
    job = elastic()
    container = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "0"}]
    cluster = Cluster(job)
    cluster.step()
    worker = by_name(cluster.step().creates)["el-worker-0"]
    names = [name for name, _ in env_of(worker)]
    assert names.count("TORCH_DISABLE_SHARE_RDZV_TCP_STORE") == 1
    assert env_dict(worker)["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "0"
    assert names.count("PET_LOCAL_ADDR") == 1 and names.count("PET_NNODES") == 1


def test_rendezvous_timers_from_the_user_keep_the_store_and_override_ours():
    cluster = Cluster(elastic(rdzvConf=[{"key": "last_call_timeout", "value": "5"}, {"key": "read_timeout", "value": "90"}]))
    assert "el-rdzv" in by_name(cluster.step().creates)
    env = env_dict(by_name(cluster.step().creates)["el-worker-0"])
    assert env["PET_RDZV_ENDPOINT"] == "el-rdzv:23456"
    assert env["PET_RDZV_CONF"] == (
        "is_host=0,last_call_timeout=5,keep_alive_interval=1,keep_alive_max_attempt=5,join_timeout=600,read_timeout=90"
    )


def test_rendezvous_store_is_not_a_replica_and_is_restarted_when_it_dies():
    cluster = Cluster(elastic())
    cluster.step()
    cluster.step()
    cluster.set_all("Running")
    cluster.pods["el-rdzv"]["status"] = {"phase": "Running"}
    plan = cluster.step()
    assert plan.status["replicaStatuses"]["Worker"]["active"] == 2
    assert set(plan.status["replicaStatuses"]) == {"Worker"}
    cluster.pods["el-rdzv"]["status"] = {"phase": "Failed"}
    died = cluster.step()
    assert [(d.kind, d.name) for d in died.deletes] == [("Pod", "el-rdzv")]
    assert [o["metadata"]["name"] for o in cluster.step().creates] == ["el-rdzv"]


def test_rendezvous_store_goes_when_the_job_finishes():
    cluster = Cluster(elastic())
    cluster.step()
    cluster.step()
    cluster.set_all("Running")
    cluster.set_phase("el-worker-0", "Succeeded")
    cluster.step()
    plan = cluster.step()
    assert sorted((d.kind, d.name) for d in plan.deletes) == [("Pod", "el-rdzv"), ("Service", "el-rdzv")]


@pytest.mark.parametrize(
    "policy, annotations",
    [
        ({"rdzvHost": "my-etcd", "rdzvBackend": "etcd-v2"}, {}),
        ({"rdzvConf": [{"key": "is_host", "value": "1"}, {"key": "join_timeout", "value": "60"}]}, {}),
        ({}, {"trainctl.io/reference-env": "true"}),
    ],
)
def test_user_rendezvous_settings_win(policy, annotations):
    job = elastic(**policy)
    job["metadata"]["annotations"] = annotations
    plan = Cluster(job).reconcile()
    assert "el-rdzv" not in by_name(plan.creates)
    env = env_dict(by_name(plan.creates)["el-worker-0"])
    assert not env["PET_RDZV_ENDPOINT"].startswith("el-rdzv")
    assert ("TORCH_DISABLE_SHARE_RDZV_TCP_STORE" in env) is (not annotations)


def test_volcano_queue_defaults_per_reference():
    """training-operator puts a PyTorchJob without a queue in ``default``; ms-operator copies
    ``schedulingPolicy.queue`` as it is, so an MSJob's PodGroup has no queue at all."""
    pytorch = Cluster(pytorchjob("mnist"), ReconcileConfig(gang_scheduler="volcano")).reconcile()
    ms = Cluster(msjob("ms"), ReconcileConfig(gang_scheduler="volcano")).reconcile()
    named = Cluster(msjob("ms", runPolicy={"schedulingPolicy": {"queue": "research"}}), ReconcileConfig(gang_scheduler="volcano")).reconcile()
    group = lambda plan: next(o for o in plan.creates if o["kind"] == "PodGroup")  # noqa: E731
    assert group(pytorch)["spec"]["queue"] == "default"
    assert "queue" not in group(ms)["spec"]
    assert group(named)["spec"]["queue"] == "research"
