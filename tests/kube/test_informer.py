"""Informers against the real API server: cut streams and expired resourceVersions."""

from __future__ import annotations

import ssl
import threading

from kubernetes import client as k8s_client

from trainctl.kube.client import KubeClient
from trainctl.kube.informer import Informer
from trainctl.kube.restmapper import SERVICES

from tests.support.faultproxy import FaultProxy


def service(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "informer-test"}},
        "spec": {"clusterIP": "None", "selector": {"app": name}},
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self._cond = threading.Condition()

    def __call__(self, event_type, new, old) -> None:
        with self._cond:
            self.events.append((event_type, (new or old)["metadata"]["name"]))
            self._cond.notify_all()

    def wait_for(self, predicate, timeout: float = 30) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: predicate(self.events), timeout), self.events


def test_cut_watch_streams_resume_without_replaying_events(apiserver, kube):
    tls = ssl.create_default_context(cafile=kube.configuration.ssl_ca_cert)
    with FaultProxy(apiserver.url, drop_watch_after=2, ssl_context=tls) as proxy:
        configuration = k8s_client.Configuration()
        configuration.host = proxy.url
        configuration.api_key = {"authorization": f"Bearer {apiserver.token}"}
        informer = Informer(
            KubeClient(configuration, qps=0), SERVICES, namespace="default", label_selector="app=informer-test", retry_delay=0.01
        )
        seen = Recorder()
        informer.add_handler(seen)
        informer.start()
        try:
            assert informer.synced.wait(30)
            for i in range(16):
                kube.create(SERVICES, service(f"svc-{i}"))
            seen.wait_for(lambda events: len({n for t, n in events if t == "ADDED"}) == 16)
            kube.delete(SERVICES, "default", "svc-3")
            seen.wait_for(lambda events: ("DELETED", "svc-3") in events)
        finally:
            informer.stop()
        assert proxy.dropped_watches >= 3
    assert informer.relists == 1, "cut streams that made progress must resume, not relist"
    added = [n for t, n in seen.events if t == "ADDED"]
    assert sorted(added) == sorted(f"svc-{i}" for i in range(16)), "an event was replayed after a reconnect"
    assert sorted(o["metadata"]["name"] for o in informer.store.list()) == sorted(f"svc-{i}" for i in range(16) if i != 3)


def test_expired_resource_version_relists_and_catches_up(apiserver, kube):
    """An API server restart expires every resourceVersion: the informer relists (410) and
    the diff against its cache produces the events it missed."""
    informer = Informer(kube, SERVICES, namespace="default", label_selector="app=informer-test", retry_delay=0.01)
    seen = Recorder()
    informer.add_handler(seen)
    for i in range(3):
        kube.create(SERVICES, service(f"keep-{i}"))
    informer.start()
    try:
        assert informer.synced.wait(30)
        seen.wait_for(lambda events: len(events) == 3)
        apiserver.restart()
        kube.delete(SERVICES, "default", "keep-1")
        kube.create(SERVICES, service("new-0"))
        seen.wait_for(lambda events: ("DELETED", "keep-1") in events and ("ADDED", "new-0") in events)
    finally:
        informer.stop()
    assert informer.relists >= 2
    assert sorted(o["metadata"]["name"] for o in informer.store.list()) == ["keep-0", "keep-2", "new-0"]
    assert seen.events.count(("ADDED", "keep-0")) == 1
