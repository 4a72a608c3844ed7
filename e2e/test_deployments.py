"""A Deployment on an embedded cluster, driven with kubectl as a user drives one: create,
``rollout status``, scale, a pod deleted and replaced, a new image rolled out as a new
ReplicaSet, ``rollout undo`` back to the first, and a Recreate rollout.

The pods ``sleep``: no port, so nothing depends on a free one, and no training controller
runs. The control plane runs only the ReplicaSet and Deployment controllers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import E2E, scratch_cluster
from tests.support.polling import poll

pytestmark = pytest.mark.e2e

REVISION = "deployment.kubernetes.io/revision"


@pytest.fixture
def deploy_env(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, controller=False, controlplane_args=["--controllers", "replicaset,deployment"]) as env:
        yield env


def running_pods(env: E2E) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = env.kubectl.json("get", "pods", "-l", "app=web")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp") and p.get("status", {}).get("phase") == "Running"]


def replicasets(env: E2E) -> dict[str, dict[str, Any]]:
    return {rs["metadata"]["name"]: rs for rs in env.kubectl.json("get", "rs", "-l", "app=web")["items"]}


def rollout_status(env: E2E) -> None:
    out = env.kubectl("rollout", "status", "deployment/web", "--timeout=180s", timeout=200)
    assert 'deployment "web" successfully rolled out' in out


def test_a_deployment_rolls_out_scales_heals_and_rolls_back(deploy_env: E2E) -> None:
    env = deploy_env
    env.kubectl("create", "deployment", "web", "--image=python:3.11", "--replicas=2", "--", "sleep", "3600")
    rollout_status(env)
    [first] = replicasets(env).values()
    assert first["metadata"]["annotations"][REVISION] == "1"
    assert len(running_pods(env)) == 2
    assert env.kubectl("get", "deploy", "web", "--no-headers").split()[:4] == ["web", "2/2", "2", "2"]

    env.kubectl("scale", "deploy/web", "--replicas=3")
    rollout_status(env)
    poll(lambda: len(running_pods(env)) == 3, 120, "three running pods")

    victim = running_pods(env)[0]["metadata"]["name"]
    env.kubectl("delete", "pod", victim, "--wait=false")
    poll(lambda: len(running_pods(env)) == 3 and victim not in {p["metadata"]["name"] for p in running_pods(env)},
         180, "the deleted pod replaced")

    env.kubectl("set", "image", "deployment/web", "python=python:3.12")
    rollout_status(env)
    sets = replicasets(env)
    assert len(sets) == 2 and sets[first["metadata"]["name"]]["spec"]["replicas"] == 0
    [second] = [rs for name, rs in sets.items() if name != first["metadata"]["name"]]
    assert second["spec"]["replicas"] == 3 and second["metadata"]["annotations"][REVISION] == "2"
    poll(lambda: {p["spec"]["containers"][0]["image"] for p in running_pods(env)} == {"python:3.12"}
         and len(running_pods(env)) == 3, 180, "only the new template's pods")

    env.kubectl("rollout", "undo", "deployment/web")
    rollout_status(env)
    back = replicasets(env)[first["metadata"]["name"]]
    assert back["spec"]["replicas"] == 3 and back["metadata"]["annotations"][REVISION] == "3"
    history = env.kubectl("rollout", "history", "deployment/web")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]

    # Recreate: every old pod stops before a new one starts.
    env.kubectl("patch", "deployment", "web", "--type=merge", "-p", '{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}')
    env.kubectl("set", "image", "deployment/web", "python=python:3.13")
    rollout_status(env)
    poll(lambda: {p["spec"]["containers"][0]["image"] for p in running_pods(env)} == {"python:3.13"}
         and len(running_pods(env)) == 3, 180, "the recreated pods")
    assert sorted(rs["spec"]["replicas"] for rs in replicasets(env).values()) == [0, 0, 3]
