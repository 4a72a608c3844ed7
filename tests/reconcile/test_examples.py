"""The specs' worked examples: PyTorch §2.5 A, B and C, and the MSJob environment of §2.5."""

from __future__ import annotations

import pytest

from trainctl.controller.reconcile import ReconcileConfig

from tests.support.jobs import container, msjob, pytorchjob, replica
from tests.support.reconcile import Cluster, by_name, env_dict, env_of

MASTER_BLOCK = [
    ("PYTHONUNBUFFERED", "1"),
    ("MASTER_PORT", "23456"),
    ("PET_MASTER_PORT", "23456"),
    ("MASTER_ADDR", "mnist-master-0"),
    ("PET_MASTER_ADDR", "mnist-master-0"),
    ("WORLD_SIZE", "3"),
]


def test_example_a_master_and_workers_env_in_order():
    plan = Cluster(pytorchjob("mnist")).reconcile()
    pods = by_name([o for o in plan.creates if o["kind"] == "Pod"])
    assert list(pods) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert env_of(pods["mnist-master-0"]) == MASTER_BLOCK + [
        ("RANK", "0"),
        ("PET_NODE_RANK", "0"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_NNODES", "3"),
    ]
    assert env_of(pods["mnist-worker-1"]) == MASTER_BLOCK + [
        ("RANK", "2"),
        ("PET_NODE_RANK", "2"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_NNODES", "3"),
    ]
    init = pods["mnist-worker-1"]["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["init-pytorch"]
    assert init[0]["image"] == "alpine:3.10" and "nslookup mnist-master-0" in init[0]["command"][2]
    assert "initContainers" not in pods["mnist-master-0"]["spec"]


def test_example_a_with_four_processes_per_node():
    job = pytorchjob("mnist", nprocPerNode="4")
    pods = by_name(Cluster(job).reconcile().creates)
    env = env_dict(pods["mnist-worker-1"])
    assert (env["WORLD_SIZE"], env["RANK"], env["PET_NPROC_PER_NODE"]) == ("12", "2", "4")


def test_example_a_pod_metadata_labels_owner_and_services():
    plan = Cluster(pytorchjob("mnist")).reconcile()
    objs = {(o["kind"], o["metadata"]["name"]): o for o in plan.creates}
    master = objs[("Pod", "mnist-master-0")]
    assert master["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",
    }
    assert master["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "mnist",
            "uid": "uid-mnist",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert master["spec"]["restartPolicy"] == "OnFailure"
    assert master["spec"]["containers"][0]["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]
    worker_svc = objs[("Service", "mnist-worker-1")]
    assert worker_svc["spec"] == {
        "selector": {
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/job-name": "mnist",
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "1",
        },
        "ports": [{"name": "pytorchjob-port", "port": 23456}],
        "clusterIP": "None",
    }
    assert "training.kubeflow.org/job-role" not in objs[("Pod", "mnist-worker-0")]["metadata"]["labels"]


def test_example_a_sidecars_get_env_after_user_env_and_init_containers_do_not():
    job = pytorchjob("mnist", workers=1)
    job["spec"]["pytorchReplicaSpecs"]["Master"] = replica(
        1,
        containers=[container(env=[{"name": "RANK", "value": "user"}]), container("sidecar", "side:1")],
        initContainers=[container("prep", "prep:1")],
    )
    master = by_name(Cluster(job).reconcile().creates)["mnist-master-0"]
    names = [n for n, _ in env_of(master, "pytorch")]
    assert names[0] == "RANK" and names.count("RANK") == 2  # the operator's value comes last
    assert env_dict(master, "sidecar")["WORLD_SIZE"] == "2"
    assert "env" not in master["spec"]["initContainers"][0]


def test_workers_only_static_job_gets_no_rendezvous_env():
    pods = by_name(Cluster(pytorchjob("w", master=False, workers=2)).reconcile().creates)
    assert env_of(pods["w-worker-0"]) == [("PYTHONUNBUFFERED", "1"), ("PET_NPROC_PER_NODE", "auto"), ("PET_NNODES", "2")]
    assert pods["w-worker-0"]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert "initContainers" not in pods["w-worker-1"]["spec"]


def elastic_job(**elastic):
    job = pytorchjob("elastic", master=False, workers=2)
    job["spec"]["elasticPolicy"] = elastic
    return job


def test_example_b_elastic_reference_env():
    job = elastic_job(rdzvBackend="c10d", minReplicas=1, maxReplicas=3, maxRestarts=100)
    job["metadata"]["annotations"] = {"trainctl.io/reference-env": "true"}
    plan = Cluster(job).reconcile()
    pods = [o for o in plan.creates if o["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == ["elastic-worker-0", "elastic-worker-1"]
    for pod in pods:
        assert env_of(pod) == [
            ("PYTHONUNBUFFERED", "1"),
            ("PET_NPROC_PER_NODE", "auto"),
            ("PET_RDZV_ENDPOINT", "elastic-worker-0:23456"),
            ("PET_RDZV_BACKEND", "c10d"),
            ("PET_NNODES", "1:3"),
            ("PET_MAX_RESTARTS", "100"),
        ]
        assert "initContainers" not in pod["spec"]


def test_example_c_elastic_generator_with_everything_set():
    job = elastic_job(
        minReplicas=1,
        maxReplicas=3,
        rdzvBackend="c10d",
        rdzvPort=1234,
        rdzvHost="localhost",
        rdzvId="rdzv-id",
        rdzvConf=[
            {"key": "rdzv-conf-name", "value": "rdzv-conf-value"},
            {"key": "rdzv-conf-name-1", "value": "rdzv-conf-value-1"},
        ],
        maxRestarts=3,
    )
    job["metadata"]["annotations"] = {"trainctl.io/reference-env": "true"}
    env = env_dict(by_name(Cluster(job).reconcile().creates)["elastic-worker-0"])
    assert {k: v for k, v in env.items() if k not in ("PYTHONUNBUFFERED", "PET_NPROC_PER_NODE")} == {
        "PET_MAX_RESTARTS": "3",
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": "localhost:1234",
        "PET_RDZV_ID": "rdzv-id",
        "PET_RDZV_CONF": "rdzv-conf-name=rdzv-conf-value,rdzv-conf-name-1=rdzv-conf-value-1",
        "PET_NNODES": "1:3",
    }


def test_elastic_with_master_gets_both_blocks():
    job = pytorchjob("mnist", workers=2)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 2}
    job["metadata"]["annotations"] = {"trainctl.io/reference-env": "true"}
    names = [n for n, _ in env_of(by_name(Cluster(job).reconcile().creates)["mnist-worker-0"])]
    assert names == [n for n, _ in MASTER_BLOCK] + [
        "RANK", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND", "PET_NNODES",
    ]


# --- MSJob §2.5 ---------------------------------------------------------------------------------


def test_msjob_scheduler_service_first_then_pods_with_its_cluster_ip():
    cluster = Cluster(msjob("ms", ps=1, workers=2))
    first = cluster.step()
    assert [(o["kind"], o["metadata"]["name"]) for o in first.creates] == [("Service", "ms-scheduler-0")]
    service = first.creates[0]
    assert "clusterIP" not in service["spec"]  # a normal ClusterIP Service
    assert service["spec"]["ports"] == [{"name": "msjob-port", "port": 2222}]
    ip = cluster.services["ms-scheduler-0"]["spec"]["clusterIP"]
    pods = by_name(cluster.step().creates)
    assert list(pods) == ["ms-scheduler-0", "ms-ps-0", "ms-worker-0", "ms-worker-1"]
    common = [("MS_NODE_ID", "metadata.name"), ("MS_SCHED_PORT", "2222"), ("MS_SERVER_NUM", "1"), ("MS_WORKER_NUM", "2")]
    assert env_of(pods["ms-scheduler-0"]) == [("MS_SCHED_HOST", "status.podIP")] + common + [("MS_ROLE", "MS_SCHED")]
    assert env_of(pods["ms-ps-0"]) == [("MS_SCHED_HOST", ip)] + common + [("MS_ROLE", "MS_PSERVER")]
    assert env_of(pods["ms-worker-1"]) == [("MS_SCHED_HOST", ip)] + common + [("MS_ROLE", "MS_WORKER")]
    assert pods["ms-worker-1"]["spec"]["restartPolicy"] == "Never"
    assert pods["ms-worker-1"]["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "msjob-controller",
        "group-name": "mindspore.gitee.com",
        "training.kubeflow.org/job-name": "ms",
        "job-name": "ms",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1",
        "replica-type": "worker",
        "replica-index": "1",
    }


def test_msjob_env_only_in_mindspore_containers():
    job = msjob("ms", workers=1)
    job["spec"]["msReplicaSpecs"]["Worker"] = replica(
        1, containers=[container("mindspore", "ms:2"), container("logger", "log:1")]
    )
    cluster = Cluster(job)
    cluster.step()
    worker = by_name(cluster.step().creates)["ms-worker-0"]
    assert env_dict(worker, "mindspore")["MS_ROLE"] == "MS_WORKER"
    assert "env" not in next(c for c in worker["spec"]["containers"] if c["name"] == "logger")


def test_msjob_without_scheduler_gets_no_env_and_no_service():
    plan = Cluster(msjob("solo", scheduler=False, workers=1)).reconcile()
    assert [(o["kind"], o["metadata"]["name"]) for o in plan.creates] == [("Pod", "solo-worker-0")]
    assert "env" not in plan.creates[0]["spec"]["containers"][0]


# --- accelerators ---------------------------------------------------------------------------------

GPU4 = {"resources": {"limits": {"nvidia.com/gpu": 4}}}
NPU8 = {"resources": {"limits": {"huawei.com/Ascend910": "8"}, "requests": {"huawei.com/Ascend910": "8"}}}


@pytest.mark.parametrize(
    "worker_resources, nproc, world, pet_nproc",
    [
        ({}, None, "3", "auto"),  # CPU pods: 1 process each, as the reference counts
        (GPU4, None, "9", "4"),  # Master CPU (1) + 2 workers × 4 GPUs
        (NPU8, None, "17", "8"),
        ({"resources": {"limits": {"huawei.com/npu": 2}}}, None, "5", "2"),
        ({"resources": {"limits": {"huawei.com/Ascend910B3-memory": 64}}}, None, "3", "auto"),  # a share, not a device
        (GPU4, "2", "6", "2"),  # an explicit number wins
        (GPU4, "cpu", "3", "cpu"),
    ],
)
def test_nproc_auto_resolves_from_declared_devices(worker_resources, nproc, world, pet_nproc):
    job = pytorchjob("mnist", workers=2)
    job["spec"]["pytorchReplicaSpecs"]["Worker"] = replica(2, containers=[container(**worker_resources)])
    if nproc:
        job["spec"]["nprocPerNode"] = nproc
    pods = by_name(Cluster(job).reconcile().creates)
    worker = env_dict(pods["mnist-worker-0"])
    assert (worker["WORLD_SIZE"], worker["PET_NPROC_PER_NODE"]) == (world, pet_nproc)
    assert env_dict(pods["mnist-master-0"])["WORLD_SIZE"] == world


def test_msjob_multi_device_workers_count_processes():
    job = msjob("ms", workers=2)
    job["spec"]["msReplicaSpecs"]["Worker"] = replica(2, containers=[container("mindspore", "ms:2", **NPU8)])
    cluster = Cluster(job)
    cluster.step()
    pods = by_name(cluster.step().creates)
    assert env_dict(pods["ms-worker-0"])["MS_WORKER_NUM"] == "16"
    assert env_dict(pods["ms-worker-0"])["MS_LOCAL_WORKER"] == "8"
    assert env_dict(pods["ms-scheduler-0"])["MS_WORKER_NUM"] == "16"
    assert "MS_LOCAL_WORKER" not in env_dict(pods["ms-scheduler-0"])


def test_msjob_single_device_workers_keep_reference_env():
    job = msjob("ms", workers=2)
    job["spec"]["msReplicaSpecs"]["Worker"] = replica(
        2, containers=[container("mindspore", "ms:2", resources={"limits": {"nvidia.com/gpu": 1}})]
    )
    cluster = Cluster(job)
    cluster.step()
    env = env_dict(by_name(cluster.step().creates)["ms-worker-0"])
    assert env["MS_WORKER_NUM"] == "2" and "MS_LOCAL_WORKER" not in env


def test_ascend_visible_devices_from_annotation_with_volcano_only():
    job = msjob("ms", workers=1)
    job["spec"]["msReplicaSpecs"]["Worker"] = replica(1, containers=[container("mindspore", "ms:2", **NPU8)])
    for gang, expected in ((None, None), ("volcano", "metadata.annotations['huawei.com/Ascend910']")):
        cluster = Cluster(job, ReconcileConfig(gang_scheduler=gang))
        cluster.step()  # the Scheduler Service (and the PodGroup)
        if gang:
            cluster.pod_group["status"] = {"phase": "Inqueue"}
        worker = by_name(cluster.step().creates)["ms-worker-0"]
        assert env_dict(worker).get("ASCEND_VISIBLE_DEVICES") == expected


def test_init_container_does_not_wait_for_an_address_that_is_already_an_ip():
    import subprocess

    pods = by_name(Cluster(pytorchjob("mnist")).reconcile().creates)
    script = pods["mnist-worker-0"]["spec"]["initContainers"][0]["command"][2]
    # The embedded cluster's kubelet rewrites Service names in arguments to their addresses.
    rewritten = script.replace("mnist-master-0", "127.128.0.2")
    assert subprocess.run(["sh", "-c", rewritten], capture_output=True, timeout=10).returncode == 0
