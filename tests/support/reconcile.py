"""What the pure reconcile tests need besides jobs: a clock, pod states, and a tiny "cluster".

``Cluster`` applies a Plan to plain dicts the way an API server would (assigning uids and
ClusterIPs, writing the status), so multi-step scenarios read as: reconcile, apply, change a
pod's phase, reconcile again.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from trainctl.controller.reconcile import Observed, Plan, ReconcileConfig, reconcile
from trainctl.controller.reconcile.children import rfc3339

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def env_of(pod: dict[str, Any], container_name: Optional[str] = None) -> list[tuple[str, Any]]:
    """(name, value or fieldPath) of a container's env, in order."""
    containers = pod["spec"]["containers"]
    ctr = next(c for c in containers if container_name is None or c["name"] == container_name)
    return [
        (e["name"], e.get("value", (e.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath"))) for e in ctr.get("env", [])
    ]


def env_dict(pod: dict[str, Any], container_name: Optional[str] = None) -> dict[str, Any]:
    return dict(env_of(pod, container_name))


def by_name(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects}


def conditions(status: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in status.get("conditions", [])]


def node(name: str, ready: str = "True", since: float = 0.0, taints: Optional[list[dict[str, Any]]] = None) -> dict[str, Any]:
    """A Node whose Ready condition has had ``ready`` since ``at(since)``."""
    cond = {"type": "Ready", "status": ready, "lastTransitionTime": rfc3339(at(since))}
    return {"metadata": {"name": name}, "spec": {"taints": taints or []}, "status": {"conditions": [cond]}}


def terminated(code: int, container_name: str = "pytorch") -> list[dict[str, Any]]:
    return [{"name": container_name, "state": {"terminated": {"exitCode": code}}, "restartCount": 0}]


class Cluster:
    """One job and its children as an API server would hold them."""

    def __init__(self, job: dict[str, Any], config: Optional[ReconcileConfig] = None):
        self.job = copy.deepcopy(job)
        self.config = config or ReconcileConfig()
        self.pods: dict[str, dict[str, Any]] = {}
        self.services: dict[str, dict[str, Any]] = {}
        self.hpa: Optional[dict[str, Any]] = None
        self.pod_group: Optional[dict[str, Any]] = None
        self.nodes: dict[str, dict[str, Any]] = {}
        self.node_memory: Optional[int] = None  # the largest node's allocatable memory, in bytes
        self.deleted_job = False
        self._serial = 0

    def observed(self) -> Observed:
        return Observed(
            pods=list(self.pods.values()), services=list(self.services.values()), hpa=self.hpa, pod_group=self.pod_group,
            nodes=self.nodes, node_memory=self.node_memory,
        )

    def reconcile(self, now: datetime = T0) -> Plan:
        return reconcile(self.job, self.observed(), now, self.config)

    def step(self, now: datetime = T0) -> Plan:
        plan = self.reconcile(now)
        self.apply(plan)
        return plan

    def apply(self, plan: Plan) -> None:
        for obj in plan.creates:
            obj = copy.deepcopy(obj)
            self._serial += 1
            obj["metadata"]["uid"] = f"uid-{self._serial}"
            obj["metadata"]["resourceVersion"] = str(self._serial)
            kind = obj["kind"]
            if kind == "Pod":
                obj.setdefault("status", {"phase": "Pending"})
                self.pods.setdefault(obj["metadata"]["name"], obj)
            elif kind == "Service":
                if obj["spec"].get("clusterIP") is None:
                    obj["spec"]["clusterIP"] = f"10.96.0.{self._serial}"
                self.services.setdefault(obj["metadata"]["name"], obj)
            elif kind == "HorizontalPodAutoscaler":
                self.hpa = obj
            elif kind == "PodGroup":
                self.pod_group = obj
        for obj in plan.updates:
            if obj["kind"] == "PodGroup":
                self.pod_group = copy.deepcopy(obj)
            else:
                self.hpa = copy.deepcopy(obj)
        for ref in plan.deletes:
            if ref.kind == "Pod":
                self.pods.pop(ref.name, None)
            elif ref.kind == "Service":
                self.services.pop(ref.name, None)
            elif ref.kind == "HorizontalPodAutoscaler":
                self.hpa = None
            elif ref.kind == "PodGroup":
                self.pod_group = None
        if plan.status is not None:
            self.job["status"] = copy.deepcopy(plan.status)
        if plan.delete_job:
            self.deleted_job = True

    def set_phase(self, name: str, phase: str, **status: Any) -> None:
        self.pods[name]["status"] = {"phase": phase, **status}

    def set_all(self, phase: str, prefix: str = "") -> None:
        for name in self.pods:
            if name.startswith(prefix) and not name.endswith("-rdzv"):
                self.set_phase(name, phase)
