"""Turning a Plan into API calls, in the order that keeps Events and counters honest.

Children first (creates, updates, then, once a hung job's stacks are dumped and kept,
deletes), then the status, then, only once the status is
persisted, the deletion the plan asks for (TTL) and the plan's Events and counters: they
therefore count only transitions the API server has. One line per applied plan goes to the
log; any failure is raised as :class:`ApplyError` after everything else was tried, and the
worker re-queues the job with back-off.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Optional

from trainctl.controller.child_writer import ChildApplier, Done
from trainctl.controller.keys import JobKey
from trainctl.controller.reconcile import node_check
from trainctl.controller.reconcile.children import rfc3339
from trainctl.controller.reconcile.plan import NodeTaint, Plan
from trainctl.controller.recorder import JobRecorder
from trainctl.controller.stack_capture import StackCapturer
from trainctl.controller.status_writer import StatusWriter
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient

log = logging.getLogger("trainctl.controller")

_TAINT_ATTEMPTS = 5


class ApplyError(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors[:5]) + (f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""))
        self.errors = errors


class PlanApplier:
    """Applies one job's plan through the children, status and recorder parts."""

    def __init__(self, client: KubeClient, children: ChildApplier, status: StatusWriter, recorder: JobRecorder,
                 stacks: Optional[StackCapturer] = None) -> None:
        self.client = client
        self.children = children
        self.status = status
        self.recorder = recorder
        self.stacks = stacks or StackCapturer(client)

    def apply(self, key: JobKey, job: dict[str, Any], plan: Plan, now: datetime) -> None:
        tainted = self._taint_all(plan.taints, now)
        created = self.children.create_all(key, job, plan.creates)
        updated = self.children.update_all(plan.updates)
        for capture in plan.stack_captures:
            # A capture that fails must not hold the restart up: the hang is the worse fault.
            for error in self.stacks.capture(capture):
                log.warning("stacks of a hung job not kept", extra={"job": key.namespaced_name, "error": error})
        deleted = self.children.delete_all(key, job, plan.deletes)
        status = self.status.apply(key, job, plan)
        job_deleted = self._delete_job(key, job) if plan.delete_job and status.persisted else Done()
        if status.persisted:
            self.recorder.record_plan(key, job, plan, job_deleted=job_deleted.succeeded > 0, now=now)
        errors = [*tainted.errors, *created.errors, *updated.errors, *deleted.errors, *([status.error] if status.error else []), *job_deleted.errors]
        log.info(
            "applied plan",
            extra={
                "job": key.namespaced_name,
                "kind": key.kind,
                "taints": tainted.succeeded,
                "creates": created.succeeded,
                "updates": len(plan.updates),
                "deletes": deleted.succeeded,
                "status": plan.status is not None and status.persisted,
                "status_held": round(status.held, 3),
                "events": ",".join(e.reason for e in plan.events) if status.persisted else "",
                "job_deleted": job_deleted.succeeded > 0,
                "requeue_after": plan.requeue_after,
                "errors": len(errors),
            },
        )
        if errors:
            raise ApplyError(errors)

    def _taint_all(self, taints: list[NodeTaint], now: datetime) -> Done:
        """Taint each node on its latest version (kubelets update Nodes all the time: a
        conflict is retried at once), so the replacements of its pods go elsewhere."""
        errors: list[str] = []
        for request in taints:
            for attempt in range(_TAINT_ATTEMPTS):
                try:
                    node = self.client.get(r.NODES, None, request.node)
                    changed = node_check.taint(node, request.value, rfc3339(now))
                    if changed is not None:
                        self.client.replace(r.NODES, changed)
                    break
                except ApiError as exc:
                    if exc.code == 404:
                        break  # the node is gone: nothing will be placed there
                    if exc.code != 409 or attempt == _TAINT_ATTEMPTS - 1:
                        errors.append(f"taint node {request.node}: {exc}")
                        break
        return Done(succeeded=len(taints) - len(errors), errors=tuple(errors))

    def _delete_job(self, key: JobKey, job: dict[str, Any]) -> Done:
        """Delete the job itself (its TTL after finishing ran out), only if it is still this one."""
        try:
            gone = self.client.delete(r.resource_of(job), key.namespace, key.name, uid=job["metadata"].get("uid"))
        except ApiError as exc:
            return Done(errors=(f"delete job: {exc}",))
        return Done(succeeded=int(gone))
