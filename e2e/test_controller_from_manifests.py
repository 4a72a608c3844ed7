"""The controller installed as on any cluster, from its own manifests, on a cluster started
without trainctl's own controller: ``kubectl apply -k manifests`` (every namespace), and the
single-namespace overlay (CRDs first, then ``kubectl apply -k
manifests/overlays/single-namespace``; jobs in its namespace only).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from trainctl.api.constants import LABEL_JOB_NAME
from trainctl.cluster.kubelet.kubelet import namespace_data_dir
from trainctl.cluster.network import isolation
from trainctl.launch.job_kinds import kind_of

from tests.support.cluster import E2E, scratch_cluster
from tests.support.observer import JobObserver
from tests.support.polling import poll
from tests.support.repo import REPO
from tests.support.samples import containers, load_sample, named, set_arg

# The waits' bounds: a cluster's start, the Deployment's rollout (twice) and a DDP job, on a
# loaded two-core machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NAME = "trainctl-controller"
SELECTOR = "app.kubernetes.io/name=trainctl,app.kubernetes.io/component=controller"
# The job's containers train, then stay Running while this file (in the namespace's data
# directory, which the pods and the test both see) exists: the restart happens while they run.
HOLD = "hold"


@dataclass
class Install:
    env: E2E
    namespace: str  # the controller's
    jobs_namespace: str  # where the test runs its jobs

    def kubectl(self, *args: str, **kwargs: Any) -> str:
        return self.env.kubectl(*args, "-n", self.namespace, **kwargs)

    def json(self, *args: str) -> Any:
        return self.env.kubectl.json(*args, "-n", self.namespace)

    def run(self, job: dict[str, Any]) -> JobObserver:
        """Follow ``job`` in the jobs' namespace and apply it there; use as a context manager."""
        job["metadata"]["namespace"] = self.jobs_namespace
        observer = JobObserver(self.env.api, kind_of(job), job["metadata"]["name"], namespace=self.jobs_namespace)
        observer.start()
        try:
            self.env.kubectl.apply(job)
        except BaseException:
            observer.__exit__(None, None, None)
            raise
        return observer

    def data_dir(self) -> Path:
        """The jobs' namespace's ``$TRAINCTL_DATA_DIR``, as the test sees it."""
        return namespace_data_dir(self.env.cluster.directory, self.jobs_namespace)


# (kubectl apply arguments, in order; the controller's namespace; the jobs' namespace)
INSTALLS = {
    "cluster-wide": ([["-k", "manifests"]], "trainctl-system", "default"),
    "single-namespace": ([["-f", "manifests/crds/"], ["-k", "manifests/overlays/single-namespace"]], "training", "training"),
}


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    problem = isolation.isolation_problem()
    if problem:
        pytest.skip(f"no isolated pod network here: {problem}")
    applies, namespace, jobs_namespace = INSTALLS[request.param]
    root = tmp_path_factory.mktemp(request.param)
    with scratch_cluster(root, controller=False, network=isolation.ISOLATED) as env:
        out = "".join(env.kubectl("apply", option, str(REPO / path), timeout=120) for option, path in applies)
        assert f"deployment.apps/{NAME} created" in out, out
        install = Install(env, namespace, jobs_namespace)
        rollout_status(install)
        yield install


def rollout_status(install: Install) -> None:
    out = install.kubectl("rollout", "status", f"deployment/{NAME}", "--timeout=300s", timeout=320)
    assert f'deployment "{NAME}" successfully rolled out' in out, out


def controller_pods(install: Install) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = install.json("get", "pods", "-l", SELECTOR)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def leader(install: Install) -> str:
    """The pod holding the Lease ("" while none does): identities are ``<pod name>_<suffix>``."""
    lease = install.json("get", "lease", NAME)
    return str(lease["spec"].get("holderIdentity") or "").rsplit("_", 1)[0]


def controller_logs(install: Install) -> list[tuple[str, dict[str, Any]]]:
    """(pod, record) for each JSON log line of the running controller pods (``--log-format=json``)."""
    out = install.kubectl("logs", "-l", SELECTOR, "--tail=-1", "--prefix")
    records = []
    for line in out.splitlines():
        prefix, _, text = line.partition("] ")
        if text.startswith("{"):
            records.append((prefix.split("/")[1], json.loads(text)))  # [pod/NAME/controller]
    return records


