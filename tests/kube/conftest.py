"""Fixtures for the controller's integration tests on the embedded API server.

The API server is the real one (``apiserver`` fixture, tests/conftest.py; ``kube`` installs
the job CRDs into it); the controller is
the real Manager, in-process when a test needs to look inside it and as a ``trainctl
controller`` subprocess when it must be killed. Waiting is done on watch events, never on
sleeps.
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from typing import Any, Callable, Iterator, Optional

import pytest
import yaml
from kubernetes import client as k8s_client

from trainctl.controller.kube.client import KubeClient
from trainctl.controller.kube.informer import Informer
from trainctl.controller.kube.manager import Manager, ManagerOptions
from trainctl.controller.kube.resources import EVENTS, PODS, PYTORCHJOBS, SERVICES
from trainctl.controller.local.cluster import install_crds

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMESPACE = "default"


def pytorch_job(name: str, workers: int = 2, restart_policy: str = "OnFailure", **run_policy: Any) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        return {
            "replicas": count,
            "restartPolicy": restart_policy,
            "template": {"spec": {"containers": [{"name": "pytorch", "image": "trainctl/sample:1", "command": ["python", "train.py"]}]}},
        }

    spec: dict[str, Any] = {"pytorchReplicaSpecs": {"Master": replica(1)}}
    if workers:
        spec["pytorchReplicaSpecs"]["Worker"] = replica(workers)
    if run_policy:
        spec["runPolicy"] = run_policy
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


def condition(job: Optional[dict[str, Any]], type_: str) -> Optional[dict[str, Any]]:
    for cond in ((job or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_ and cond.get("status") == "True":
            return cond
    return None


def master_succeeds_when_all_run(pod: dict[str, Any], running: list[dict[str, Any]]) -> Optional[str]:
    """The usual training: the master finishes once every replica of its job is up."""
    labels = pod["metadata"].get("labels") or {}
    if labels.get("training.kubeflow.org/replica-type") != "master":
        return None
    job = labels.get("training.kubeflow.org/job-name")
    return "Succeeded" if len(running) >= expected_replicas.get(job, 1) else None


# job name -> number of pods it runs, for master_succeeds_when_all_run
expected_replicas: dict[str, int] = {}


class Watcher:
    """Waits on an informer until a predicate over its cache holds."""

    def __init__(self, client: KubeClient, resource: Any, namespace: str = NAMESPACE) -> None:
        self.informer = Informer(client, resource, namespace=namespace)
        self._cond = threading.Condition()
        self.informer.add_handler(self._changed)
        self.informer.start()
        assert self.informer.synced.wait(30), f"no initial list of {resource.plural}"

    def _changed(self, *_: Any) -> None:
        with self._cond:
            self._cond.notify_all()

    def get(self, name: str) -> Optional[dict[str, Any]]:
        return self.informer.store.get(NAMESPACE, name)

    def list(self) -> list[dict[str, Any]]:
        return self.informer.store.list()

    def wait(self, predicate: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
                self._cond.wait(min(left, 1.0))

    def stop(self) -> None:
        self.informer.stop()




@pytest.fixture
def kube(apiserver) -> KubeClient:
    """A client of the API server, with the job CRDs installed."""
    client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0)
    if not client.group_version_served("kubeflow.org", "v1"):
        install_crds(client)
    return client


@pytest.fixture
def jobs(kube) -> Iterator[Watcher]:
    w = Watcher(kube, PYTORCHJOBS)
    yield w
    w.stop()


@pytest.fixture
def pods(kube) -> Iterator[Watcher]:
    w = Watcher(kube, PODS)
    yield w
    w.stop()


@pytest.fixture
def services(kube) -> Iterator[Watcher]:
    w = Watcher(kube, SERVICES)
    yield w
    w.stop()


@pytest.fixture
def events(kube) -> Iterator[Watcher]:
    w = Watcher(kube, EVENTS)
    yield w
    w.stop()


@pytest.fixture
def start_manager(apiserver, kube) -> Iterator[Callable[..., Manager]]:
    """Start an in-process controller against ``server`` (default: the API server itself)."""
    started: list[Manager] = []

    def start(server_url: Optional[str] = None, **options: Any) -> Manager:
        if server_url:  # e.g. the fault proxy, plain HTTP on loopback
            configuration = k8s_client.Configuration()
            configuration.host = server_url
            configuration.api_key = {"authorization": f"Bearer {apiserver.token}"}
            client = KubeClient(configuration, qps=0)
        else:
            client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0)
        options.setdefault("watch_timeout", 30)
        manager = Manager(client, ManagerOptions(**options))
        client.on_response = manager.metrics.observe_api
        manager.start()
        started.append(manager)
        return manager

    yield start
    for manager in started:
        manager.stop(timeout=10)


def job_events(events: Watcher, name: str) -> list[dict[str, Any]]:
    return [e for e in events.list() if (e.get("involvedObject") or {}).get("name") == name]


class ControllerProcess:
    """``trainctl controller`` as a child process, to be killed and restarted."""

    def __init__(self, kubeconfig: pathlib.Path, log_dir: pathlib.Path, *args: str) -> None:
        self.kubeconfig = kubeconfig
        self.args = args
        self.log_path = log_dir / f"controller-{uuid.uuid4().hex[:6]}.log"
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> "ControllerProcess":
        log = open(self.log_path, "ab")
        cmd = [sys.executable, "-m", "trainctl.controller.cli", "controller", "--kubeconfig", str(self.kubeconfig), *self.args]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        assert self.proc is not None
        self.proc.terminate()
        return self.proc.wait(timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def controller_process(apiserver, kube, tmp_path) -> Iterator[Callable[..., ControllerProcess]]:
    procs: list[ControllerProcess] = []

    def make(*args: str) -> ControllerProcess:
        p = ControllerProcess(pathlib.Path(apiserver.kubeconfig), tmp_path, *args)
        procs.append(p)
        return p

    yield make
    for p in procs:
        p.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ready(health_port: int) -> bool:
    """Whether a controller's /readyz answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def load_rbac() -> list[dict[str, Any]]:
    """The ClusterRole and leader-election Role rules from the base manifests."""
    rules: list[dict[str, Any]] = []
    for path in ("manifests/base/rbac/cluster_role.yaml", "manifests/base/rbac/leader_election_role.yaml"):
        rules += yaml.safe_load((ROOT / path).read_text())["rules"]
    return rules


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(verb, group, resource) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]}


@pytest.fixture
def rbac_allowed() -> set[tuple[str, str, str]]:
    return granted(load_rbac())
