"""The controller installed as on any cluster: ``kubectl apply -k manifests`` on a cluster
started without trainctl's own controller.

The Deployment's pods run ``trainctl-controller`` (the kubelet runs the container's command;
the image is not pulled) as the manifests' ServiceAccount, with its RBAC and nothing else: in
the pod sandbox the cluster's admin credentials are not there, and the client finds the pod's
token and the ``kubernetes`` Service as any in-cluster client does. Two replicas elect a
leader through a Lease; a ``kubectl rollout restart`` of the Deployment hands the Lease to a
new pod while a job runs, and the job goes on to Succeeded with the pods it had.

The pods get a network namespace each (the isolated network): the manifests give both
replicas the same metrics and health ports, as a real node allows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from trainctl.api.constants import LABEL_JOB_NAME
from trainctl.cluster.network import isolation

from tests.support.cluster import E2E, scratch_cluster
from tests.support.polling import poll
from tests.support.repo import REPO
from tests.support.samples import containers, load_sample, named, set_arg

pytestmark = pytest.mark.e2e

NAMESPACE, NAME = "trainctl-system", "trainctl-controller"
SELECTOR = "app.kubernetes.io/name=trainctl,app.kubernetes.io/component=controller"
# The job's containers train, then stay Running while this file (in the namespace's data
# directory, which the pods and the test both see) exists: the restart happens while they run.
HOLD = "hold"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    problem = isolation.isolation_problem()
    if problem:
        pytest.skip(f"no isolated pod network here: {problem}")
    root = tmp_path_factory.mktemp("manifests")
    with scratch_cluster(root, controller=False, network=isolation.ISOLATED) as env:
        out = env.kubectl("apply", "-k", str(REPO / "manifests"), timeout=120)
        assert f"deployment.apps/{NAME} created" in out, out
        rollout_status(env)
        yield env


def rollout_status(env: E2E) -> None:
    out = env.kubectl("rollout", "status", f"deployment/{NAME}", "-n", NAMESPACE, "--timeout=300s", timeout=320)
    assert f'deployment "{NAME}" successfully rolled out' in out, out


def controller_pods(env: E2E) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = env.kubectl.json("get", "pods", "-n", NAMESPACE, "-l", SELECTOR)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def leader(env: E2E) -> str:
    """The pod holding the Lease ("" while none does): identities are ``<pod name>_<suffix>``."""
    lease = env.kubectl.json("get", "lease", NAME, "-n", NAMESPACE)
    return str(lease["spec"].get("holderIdentity") or "").rsplit("_", 1)[0]


def controller_logs(env: E2E) -> list[tuple[str, dict[str, Any]]]:
    """(pod, record) for each JSON log line of the running controller pods (``--log-format=json``)."""
    out = env.kubectl("logs", "-n", NAMESPACE, "-l", SELECTOR, "--tail=-1", "--prefix")
    records = []
    for line in out.splitlines():
        prefix, _, text = line.partition("] ")
        if text.startswith("{"):
            records.append((prefix.split("/")[1], json.loads(text)))  # [pod/NAME/controller]
    return records


def refused(records: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The lines that tell of a call RBAC refused (403 Forbidden)."""
    return [record for _, record in records if "forbidden" in json.dumps(record).lower()]


def running_job_pods(env: E2E, job: str) -> dict[str, str]:
    """Name -> uid of the job's pods, all of which are Running."""
    pods = env.kubectl.json("get", "pods", "-l", f"{LABEL_JOB_NAME}={job}")["items"]
    assert {p["status"]["phase"] for p in pods} == {"Running"}, pods
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}


def test_the_deployment_runs_the_controller_as_its_service_account_and_trains_the_ddp_sample(installed: E2E) -> None:
    env = installed
    pods = controller_pods(env)
    assert len(pods) == 2, pods
    assert {p["spec"]["serviceAccountName"] for p in pods} == {NAME}
    assert {c["name"]: c["command"] for p in pods for c in p["spec"]["containers"]} == {"controller": ["trainctl-controller"]}
    names = {p["metadata"]["name"] for p in pods}
    holder = poll(lambda: (held := leader(env)) in names and held, 120, "a controller pod holding the Lease")

    job = load_sample("pytorch/ddp.yaml")
    with env.run(job) as run:
        run.wait_succeeded(timeout=300)
        assert len(run.events("done")) == 3, run.dump()

    records = controller_logs(env)
    # In-cluster configuration: the kubernetes Service's address the kubelet put in the pod's
    # env (on a pod network of its own), not a kubeconfig's server.
    service_ip = env.kubectl("get", "service", "kubernetes", "-n", "default", "-o", "jsonpath={.spec.clusterIP}")
    servers = {pod: record.get("server") for pod, record in records if record.get("msg") == "starting"}
    assert servers == {pod: f"https://{service_ip}:443" for pod in names}, servers
    leaders = {pod for pod, record in records if record.get("msg") == "became leader"}
    assert holder in leaders and leaders <= names, records
    # Its ClusterRole and Role allowed every call it made.
    assert refused(records) == []
    env.clean()


def test_a_rollout_restart_hands_the_lease_to_a_new_pod_and_the_running_job_goes_on(installed: E2E) -> None:
    env = installed
    hold = env.checkpoints.parent / HOLD
    hold.parent.mkdir(parents=True, exist_ok=True)
    hold.write_text("")
    job = named(load_sample("pytorch/ddp.yaml"), "ddp-across-restart")
    set_arg(job, "--checkpoint-dir", "checkpoints/ddp-across-restart")
    for container in containers(job):
        container["command"] = ["sh", "-c", f'python samples/pytorch/train.py "$@" && '
                                            f'while [ -e "$TRAINCTL_DATA_DIR/{HOLD}" ]; do sleep 0.5; done', "sh"]
    old_pods = {p["metadata"]["name"] for p in controller_pods(env)}
    with env.run(job) as run:
        poll(lambda: len(run.events("done")) == 3 or None, 300, "every rank trained, the pods still running")
        uids = running_job_pods(env, "ddp-across-restart")
        assert len(uids) == 3

        env.kubectl("rollout", "restart", f"deployment/{NAME}", "-n", NAMESPACE)
        rollout_status(env)
        new_pods = poll(lambda: {p["metadata"]["name"] for p in controller_pods(env)} - old_pods or None, 120,
                        "the restarted controller pods")
        poll(lambda: leader(env) in new_pods or None, 180, "a restarted controller pod holding the Lease")
        assert running_job_pods(env, "ddp-across-restart") == uids  # the same pods ran all along

        hold.unlink()
        run.wait_succeeded(timeout=180)  # which only the new leader could write
        assert len(run.events("start")) == 3, run.dump()  # no rank started twice
    assert refused(controller_logs(env)) == []
