"""Informers: a local cache of one resource, kept current by list + watch.

The Python client has no informer (client-surface notes §3.2), and its ``Watch`` helper
mishandles bookmarks and, with raw dicts, replays old events on reconnect. So this module
drives the protocol itself:

1. LIST (paginated), replace the cache, and synthesise the events the cache missed
   (including deletes) by diffing; remember the list's resourceVersion.
2. WATCH from that resourceVersion with bookmarks; every event, bookmarks included,
   advances the resourceVersion, so a reconnect resumes exactly where the stream stopped
   and never replays stale events.
3. A stream that ends or breaks is re-watched from the last resourceVersion; ``410 Gone``
   (as an HTTP status or as an ERROR event) goes back to step 1.

The cache keeps objects as dicts (``managedFields`` dropped) with an index by controller
owner uid, which is how the manager finds a job's children.

A controller keeps trying whatever the error (RBAC or a CRD may appear later); a caller that
would rather know, like the launcher, passes ``on_error`` and the informer stops at the
first error retrying cannot fix (401, 403, 404, 422 …) and hands it over.
"""

from __future__ import annotations

import builtins
import logging
import random
import threading
from typing import Any, Callable, Iterable, Optional

from trainctl.kube.client import ApiError, KubeClient, WatchStream
from trainctl.kube.restmapper import Resource, controller_owner

log = logging.getLogger("trainctl.controller.informer")

ObjectKey = tuple[str, str]  # (namespace, name)
# handler(event_type, new_object, old_object); event types ADDED / MODIFIED / DELETED.
Handler = Callable[[str, Optional[dict[str, Any]], Optional[dict[str, Any]]], None]


def _rv_number(obj: dict[str, Any]) -> Optional[int]:
    rv = (obj.get("metadata") or {}).get("resourceVersion") or ""
    return int(rv) if rv.isdigit() else None


