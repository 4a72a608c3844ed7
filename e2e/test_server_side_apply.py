"""Server-side apply on an embedded cluster, as a GitOps tool and a person share a Deployment:
kubectl applies it, a second manager's change to a field kubectl owns is a conflict kubectl
prints, ``--force-conflicts`` takes the field over, and a label dropped from kubectl's file is
removed. The Deployment and ReplicaSet controllers run, so their status writes are recorded too.

The pods ``sleep``: no port, so nothing depends on a free one.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import E2E, scratch_cluster

pytestmark = pytest.mark.e2e


@pytest.fixture
def ssa_env(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, controller=False, controlplane_args=["--controllers", "replicaset,deployment"]) as env:
        yield env


def deployment(replicas: int, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "app", "image": "python:3.11", "command": ["sleep", "3600"]}]}}}}


def apply(env: E2E, obj: dict[str, Any], *flags: str, check: bool = True) -> Any:
    return env.kubectl.run("apply", "--server-side", *flags, "-f", "-", input=json.dumps(obj), check=check)


def rollout_status(env: E2E) -> None:
    out = env.kubectl("rollout", "status", "deployment/web", "--timeout=180s", timeout=200)
    assert 'deployment "web" successfully rolled out' in out


def test_two_managers_share_a_deployment_with_kubectl(ssa_env: E2E) -> None:
    env = ssa_env
    assert "serverside-applied" in apply(env, deployment(2, {"app": "web", "tier": "front"})).stdout
    rollout_status(env)

    refused = apply(env, deployment(3, {"app": "web"}), "--field-manager=ci", check=False)
    assert refused.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas' in refused.stderr
    assert "--force-conflicts" in refused.stderr  # kubectl's own advice, printed for a 409 with causes
    assert env.kubectl.json("get", "deploy", "web")["spec"]["replicas"] == 2

    apply(env, deployment(3, {"app": "web"}), "--field-manager=ci", "--force-conflicts")
    rollout_status(env)
    assert env.kubectl("get", "deploy", "web", "--no-headers").split()[:2] == ["web", "3/3"]

    kubectl_file = deployment(3, {"app": "web"})
    del kubectl_file["spec"]["replicas"]  # ci owns it now; kubectl's file no longer names it
    apply(env, kubectl_file)
    live = env.kubectl.json("get", "deploy", "web", "--show-managed-fields")
    assert live["metadata"]["labels"] == {"app": "web"}  # tier: applied before by kubectl alone, now gone
    assert live["spec"]["replicas"] == 3  # still ci's
    entries = live["metadata"]["managedFields"]
    keys = Counter((e["manager"], e["operation"], e.get("subresource", "")) for e in entries)
    assert keys[("kubectl", "Apply", "")] == keys[("ci", "Apply", "")] == 1
    assert max(keys.values()) == 1  # the controller's status writes kept one entry
    assert keys[("kube-controller-manager", "Update", "status")] == 1  # named as kube's controllers are
