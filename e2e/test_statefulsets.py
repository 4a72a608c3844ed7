"""A StatefulSet on the embedded cluster, driven with kubectl: pods ``db-0``, ``db-1``, ``db-2``
started in order (each made only once the one before it was Ready), a scale-down from the
highest ordinal, a new image rolled out with ``rollout status``, the revisions in ``rollout
history`` and ``rollout undo`` back to the first template, and the pods and revisions
collected with the set. The pods ``sleep``: the control plane runs only the StatefulSet
controller."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import E2E, scratch_cluster
from tests.support.polling import poll

pytestmark = pytest.mark.e2e

STATEFULSET = {
    "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
    "spec": {"serviceName": "db", "replicas": 3, "selector": {"matchLabels": {"app": "db"}},
             "template": {"metadata": {"labels": {"app": "db"}},
                          "spec": {"terminationGracePeriodSeconds": 2,
                                   "containers": [{"name": "db", "image": "python:3.11", "command": ["sleep", "3600"]}]}}}}


@pytest.fixture
def sts_env(tmp_path: Path) -> Iterator[E2E]:
    with scratch_cluster(tmp_path, controller=False, controlplane_args=["--controllers", "statefulset"]) as env:
        yield env


def pods(env: E2E) -> dict[str, Any]:
    return {p["metadata"]["name"]: p for p in env.kubectl.json("get", "pods", "-l", "app=db")["items"]}


def images(env: E2E) -> dict[str, str]:
    """name -> image of the running, not deleted pods."""
    return {name: p["spec"]["containers"][0]["image"] for name, p in pods(env).items()
            if not p["metadata"].get("deletionTimestamp") and p.get("status", {}).get("phase") == "Running"}


def when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def ready_at(pod: Any) -> datetime:
    return when(next(c["lastTransitionTime"] for c in pod["status"]["conditions"]
                     if c["type"] == "Ready" and c["status"] == "True"))


def rollout_status(env: E2E) -> str:
    return env.kubectl("rollout", "status", "sts/db", "--timeout=180s", timeout=200)


def test_a_statefulset_starts_in_order_scales_down_rolls_out_and_undoes(sts_env: E2E) -> None:
    env = sts_env
    env.kubectl("apply", "-f", "-", input=json.dumps(STATEFULSET))
    assert "partitioned roll out complete: 3 new pods have been updated" in rollout_status(env)  # partition 0, as kube defaults it
    poll(lambda: images(env) == {f"db-{i}": "python:3.11" for i in range(3)}, 120, "db-0, db-1 and db-2 running")
    made = pods(env)
    for lower, higher in (("db-0", "db-1"), ("db-1", "db-2")):  # each made once the one before was Ready
        assert when(made[higher]["metadata"]["creationTimestamp"]) >= ready_at(made[lower])
    labels = made["db-1"]["metadata"]["labels"]
    assert (labels["statefulset.kubernetes.io/pod-name"], labels["apps.kubernetes.io/pod-index"]) == ("db-1", "1")
    assert (made["db-1"]["spec"]["hostname"], made["db-1"]["spec"]["subdomain"]) == ("db-1", "db")
    assert env.kubectl("get", "sts", "db", "--no-headers").split()[:2] == ["db", "3/3"]

    env.kubectl("scale", "sts", "db", "--replicas=2")
    poll(lambda: set(pods(env)) == {"db-0", "db-1"}, 120, "db-2, the highest ordinal, removed")

    env.kubectl("set", "image", "sts/db", "db=python:3.12")
    assert "partitioned roll out complete: 2 new pods have been updated" in rollout_status(env)
    poll(lambda: images(env) == {"db-0": "python:3.12", "db-1": "python:3.12"}, 120, "both pods on the new image")
    history = env.kubectl("rollout", "history", "sts/db")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    revisions = env.kubectl("get", "controllerrevisions", "--no-headers").splitlines()
    assert sorted(line.split()[1:3] for line in revisions) == [["statefulset.apps/db", "1"], ["statefulset.apps/db", "2"]]

    env.kubectl("rollout", "undo", "sts/db")
    assert "partitioned roll out complete: 2 new pods have been updated" in rollout_status(env)
    poll(lambda: images(env) == {"db-0": "python:3.11", "db-1": "python:3.11"}, 120, "both pods back on the first image")
    status = env.kubectl.json("get", "sts", "db")["status"]
    assert status["currentRevision"] == status["updateRevision"]
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (2, 2, 2)

    env.kubectl("delete", "sts", "db")
    poll(lambda: not pods(env) and not env.kubectl.json("get", "controllerrevisions")["items"], 120,
         "the pods and revisions collected with the StatefulSet")
