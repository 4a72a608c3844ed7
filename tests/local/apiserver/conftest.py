"""Helpers for the API-server tests: kubectl as a subprocess, the Python client, CRDs.

Every client here is the real one, talking HTTPS to a real server process.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[3]
CRDS = ROOT / "manifests" / "crds"


class Kubectl:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def run(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(["kubectl", *args], env=self.env, input=input, capture_output=True,
                                text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def __call__(self, *args: str, **kwargs: Any) -> str:
        return self.run(*args, **kwargs).stdout

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json"))

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(["kubectl", *args], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


@pytest.fixture
def kubectl(kube_env: dict[str, str]) -> Kubectl:
    return Kubectl(kube_env)


@pytest.fixture
def api(apiserver: Any) -> Iterator[client.ApiClient]:
    """A Python ``kubernetes`` client configured from the server's kubeconfig."""
    api_client = config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def crds(kubectl: Kubectl) -> None:
    """The project's CRDs, applied as a user would."""
    kubectl("apply", "-f", str(CRDS))


def pytorch_job(name: str, workers: int = 2, **extra_spec: Any) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        return {"replicas": count, "restartPolicy": "OnFailure",
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "trainctl/samples:0.1.0",
                                                      "command": ["python", "train.py"]}]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}, **extra_spec}}


def ms_job(name: str) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        return {"replicas": count, "restartPolicy": "Never",
                "template": {"spec": {"containers": [{"name": "mindspore", "image": "mindspore:2.3",
                                                      "command": ["python", "train.py"]}]}}}

    return {"apiVersion": "mindspore.gitee.com/v1", "kind": "MSJob", "metadata": {"name": name},
            "spec": {"msReplicaSpecs": {"Scheduler": replica(1), "Worker": replica(2)}}}


def write_cri_log(root: Path, pod: dict[str, Any], container: str, attempt: int, lines: list[tuple[str, str, str]]) -> Path:
    """Write ``lines`` of (time, stream, text) as the kubelet would, in the CRI format."""
    path = root / "pods" / pod["metadata"]["uid"] / container / f"{attempt}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        for stamp, stream, text in lines:
            handle.write(f"{stamp} {stream} F {text}\n")
    return path

