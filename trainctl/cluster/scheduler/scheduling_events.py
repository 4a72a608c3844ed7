"""The scheduler's Events about pods, ``Scheduled`` and ``FailedScheduling``, written off the
scheduling loop.

kube-scheduler records through client-go's broadcaster: the scheduling cycle hands an Event
over and goes on, a goroutine writes it, and when the writer falls behind its buffer drops
Events rather than slowing scheduling down. This does the same with a bounded queue and one
thread, writing through :class:`trainctl.kube.events.EventRecorder` (client-go's correlator:
repeats of one message become a count on one Event, floods are rate-limited per pod and
reason). The Events name ``default-scheduler`` as their source, as ``kubectl describe`` shows.
How often a pod that still fits nowhere gets a FailedScheduling again is the caller's back-off.
"""

from __future__ import annotations

import logging
import queue
import threading
from datetime import datetime, timezone
from typing import Any, Optional

from trainctl.kube.client import KubeClient
from trainctl.kube.events import Event, EventRecorder

log = logging.getLogger(__name__)

Obj = dict[str, Any]
COMPONENT = "default-scheduler"
BUFFER = 1000  # Events waiting to be written, as client-go's broadcaster's queue


def scheduled(pod: Obj, node: str) -> Event:
    meta = pod.get("metadata") or {}
    return Event("Normal", "Scheduled", f"Successfully assigned {meta.get('namespace')}/{meta.get('name')} to {node}")


def failed_scheduling(message: str) -> Event:
    return Event("Warning", "FailedScheduling", message)


class SchedulerEvents:
    """Queues Events about pods and writes them from a thread of its own."""

    def __init__(self, client: KubeClient) -> None:
        self.recorder = EventRecorder(client)
        self.dropped = 0  # Events the full buffer turned away
        self._queue: queue.Queue[Optional[tuple[Obj, Event, datetime]]] = queue.Queue(BUFFER)
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._write, name="scheduler-events", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued (for up to ``timeout``), then stop."""
        if self._thread is None:
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            pass
        self._thread.join(timeout)
        self._thread = None

    def record(self, pod: Obj, event: Event) -> None:
        involved = {**pod, "apiVersion": "v1", "kind": "Pod"}  # informer list items may lack them
        try:
            self._queue.put_nowait((involved, event, datetime.now(timezone.utc)))
        except queue.Full:
            self.dropped += 1

    def _write(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            pod, event, now = item
            try:
                self.recorder.record(pod, event, COMPONENT, now)
            except Exception:  # an Event never stops scheduling (the recorder logs API errors itself)
                log.exception("recording %s for pod %s", event.reason, (pod.get("metadata") or {}).get("name"))
