"""Kubernetes Events about jobs (``core/v1``), as ``kubectl describe`` shows them.

Only the plan's events are recorded: the core emits them on transitions, so the cluster
does not fill with the reference's per-reconcile repeats. An Event that cannot be written
is logged and dropped; it never fails a reconcile.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timezone
from typing import Any

from trainctl.controller.kube.client import ApiError, KubeClient
from trainctl.controller.kube.resources import EVENTS
from trainctl.controller.reconcile.plan import Event

log = logging.getLogger("trainctl.controller.events")


def event_object(job: dict[str, Any], event: Event, component: str, now: datetime) -> dict[str, Any]:
    meta = job["metadata"]
    stamp = now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            # client-go names events <object>.<unique suffix>; the suffix only has to be unique.
            "name": f"{meta['name']}.{uuid.uuid4().hex[:16]}",
            "namespace": meta.get("namespace") or "default",
        },
        "involvedObject": {
            "apiVersion": job.get("apiVersion"),
            "kind": job.get("kind"),
            "namespace": meta.get("namespace"),
            "name": meta["name"],
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": event.type,
        "reason": event.reason,
        "message": event.message,
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


class EventRecorder:
    def __init__(self, client: KubeClient) -> None:
        self.client = client

    def record(self, job: dict[str, Any], event: Event, component: str, now: datetime) -> None:
        try:
            self.client.create(EVENTS, event_object(job, event, component, now))
        except ApiError as exc:
            log.warning(
                "could not record event",
                extra={"job": f"{job['metadata'].get('namespace')}/{job['metadata']['name']}", "reason": event.reason, "error": str(exc)},
            )
