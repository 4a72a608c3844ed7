"""A list-then-watch loop on plain dicts that sidesteps the Python client's watch pitfalls.

``kubernetes.watch.Watch`` does not advance its resourceVersion on BOOKMARK events, never
advances it with ``deserialize=False`` (so a reconnect replays old events), and leaves the
re-list after 410 Gone to the caller. This loop does all three itself: it lists, watches
from the list's resourceVersion, advances on every event including bookmarks, resumes
when the server closes the stream, re-lists on 410 and turns the difference into events,
and can be stopped from another thread at once (the socket is shut down, not drained).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

# What a watch callback receives: ("ADDED" | "MODIFIED" | "DELETED", object).
EventHandler = Callable[[str, dict[str, Any]], None]

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
CONNECT_TIMEOUT_SECONDS = 10.0


class WatchExpired(Exception):
    """The server no longer has the resourceVersion we resume from (410 Gone)."""


def iter_lines(response: Any) -> Iterator[str]:
    """The lines of a streamed HTTP body as they arrive; blank lines are kept."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=True):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", errors="replace")
    if buffer:
        yield buffer.decode("utf-8", errors="replace")


def shutdown(response: Any) -> None:
    """Unblock a thread reading ``response``: shutdown() interrupts a blocked read, close() may not."""
    try:
        getattr(response, "shutdown", response.close)()
    except Exception:  # already closed or never connected: nothing to interrupt
        pass


class ResourceWatch:
    """Follows the objects one list call returns and reports every change to ``on_event``.

    ``list_call`` is a bound ``list_namespaced_*`` method with its selectors already applied
    (``functools.partial``); it is called with ``_preload_content=False``, so objects stay
    plain dicts. ``on_synced`` is called after each (re-)list has been reported. ``run`` blocks until ``stop`` is called; an error that retrying cannot fix
    (403, 404 …) is raised from ``run``.
    """

    def __init__(
        self,
        list_call: Callable[..., Any],
        on_event: EventHandler,
        *,
        on_synced: Callable[[], None] | None = None,
        timeout_seconds: int = 300,
    ) -> None:
        self._list_call = list_call
        self._on_event = on_event
        self._on_synced = on_synced
        self._timeout_seconds = timeout_seconds
        self._objects: dict[str, dict[str, Any]] = {}
        self._stopped = threading.Event()
        self._response: Any = None
        self._lock = threading.Lock()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    @property
    def objects(self) -> list[dict[str, Any]]:
        """The objects as of the last event reported (read it from ``on_event``/``on_synced``)."""
        return list(self._objects.values())

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            response = self._response
        if response is not None:
            shutdown(response)

    def run(self) -> None:
        resource_version: str | None = None
        backoff = 0.1
        while not self._stopped.is_set():
            try:
                if resource_version is None:
                    resource_version = self._relist()
                resource_version = self._watch(resource_version)
                backoff = 0.1
            except WatchExpired:
                resource_version = None
            except ApiException as exc:
                if self._stopped.is_set():
                    return
                if exc.status == 410:
                    resource_version = None
                elif exc.status in RETRYABLE_STATUS:
                    self._stopped.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
                else:
                    raise
            except (urllib3.exceptions.HTTPError, OSError, ValueError):
                # Connection refused or cut mid-stream, or a torn JSON line: resume.
                if self._stopped.is_set():
                    return
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _call(self, **kwargs: Any) -> Any:
        response = self._list_call(_preload_content=False, **kwargs)
        with self._lock:
            self._response = response
        if self._stopped.is_set():
            shutdown(response)
        return response

    def _relist(self) -> str:
        response = self._call(_request_timeout=(CONNECT_TIMEOUT_SECONDS, 60.0))
        try:
            listing = json.loads(response.data)
        finally:
            response.release_conn()
        current = {_key(obj): obj for obj in listing.get("items") or []}
        for key, obj in current.items():
            previous = self._objects.get(key)
            if previous is None:
                self._emit("ADDED", obj)
            elif _rv(previous) != _rv(obj):
                self._emit("MODIFIED", obj)
        for key in set(self._objects) - set(current):
            self._emit("DELETED", self._objects[key])
        if self._on_synced is not None:
            self._on_synced()
        return (listing.get("metadata") or {}).get("resourceVersion") or ""

    def _watch(self, resource_version: str) -> str:
        response = self._call(
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=resource_version,
            timeout_seconds=self._timeout_seconds,
            _request_timeout=(CONNECT_TIMEOUT_SECONDS, self._timeout_seconds + 30.0),
        )
        try:
            for line in iter_lines(response):
                if self._stopped.is_set():
                    break
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise WatchExpired()
                    raise ApiException(status=obj.get("code") or 500, reason=obj.get("message"))
                resource_version = _rv(obj) or resource_version
                if kind != "BOOKMARK":
                    self._emit(kind, obj)
        finally:
            response.release_conn()
        return resource_version

    def _emit(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            self._objects.pop(_key(obj), None)
        else:
            self._objects[_key(obj)] = obj
        if not self._stopped.is_set():
            self._on_event(kind, obj)


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _rv(obj: dict[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion") or ""
