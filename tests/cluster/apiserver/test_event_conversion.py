"""``core/v1`` and ``events.k8s.io/v1`` Events: the conversion on plain dicts, and one store
seen through both versions of a real API server."""

from __future__ import annotations

import json
import sqlite3

import pytest
import requests

from trainctl.cluster.apiserver.apimachinery.event_conversion import to_core, to_events
from trainctl.cluster.apiserver.process import start_apiserver
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import EVENTS, Resource

EVENTS_V1 = Resource("events.k8s.io", "v1", "events", "Event")

CORE = {
    "apiVersion": "v1", "kind": "Event",
    "metadata": {"name": "crash.1", "namespace": "default", "resourceVersion": "7"},
    "involvedObject": {"kind": "Pod", "namespace": "default", "name": "crash", "uid": "u1",
                       "apiVersion": "v1", "fieldPath": "spec.containers{main}"},
    "related": {"kind": "Node", "name": "n1"},
    "reason": "BackOff", "message": "Back-off restarting failed container main", "type": "Warning",
    "action": "Restarting", "source": {"component": "kubelet", "host": "n1"},
    "reportingComponent": "kubelet", "reportingInstance": "n1",
    "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:05:00Z", "count": 4,
    "eventTime": "2026-01-01T00:00:00.000000Z",
    "series": {"count": 4, "lastObservedTime": "2026-01-01T00:05:00.000000Z"},
}
EVENTS_FORM = {
    "apiVersion": "events.k8s.io/v1", "kind": "Event",
    "metadata": CORE["metadata"], "regarding": CORE["involvedObject"], "related": CORE["related"],
    "reason": "BackOff", "note": "Back-off restarting failed container main", "type": "Warning",
    "action": "Restarting", "deprecatedSource": {"component": "kubelet", "host": "n1"},
    "reportingController": "kubelet", "reportingInstance": "n1",
    "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z", "deprecatedLastTimestamp": "2026-01-01T00:05:00Z",
    "deprecatedCount": 4, "eventTime": CORE["eventTime"], "series": CORE["series"],
}


def test_every_field_converts_both_ways():
    assert to_events(CORE) == EVENTS_FORM
    assert to_core(EVENTS_FORM) == CORE


def test_a_sparse_event_keeps_only_what_it_has():
    core = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x"}, "involvedObject": {"name": "p"},
            "reason": "Started", "message": "Started container main"}
    assert to_events(core) == {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "x"},
                               "regarding": {"name": "p"}, "reason": "Started", "note": "Started container main"}
    assert to_core(to_events(core)) == core


def test_an_event_already_in_the_version_is_left_as_it_is():
    assert to_events(EVENTS_FORM) is EVENTS_FORM


@pytest.fixture
def kube(apiserver):
    client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0, max_attempts=1)
    yield client
    client.close()


def _core_event(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "crash", "uid": "u1"},
            "reason": "BackOff", "message": "Back-off restarting failed container main", "type": "Warning",
            "source": {"component": "kubelet", "host": "n1"}, "reportingComponent": "kubelet",
            "reportingInstance": "n1", "count": 1, "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:00Z"}