def refused(records: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The lines that tell of a call RBAC refused (403 Forbidden)."""
    return [record for _, record in records if "forbidden" in json.dumps(record).lower()]


def running_job_pods(install: Install, job: str) -> dict[str, str]:
    """Name -> uid of the job's pods, all of which are Running."""
    pods = install.env.kubectl.json("get", "pods", "-n", install.jobs_namespace, "-l", f"{LABEL_JOB_NAME}={job}")["items"]
    assert {p["status"]["phase"] for p in pods} == {"Running"}, pods
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}


@pytest.mark.parametrize("installed", list(INSTALLS), indirect=True)
def test_the_deployment_runs_the_controller_as_its_service_account_and_trains_the_ddp_sample(installed: Install) -> None:
    install, env = installed, installed.env
    pods = controller_pods(install)
    assert len(pods) == 2, pods
    assert {p["spec"]["serviceAccountName"] for p in pods} == {NAME}
    assert {c["name"]: c["command"] for p in pods for c in p["spec"]["containers"]} == {"controller": ["trainctl-controller"]}
    names = {p["metadata"]["name"] for p in pods}
    holder = poll(lambda: (held := leader(install)) in names and held, 120, "a controller pod holding the Lease")

    with install.run(load_sample("pytorch/ddp.yaml")) as run:
        run.wait_succeeded(timeout=300)
        assert len(run.events("done")) == 3, run.dump()

    records = controller_logs(install)
    # In-cluster configuration: the kubernetes Service's address the kubelet put in the pod's
    # env (on a pod network of its own), not a kubeconfig's server.
    service_ip = env.kubectl("get", "service", "kubernetes", "-n", "default", "-o", "jsonpath={.spec.clusterIP}")
    servers = {pod: record.get("server") for pod, record in records if record.get("msg") == "starting"}
    assert servers == {pod: f"https://{service_ip}:443" for pod in names}, servers
    # Only a leader reconciles (its workers start once it holds the Lease): one replica stands by.
    leaders = {pod for pod, record in records if record.get("msg") == "became leader"}
    acting = {pod for pod, record in records if record.get("msg") == "workers started"}
    assert holder in leaders and acting == leaders and len(acting) < len(names), records
    # Its roles allowed every call it made.
    assert refused(records) == []
    env.kubectl("delete", "pytorchjob", "pytorch-ddp", "-n", install.jobs_namespace, "--wait=true", timeout=120)


# The hand-over is the same code in either install; the cluster-wide one shows it.
@pytest.mark.parametrize("installed", ["cluster-wide"], indirect=True)
def test_a_rollout_restart_hands_the_lease_to_a_new_pod_and_the_running_job_goes_on(installed: Install) -> None:
    install = installed
    hold = install.data_dir() / HOLD
    hold.parent.mkdir(parents=True, exist_ok=True)
    hold.write_text("")
    job = named(load_sample("pytorch/ddp.yaml"), "ddp-across-restart")
    set_arg(job, "--checkpoint-dir", "checkpoints/ddp-across-restart")
    for container in containers(job):
        container["command"] = ["sh", "-c", f'python samples/pytorch/train.py "$@" && '
                                            f'while [ -e "$TRAINCTL_DATA_DIR/{HOLD}" ]; do sleep 0.5; done', "sh"]
    old_pods = {p["metadata"]["name"] for p in controller_pods(install)}
    with install.run(job) as run:
        poll(lambda: len(run.events("done")) == 3 or None, 300, "every rank trained, the pods still running")
        uids = running_job_pods(install, "ddp-across-restart")
        assert len(uids) == 3

        install.kubectl("rollout", "restart", f"deployment/{NAME}")
        rollout_status(install)
        new_pods = poll(lambda: {p["metadata"]["name"] for p in controller_pods(install)} - old_pods or None, 120,
                        "the restarted controller pods")
        poll(lambda: leader(install) in new_pods or None, 180, "a restarted controller pod holding the Lease")
        assert running_job_pods(install, "ddp-across-restart") == uids  # the same pods ran all along

        hold.unlink()
        run.wait_succeeded(timeout=180)  # which only the new leader could write
        assert len(run.events("start")) == 3, run.dump()  # no rank started twice
    assert refused(controller_logs(install)) == []
