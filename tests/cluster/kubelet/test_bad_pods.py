"""Pods the kubelet cannot run, as old data or a server without validation may hold them:
each fails alone with a reason, nothing is written or started outside the kubelet's
directory, and the kubelet goes on serving every other pod."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any, Iterator

import orjson
import pytest

from trainctl.cluster.apiserver.process import ApiServerHandle, start_apiserver
from trainctl.cluster.apiserver.storage.store import Store
from trainctl.cluster.network.ranges import cluster_ranges

from tests.support.pods import create, phase, pod, wait_pod

Obj = dict[str, Any]


def plant(directory: Path, objects: list[tuple[str, Obj]]) -> None:
    """Write ``(storage key, object)`` rows into a stopped API server's state.db: data the
    server stored before it validated anything, which it serves as it is."""
    directory.mkdir(parents=True, exist_ok=True)
    Store(directory / "state.db").close()  # the schema
    db = sqlite3.connect(directory / "state.db")
    with db:
        for rv, (resource, obj) in enumerate(objects, start=1):
            obj["metadata"].update(namespace="default", uid=str(uuid.uuid4()), resourceVersion=str(rv),
                                   creationTimestamp=f"2020-01-01T00:00:{rv:02d}Z")
            db.execute("INSERT INTO objects VALUES (?, ?, ?, ?, ?)",
                       (resource, "default", obj["metadata"]["name"], rv, orjson.dumps(obj)))
        db.execute("INSERT OR REPLACE INTO meta VALUES ('rv', ?)", (len(objects),))
    db.close()


@pytest.fixture
def old_objects() -> list[tuple[str, Obj]]:
    return []


@pytest.fixture
def apiserver(tmp_path: Path, old_objects: list[tuple[str, Obj]]) -> Iterator[ApiServerHandle]:
    """The kubelet tests' API server, started on a state.db that already holds ``old_objects``."""
    directory = tmp_path / "apiserver"
    plant(directory, old_objects)
    handle = start_apiserver(directory, extra_args=["--service-cidr", cluster_ranges(directory)[1]])
    try:
        yield handle
    finally:
        handle.stop()


def old_pod(name: str, script: str = "pass", container_name: str = "main", **container: Any) -> tuple[str, Obj]:
    planted = pod(name, script, **container)
    planted["spec"]["containers"][0]["name"] = container_name
    return "/pods", planted


def rejected(p: Obj) -> bool:
    return p.get("status", {}).get("reason") == "InvalidSpec"


def assert_runs_next_to_it(api, name: str = "good") -> None:
    done = wait_pod(api, create(api, pod(name, "print('served')"))["metadata"]["name"], phase("Succeeded", "Failed"))
    assert done["status"]["phase"] == "Succeeded"


BAD_SERVICE = ("/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bad-service"},
                             "spec": {"clusterIP": "127.96.0.9", "selector": {"app": "x"},
                                      "ports": [{"port": "abc"}, "not a port"]}})


@pytest.mark.parametrize("old_objects", [[old_pod("bad-port", ports=[{"containerPort": 99999}]),
                                          old_pod("old-good"), BAD_SERVICE]])
def test_a_pod_with_a_bad_port_fails_alone_and_its_neighbours_run(api):
    failed = wait_pod(api, "bad-port", rejected)
    assert failed["status"]["phase"] == "Failed"
    assert "spec.containers[0].ports[0].containerPort: Invalid value: 99999" in failed["status"]["message"]
    assert wait_pod(api, "old-good", phase("Succeeded", "Failed"))["status"]["phase"] == "Succeeded"
    assert_runs_next_to_it(api)


ESCAPES = ["../../../escaped", "a/b", ".."]


@pytest.mark.parametrize("old_objects", [[old_pod(f"escape-{i}", f"open('{i}.started', 'w')", container_name=name)
                                          for i, name in enumerate(ESCAPES)]])
def test_container_names_that_leave_the_directory_fail_the_pod_and_write_nothing(api, kubelet, tmp_path):
    for i in range(len(ESCAPES)):
        failed = wait_pod(api, f"escape-{i}", rejected)
        assert failed["status"]["phase"] == "Failed"
        assert "spec.containers[0].name: Invalid value" in failed["status"]["message"]
    assert_runs_next_to_it(api)
    written = {path for path in tmp_path.rglob("*") if path.is_file()}
    assert not [p for p in written if p.suffix == ".started" or (p.name == "0.log" and kubelet.pods_dir not in p.parents)]
    assert not list(kubelet.registry.directory.iterdir())  # nothing left running, nothing tracked
    assert not (tmp_path / "work").exists() or not list((tmp_path / "work").iterdir())


@pytest.mark.parametrize("old_objects", [[old_pod("string-command", command="python -c pass"),
                                          old_pod("object-args", args={"a": 1}),
                                          old_pod("bad-env", env=[{"name": "X", "valueFrom": {"fieldRef": "x"}}]),
                                          ("/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "no-spec"},
                                                     "spec": "garbage"}),
                                          ("/pods", {**pod("list-status", "pass"), "status": [1]})]])
def test_wrong_typed_fields_fail_the_pod_with_a_reason_and_the_kubelet_keeps_serving(api):
    for name, field in (("string-command", "spec.containers[0].command"), ("object-args", "spec.containers[0].args"),
                        ("bad-env", "spec.containers[0].env[0].valueFrom.fieldRef")):
        failed = wait_pod(api, name, rejected)
        assert failed["status"]["phase"] == "Failed"
        assert f"{field}: Invalid value" in failed["status"]["message"], failed["status"]["message"]
    # (no-spec and list-status are rejected too, but the API server cannot store a status on
    # a pod like that, nor NodeRestriction tell the node of a pod whose status is a list)
    assert_runs_next_to_it(api)
    assert_runs_next_to_it(api, "good-again")