def test_one_store_through_both_versions(kube):
    core = kube.create(EVENTS, _core_event("crash.1")).object
    seen = kube.get(EVENTS_V1, "default", "crash.1")
    assert seen["apiVersion"] == "events.k8s.io/v1"
    assert seen["metadata"]["resourceVersion"] == core["metadata"]["resourceVersion"]
    assert (seen["regarding"]["name"], seen["note"], seen["deprecatedCount"], seen["reportingController"]) == (
        "crash", "Back-off restarting failed container main", 1, "kubelet")

    # A repeat counted through events.k8s.io (a core Event has no eventTime: none is required of the update).
    patched = kube.patch(EVENTS_V1, "default", "crash.1", {"deprecatedCount": 2, "deprecatedLastTimestamp": "2026-01-01T00:01:00Z"})
    assert patched["deprecatedCount"] == 2
    again = kube.get(EVENTS, "default", "crash.1")
    assert (again["count"], again["lastTimestamp"]) == (2, "2026-01-01T00:01:00Z")
    assert again["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]

    created = kube.create(EVENTS_V1, {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "new.1", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "example.com/ctl",
        "reportingInstance": "ctl-1", "action": "Scaling", "reason": "Scaled", "type": "Normal",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "other"}, "note": "scaled"}).object
    as_core = kube.get(EVENTS, "default", "new.1")
    assert (as_core["message"], as_core["involvedObject"]["name"], as_core["reportingComponent"]) == (
        "scaled", "other", "example.com/ctl")

    core_items, _ = kube.list(EVENTS, "default")
    events_items, _ = kube.list(EVENTS_V1, "default")
    assert [e["metadata"]["name"] for e in core_items] == [e["metadata"]["name"] for e in events_items] == ["crash.1", "new.1"]

    by_regarding, _ = kube.list(EVENTS_V1, "default", field_selector="regarding.name=other")
    by_involved, _ = kube.list(EVENTS, "default", field_selector="involvedObject.name=other,source=example.com/ctl")
    assert [e["metadata"]["name"] for e in by_regarding] == [e["metadata"]["name"] for e in by_involved] == ["new.1"]
    by_controller, _ = kube.list(EVENTS_V1, "default", field_selector="reportingController=kubelet")
    assert [e["metadata"]["name"] for e in by_controller] == ["crash.1"]
    with pytest.raises(ApiError) as refused:  # core/v1 has no such field, as in kube
        kube.list(EVENTS, "default", field_selector="regarding.name=other")
    assert refused.value.code == 400

    kube.delete(EVENTS_V1, "default", "crash.1")
    assert kube.get_or_none(EVENTS, "default", "crash.1") is None
    assert created["metadata"]["uid"] == as_core["metadata"]["uid"]


def test_a_watch_through_events_k8s_io_sees_core_writes(kube):
    _, version = kube.list(EVENTS_V1, "default")
    kube.create(EVENTS, _core_event("watched.1"))
    for event in kube.watch(EVENTS_V1, "default", version, timeout_seconds=10):
        assert event["type"] == "ADDED"
        assert event["object"]["apiVersion"] == "events.k8s.io/v1"
        assert event["object"]["note"] == "Back-off restarting failed container main"
        break
    else:
        raise AssertionError("no watch event")


def test_events_an_earlier_server_kept_apart_join_the_one_store(tmp_path):
    """Earlier servers stored ``events.k8s.io`` Events under a key of their own, which no
    version reads now (and a namespace holding one could never finish deleting)."""
    data_dir = tmp_path / "apiserver"
    server = start_apiserver(data_dir)
    try:
        server.stop()
        old = {**to_events(_core_event("kept.1")), "metadata": {"name": "kept.1", "namespace": "default", "uid": "u9",
                                                                "resourceVersion": "1"}}
        db = sqlite3.connect(str(data_dir / "state.db"))
        db.execute("INSERT INTO objects VALUES ('events.k8s.io/events', 'default', 'kept.1', 1, ?)", (json.dumps(old).encode(),))
        db.commit()
        db.close()
        server.start()
        kube = KubeClient.from_kubeconfig(str(server.kubeconfig), qps=0, max_attempts=1)
        try:
            moved = kube.get(EVENTS, "default", "kept.1")
            assert (moved["message"], moved["metadata"]["uid"]) == ("Back-off restarting failed container main", "u9")
            assert kube.get(EVENTS_V1, "default", "kept.1")["note"] == moved["message"]
        finally:
            kube.close()
        server.stop()
        db = sqlite3.connect(str(data_dir / "state.db"))
        assert db.execute("SELECT count(*) FROM objects WHERE resource = 'events.k8s.io/events'").fetchone() == (0,)
        db.close()
    finally:
        server.stop()


def test_the_one_store_is_counted_once_under_the_core_name(apiserver, kube):
    kube.create(EVENTS, _core_event("counted.1"))
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {apiserver.token}"
    text = session.get(f"{apiserver.url}/metrics", verify=str(apiserver.ca_cert), timeout=10).text
    session.close()
    assert 'apiserver_storage_objects{resource="events"} 1.0' in text
    assert 'resource="events.events.k8s.io"' not in text
