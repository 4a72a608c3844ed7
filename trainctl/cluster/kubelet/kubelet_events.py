"""The kubelet's Events: what happens to containers (``kubectl describe pod``) and to the node.

A real kubelet tells users through Events what its status fields cannot: ``Pulled``,
``Created``, ``Started``, ``Killing``, ``BackOff``, ``Failed`` about each container
(``involvedObject.fieldPath: spec.containers{name}``), and ``Starting``, ``NodeReady`` /
``NodeNotReady`` about its node, whose reference carries the node's name as its uid (so
``kubectl describe node`` finds them). The source is ``kubelet`` on the node's host, as
client-go's recorder writes it (``source``, ``reportingComponent``, ``reportingInstance``).

Writes are bounded as client-go bounds them: every Event goes through the controller's
:class:`~trainctl.kube.events.EventRecorder` (repeats counted by PATCH, similar Events
combined, a token bucket per object and reason), so a container crash-looping for days
costs a handful of writes per reason, not one per restart. They are written from a thread
of their own through a queue of at most ``QUEUE_SIZE`` Events (client-go's broadcaster's
length): a pod's containers never wait on the API server, and when the queue is full an
Event is dropped, as client-go drops it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from datetime import datetime, timezone
from typing import Any, Optional

from trainctl.kube.client import KubeClient
from trainctl.kube.events import Event, EventRecorder

log = logging.getLogger(__name__)

Obj = dict[str, Any]
COMPONENT = "kubelet"
QUEUE_SIZE = 1000
NORMAL, WARNING = "Normal", "Warning"


def container_field_path(pod: Obj, container: str) -> str:
    """``spec.containers{name}`` or ``spec.initContainers{name}``, as the kubelet references them."""
    init = {c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []}
    return f"spec.initContainers{{{container}}}" if container in init else f"spec.containers{{{container}}}"


def pod_label(pod: Obj) -> str:
    """``name_namespace(uid)``, the kubelet's way of naming a pod in messages."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('name')}_{meta.get('namespace') or 'default'}({meta.get('uid')})"


class KubeletEvents:
    """Records the Events of one node's kubelet, in the background."""

    def __init__(self, client: KubeClient, node_name: str) -> None:
        self.node_name = node_name
        self.recorder = EventRecorder(client)
        self._queue: queue.Queue[Optional[tuple[Obj, Event, str, datetime]]] = queue.Queue(QUEUE_SIZE)
        self.dropped = 0  # Events the full queue could not take
        self._thread = threading.Thread(target=self._write, name="kubelet-events", daemon=True)
        self._thread.start()

    def node_reference(self) -> Obj:
        # The kubelet names its node by name in the uid too (kubectl describe node looks for both).
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.node_name, "uid": self.node_name}}

    def container(self, pod: Obj, container: str, type_: str, reason: str, message: str) -> None:
        self._put(pod, Event(type_, reason, message), container_field_path(pod, container))

    def pod(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        self._put(pod, Event(type_, reason, message), "")

    def node(self, type_: str, reason: str, message: str) -> None:
        self._put(self.node_reference(), Event(type_, reason, message), "")

    def _put(self, obj: Obj, event: Event, field_path: str) -> None:
        try:
            self._queue.put_nowait((obj, event, field_path, datetime.now(timezone.utc)))
        except queue.Full:
            self.dropped += 1

    def _write(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                obj, event, field_path, now = item
                self.recorder.record(obj, event, COMPONENT, now, host=self.node_name, field_path=field_path)
            except Exception:  # an Event must never stop the ones after it
                log.exception("recording an event")
            finally:
                self._queue.task_done()

    def flush(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until what was recorded so far is written."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.02)

    def stop(self, timeout: float = 2.0) -> None:
        """Write what is queued (at most ``timeout`` seconds), then stop."""
        self.flush(timeout)
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            return  # the writer is stuck on the API server; it is a daemon thread
        self._thread.join(timeout=1.0)
