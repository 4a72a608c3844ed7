"""ResourceQuota and LimitRange on a one-node embedded cluster, driven with kubectl as a
namespace's administrator would: a Deployment's pods get the LimitRange's defaults and are
charged to the quota like any other pod (the controller cannot dodge it: its third pod is
refused, a ``FailedCreate`` Warning on the ReplicaSet), and ``kubectl get quota`` shows the
use the quota controller counts, going down when the Deployment is scaled in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import E2E, scratch_cluster
from tests.support.polling import poll

pytestmark = pytest.mark.e2e

LIMITS = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults"},
          "spec": {"limits": [{"type": "Container", "default": {"cpu": "300m", "memory": "64Mi"}}]}}


@pytest.fixture
def quota_env(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, nodes=1, controller=False,
                         controlplane_args=["--controllers", "replicaset,deployment,resourcequota"]) as env:
        yield env


def quota_row(env: E2E) -> str:
    return " ".join(env.kubectl("get", "quota", "compute", "--no-headers").split()[2:])


def test_a_deployments_pods_are_defaulted_and_charged_to_the_quota(quota_env: E2E) -> None:
    env = quota_env
    env.kubectl("create", "quota", "compute", "--hard=pods=2,requests.cpu=1,limits.memory=1Gi")
    env.kubectl("apply", "-f", "-", input=json.dumps(LIMITS))
    env.kubectl("create", "deployment", "web", "--image=python:3.11", "--replicas=3", "--", "sleep", "3600")
    refused = poll(lambda: [e for e in env.kubectl.json("get", "events", "--field-selector", "reason=FailedCreate")["items"]
                            if e["involvedObject"]["kind"] == "ReplicaSet"], 180, "the third pod refused")
    assert "is forbidden: exceeded quota: compute, requested: pods=1, used: pods=2, limited: pods=2" in refused[0]["message"]
    pods = env.kubectl.json("get", "pods", "-l", "app=web")["items"]
    assert len(pods) == 2
    assert pods[0]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "300m", "memory": "64Mi"},
                                                             "requests": {"cpu": "300m", "memory": "64Mi"}}
    poll(lambda: quota_row(env) == "pods: 2/2, requests.cpu: 600m/1 limits.memory: 128Mi/1Gi", 120,
         "the quota's status counting the two pods")
    env.kubectl("scale", "deployment", "web", "--replicas=1")
    poll(lambda: quota_row(env) == "pods: 1/2, requests.cpu: 300m/1 limits.memory: 64Mi/1Gi", 180,
         "the scaled-in pod no longer counted")
    described = env.kubectl("describe", "quota", "compute")
    assert ["pods", "1", "2"] in [line.split() for line in described.splitlines()]
