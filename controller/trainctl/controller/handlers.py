"""Which watch events enqueue which job keys (controller-runtime's event handlers).

- A job's own event enqueues the job; its deletion first drops what the shell remembers
  about it (``on_job_gone``), so a job created again under the name starts clean.
- A child's event enqueues its controlling job: a deletion at once, any other change after
  ``child_update_batch_period``, so a burst of pod updates becomes one reconcile.
- A Node that became not Ready (or Ready again) enqueues, at once, the jobs with pods on it,
  for the lost-node rule; a heartbeat or a label change enqueues nothing.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from trainctl.controller.caches import Caches
from trainctl.controller.keys import JobKey
from trainctl.controller.reconcile import nodes
from trainctl.kube.workqueue import WorkQueue


class EventHandlers:
    """The handlers of the caches' informers, feeding the work queue."""

    def __init__(
        self,
        caches: Caches,
        queue: WorkQueue[JobKey],
        *,
        child_update_batch_period: float,
        on_job_gone: Callable[[JobKey], None],
    ) -> None:
        self.caches = caches
        self.queue = queue
        self.child_update_batch_period = child_update_batch_period
        self.on_job_gone = on_job_gone

    def register(self) -> None:
        caches = self.caches
        caches.node_informer.add_handler(self.on_node)
        for informer in caches.job_informers.values():
            informer.add_handler(self.on_job)
        caches.on_child_change(self.on_child)

    def on_job(self, event_type: str, new: Optional[dict[str, Any]], old: Optional[dict[str, Any]]) -> None:
        obj = new or old
        assert obj is not None
        key = JobKey.of(obj)
        if event_type == "DELETED":
            self.on_job_gone(key)
        self.queue.add(key)

    def on_child(self, event_type: str, new: Optional[dict[str, Any]], old: Optional[dict[str, Any]]) -> None:
        obj = new or old
        assert obj is not None
        key = JobKey.owner_of(obj)
        if key is None:
            return
        if event_type == "DELETED":
            self.queue.add(key)
        else:
            self.queue.add_after(key, self.child_update_batch_period)

    def on_node(self, event_type: str, new: Optional[dict[str, Any]], old: Optional[dict[str, Any]]) -> None:
        if new is not None and old is not None and nodes.not_ready(new) == nodes.not_ready(old):
            return  # a heartbeat or a label: nothing the lost-node rule looks at
        name = (new or old or {}).get("metadata", {}).get("name")
        for pod in self.caches.pods_on(name):
            self.on_child("DELETED", pod, None)  # at once, not batched
