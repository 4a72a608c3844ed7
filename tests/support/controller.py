"""The controller under test and what a test waits on: informer-backed waits, the controller
as a child process, its readiness, its RBAC manifests, and a stand-in training outcome.

Waiting is done on watch events, never on sleeps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from trainctl.kube.client import KubeClient
from trainctl.kube.informer import Informer

from .repo import REPO
from .waiting import wait_on

NAMESPACE = "default"


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
        value = wait_on(self._cond, predicate, timeout, recheck=1.0)
        if not value:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        return value

    def stop(self) -> None:
        self.informer.stop()


def job_events(events: Watcher, name: str) -> list[dict[str, Any]]:
    return [e for e in events.list() if (e.get("involvedObject") or {}).get("name") == name]


class ControllerProcess:
    """``trainctl controller`` as a child process, to be killed and restarted."""

    def __init__(self, kubeconfig: Path, log_dir: Path, *args: str) -> None:
        self.kubeconfig = kubeconfig
        self.args = args
        self.log_path = log_dir / f"controller-{uuid.uuid4().hex[:6]}.log"
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> "ControllerProcess":
        log = open(self.log_path, "ab")
        cmd = [sys.executable, "-m", "trainctl.cli.main", "controller", "--kubeconfig", str(self.kubeconfig), *self.args]
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
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


def ready(health_port: int) -> bool:
    """Whether a controller's /readyz answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def load_rbac() -> list[dict[str, Any]]:
    """The ClusterRoles' and the leader-election Role's rules from the base manifests."""
    rules: list[dict[str, Any]] = []
    for path in ("manifests/base/rbac/cluster_role.yaml", "manifests/base/rbac/node_role.yaml",
                 "manifests/base/rbac/leader_election_role.yaml"):
        rules += yaml.safe_load((REPO / path).read_text())["rules"]
    return rules


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (verb, group, resource)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