def is_newer(candidate: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether ``candidate`` is a later version of ``current``.

    resourceVersions are opaque by contract but are integers on every real server; when
    both are integers they are compared, otherwise the candidate wins (as in client-go).
    """
    a, b = _rv_number(candidate), _rv_number(current)
    if a is None or b is None:
        candidate_rv: Optional[str] = candidate["metadata"].get("resourceVersion")
        current_rv: Optional[str] = current["metadata"].get("resourceVersion")
        return candidate_rv != current_rv
    return a > b


class Store:
    """Objects by (namespace, name), indexed by controller-owner uid. Thread-safe."""

    def __init__(self, keep: Optional[Callable[[dict[str, Any]], bool]] = None) -> None:
        self._objects: dict[ObjectKey, dict[str, Any]] = {}
        self._by_owner: dict[str, set[ObjectKey]] = {}
        self._keep = keep
        self._lock = threading.Lock()

    @staticmethod
    def key(obj: dict[str, Any]) -> ObjectKey:
        meta = obj["metadata"]
        return meta.get("namespace") or "", meta["name"]

    def get(self, namespace: str, name: str) -> Optional[dict[str, Any]]:
        with self._lock:
            return self._objects.get((namespace, name))

    # Past this method, ``list`` in an annotation means it: they spell the type ``builtins.list``.
    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._objects.values())

    def owned_by(self, uid: str) -> builtins.list[dict[str, Any]]:
        with self._lock:
            return [self._objects[k] for k in self._by_owner.get(uid, ()) if k in self._objects]

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def upsert(self, obj: dict[str, Any], only_if_newer: bool = False) -> tuple[bool, Optional[dict[str, Any]]]:
        """Store ``obj``; returns (changed, previous). Objects the filter rejects are removed."""
        (obj.get("metadata") or {}).pop("managedFields", None)
        key = self.key(obj)
        with self._lock:
            old = self._objects.get(key)
            if old is not None:
                if only_if_newer and not is_newer(obj, old):
                    return False, old
                if old["metadata"].get("resourceVersion") == obj["metadata"].get("resourceVersion"):
                    return False, old
            if self._keep is not None and not self._keep(obj):
                if old is not None:
                    self._remove_locked(key)
                    return True, old
                return False, None
            if old is not None:
                self._unindex_locked(key, old)
            self._objects[key] = obj
            owner = controller_owner(obj)
            if owner and owner.get("uid"):
                self._by_owner.setdefault(owner["uid"], set()).add(key)
            return True, old

    def delete(self, obj: dict[str, Any]) -> Optional[dict[str, Any]]:
        with self._lock:
            return self._remove_locked(self.key(obj))

    def _remove_locked(self, key: ObjectKey) -> Optional[dict[str, Any]]:
        old = self._objects.pop(key, None)
        if old is not None:
            self._unindex_locked(key, old)
        return old

    def _unindex_locked(self, key: ObjectKey, obj: dict[str, Any]) -> None:
        owner = controller_owner(obj)
        if owner and owner.get("uid"):
            keys = self._by_owner.get(owner["uid"])
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_owner[owner["uid"]]

    def replace(self, objects: Iterable[dict[str, Any]]) -> builtins.list[tuple[str, Optional[dict[str, Any]], Optional[dict[str, Any]]]]:
        """Replace the whole content (after a LIST); returns the events that implies."""
        events: list[tuple[str, Optional[dict[str, Any]], Optional[dict[str, Any]]]] = []
        seen: set[ObjectKey] = set()
        for obj in objects:
            seen.add(self.key(obj))
            changed, old = self.upsert(obj, only_if_newer=True)
            if changed:
                kept = self.get(*self.key(obj)) is not None
                if kept:
                    events.append(("ADDED" if old is None else "MODIFIED", obj, old))
                elif old is not None:
                    events.append(("DELETED", None, old))
        with self._lock:
            gone = [k for k in self._objects if k not in seen]
        for key in gone:
            with self._lock:
                old = self._remove_locked(key)
            if old is not None:
                events.append(("DELETED", None, old))
        return events


class Informer:
    """List + watch one resource into a :class:`Store`, calling handlers on every change."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        namespace: Optional[str] = None,
        label_selector: Optional[str] = None,
        field_selector: Optional[str] = None,
        keep: Optional[Callable[[dict[str, Any]], bool]] = None,
        watch_timeout: int = 300,
        retry_delay: float = 0.2,
        max_retry_delay: float = 10.0,
        on_synced: Optional[Callable[[], None]] = None,
        on_error: Optional[Callable[[ApiError], None]] = None,
    ) -> None:
        """``on_synced`` runs after every (re)list has been handed to the handlers."""
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.store = Store(keep)
        self.watch_timeout = watch_timeout
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.on_synced = on_synced
        self.on_error = on_error
        self.synced = threading.Event()
        self._handlers: list[Handler] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.resource_version = ""
        self.relists = 0
        self._stream: Optional[WatchStream] = None
        self._delivered = False

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.resource.plural}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()

    def _emit(self, event_type: str, new: Optional[dict[str, Any]], old: Optional[dict[str, Any]]) -> None:
        for handler in self._handlers:
            try:
                handler(event_type, new, old)
            except Exception:  # a broken handler must not kill the informer
                log.exception("informer handler failed", extra={"resource": self.resource.plural})

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            self._delivered = False
            try:
                if not self.resource_version:
                    self._relist()
                self._watch_once()
                failures = 0
            except ApiError as exc:
                if self._stop.is_set():
                    return
                if exc.code == 410:
                    log.info("watch expired, relisting", extra={"resource": self.resource.plural})
                    self.resource_version = ""
                    continue
                if self.on_error is not None and not exc.retryable:
                    self._stop.set()
                    self.on_error(exc)
                    return
                # A stream that delivered events before it broke was progress, not a failure
                # streak: only consecutive fruitless attempts back off and end in a relist.
                failures = 1 if self._delivered else failures + 1
                if failures >= 5:
                    self.resource_version = ""  # persistent trouble: start over from a list
                delay = min(self.max_retry_delay, self.retry_delay * (2 ** min(failures, 6))) * random.uniform(0.5, 1.0)
                log.info(
                    "watch interrupted, reconnecting",
                    extra={"resource": self.resource.plural, "error": str(exc), "retry_in": round(delay, 3)},
                )
                self._stop.wait(delay)
            except Exception:
                log.exception("informer loop failed", extra={"resource": self.resource.plural})
                self.resource_version = ""
                self._stop.wait(1.0)

    def _relist(self) -> None:
        items, rv = self.client.list(
            self.resource, self.namespace, label_selector=self.label_selector, field_selector=self.field_selector
        )
        self.relists += 1
        for event_type, new, old in self.store.replace(items):
            self._emit(event_type, new, old)
        self.resource_version = rv
        self.synced.set()
        if self.on_synced is not None:
            self.on_synced()

    def _watch_once(self) -> None:
        timeout = int(self.watch_timeout * random.uniform(1.0, 1.5))
        stream = self.client.watch(
            self.resource,
            self.namespace,
            self.resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=timeout,
        )
        self._stream = stream
        if self._stop.is_set():
            stream.close()
        for event in stream:
            if self._stop.is_set():
                return
            self._delivered = True
            event_type = event.get("type")
            obj = event.get("object") or {}
            if event_type == "ERROR":
                code = obj.get("code") or 0
                raise ApiError(code, obj.get("reason") or "", obj.get("message") or "watch error")
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if event_type == "BOOKMARK":
                if rv:
                    self.resource_version = rv
                continue
            if event_type in ("ADDED", "MODIFIED"):
                obj.setdefault("kind", self.resource.kind)
                obj.setdefault("apiVersion", self.resource.api_version)
                changed, old = self.store.upsert(obj, only_if_newer=True)
                if changed:
                    kept = self.store.get(*Store.key(obj)) is not None
                    if kept:
                        self._emit("ADDED" if old is None else "MODIFIED", obj, old)
                    elif old is not None:
                        self._emit("DELETED", None, old)
            elif event_type == "DELETED":
                old = self.store.delete(obj)
                if old is not None:
                    self._emit("DELETED", None, old)
            if rv:
                self.resource_version = rv
