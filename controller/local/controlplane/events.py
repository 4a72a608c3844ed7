"""Events that repeat are counted, not multiplied, as client-go's event correlator does.

An HPA whose metrics are missing reports the same Warning every sync (every 15 s). On a
real cluster ``kubectl describe`` then shows one line, ``(x12 over 3m)``, because the
recorder remembers the Events it wrote (the last 4096) and patches the existing Event's
``count`` and ``lastTimestamp`` when the same object, type, reason and message recur. This
recorder does the same, so an idle cluster does not fill with copies.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trainctl.controller.kube.client import ApiError, KubeClient
from trainctl.controller.kube.events import event_object
from trainctl.controller.kube.resources import EVENTS
from trainctl.controller.local.controlplane.units import format_time
from trainctl.controller.reconcile.plan import Event

log = logging.getLogger("trainctl.controlplane.events")

CACHE_SIZE = 4096
EventKey = tuple[str, str, str, str, str, str]  # (component, object uid, name, type, reason, message)


@dataclass(frozen=True)
class _Recorded:
    namespace: str
    name: str
    count: int


class CountingEventRecorder:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._recent: dict[EventKey, _Recorded] = {}
        self._lock = threading.Lock()

    def record(self, obj: dict[str, Any], event: Event, component: str, now: datetime) -> None:
        meta = obj["metadata"]
        key: EventKey = (component, meta.get("uid") or "", meta["name"], event.type, event.reason, event.message)
        with self._lock:
            previous = self._recent.pop(key, None)
        recorded = None
        try:
            if previous is not None:
                recorded = self._count(previous, now)
            if recorded is None:
                body = event_object(obj, event, component, now)
                self.client.create(EVENTS, body)
                recorded = _Recorded(body["metadata"]["namespace"], body["metadata"]["name"], 1)
        except ApiError as exc:
            log.warning("could not record event", extra={"object": meta["name"], "reason": event.reason, "error": str(exc)})
            return
        with self._lock:
            self._recent[key] = recorded  # re-inserted: the dict's order is least recently used first
            while len(self._recent) > CACHE_SIZE:
                del self._recent[next(iter(self._recent))]

    def _count(self, previous: "_Recorded", now: datetime) -> "_Recorded | None":
        """One more occurrence on the existing Event; None when that Event is gone (expired)."""
        count = previous.count + 1
        try:
            self.client.patch(EVENTS, previous.namespace, previous.name, {"count": count, "lastTimestamp": format_time(now)})
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        return _Recorded(previous.namespace, previous.name, count)
