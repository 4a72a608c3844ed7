"""List-then-watch caches of API objects, the kubelet's only way of learning about changes.

One thread per resource keeps a dict of the current objects, relists after ``410 Gone`` or a
lost connection (the API server may be killed and restarted under us), and calls back on
every change so the kubelet reacts to events instead of polling.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Optional

import urllib3.exceptions

from .client import ApiError, KubeClient, Obj

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)
Handler = Callable[[str, Obj], None]  # (event type, object)


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata", {})
    return meta.get("namespace", ""), meta["name"]


class Informer:
    """A watched, always-current copy of one collection."""

    def __init__(self, client: KubeClient, path: str, on_event: Handler, name: str) -> None:
        self._client = client
        self._path = path
        self._on_event = on_event
        self._lock = threading.Lock()
        self._objects: dict[Key, Obj] = {}
        self.synced = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"informer-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def list(self) -> list[Obj]:
        with self._lock:
            return list(self._objects.values())

    def get(self, namespace: str, name: str) -> Optional[Obj]:
        with self._lock:
            return self._objects.get((namespace, name))

    def _run(self) -> None:
        delay = 0.1
        while not self._stopped.is_set():
            try:
                resource_version = self._relist()
                self._on_event("RELISTED", {})  # what failed while disconnected may be retried now
                delay = 0.1
                while not self._stopped.is_set():
                    resource_version = self._watch(resource_version)
            except _Expired:
                continue
            except ApiError as exc:
                if exc.code == 410:
                    continue
                log.debug("watch %s: %s; relisting in %.1fs", self._path, exc, delay)
                self._stopped.wait(delay)
                delay = min(delay * 2, 2.0)
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                log.debug("watch %s: %s; relisting in %.1fs", self._path, exc, delay)
                self._stopped.wait(delay)
                delay = min(delay * 2, 2.0)

    def _relist(self) -> str:
        listing = self._client.get(self._path)
        fresh = {key_of(item): item for item in listing.get("items", [])}
        with self._lock:
            old, self._objects = self._objects, fresh
        for key, obj in old.items():
            if key not in fresh:
                self._on_event("DELETED", obj)
        for key, obj in fresh.items():
            if old.get(key, {}).get("metadata", {}).get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                self._on_event("MODIFIED" if key in old else "ADDED", obj)
        self.synced.set()
        return listing.get("metadata", {}).get("resourceVersion", "0")

    def _watch(self, resource_version: str) -> str:
        for event in self._client.watch(self._path, resource_version):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise _Expired()
                raise ApiError(int(obj.get("code") or 500), obj.get("reason", ""), obj.get("message", ""))
            resource_version = obj.get("metadata", {}).get("resourceVersion", resource_version)
            if kind == "BOOKMARK":
                continue
            with self._lock:
                if kind == "DELETED":
                    self._objects.pop(key_of(obj), None)
                else:
                    self._objects[key_of(obj)] = obj
            self._on_event(kind, obj)
            if self._stopped.is_set():
                break
        return resource_version


class _Expired(Exception):
    """The watch's resourceVersion is too old: relist."""


def wait_synced(informers: list[Informer], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    return all(i.synced.wait(max(0.0, deadline - time.monotonic())) for i in informers)
