"""The disruption controller: the loop around :mod:`.disruption_budget`'s decision.

Informers keep PodDisruptionBudgets and pods cached; whenever either changes (and every
resync period, and when a ``disruptedPods`` note is due to expire) one pass decides every
budget's status and writes those that changed through the ``status`` subresource,
conditional on the resourceVersion read, so an eviction that took a disruption meanwhile
wins and the next pass looks again. Scales of the pods' controllers are read (``GET
.../scale``) only for budgets that need them (``maxUnavailable``, a percentage).
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from trainctl.cluster import disruption_budgets as budgets
from trainctl.cluster.controlplane import disruption_budget
from trainctl.cluster.controlplane.api_resources import PODDISRUPTIONBUDGETS
from trainctl.cluster.controlplane.periodic import PeriodicLoop
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import EventRecorder
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane.disruption")

Obj = dict[str, Any]

RETRY_AFTER = 1.0  # seconds before a pass after a status write that failed
COMPONENT = "controllermanager"  # the Event source kube's disruption controller records as


class DisruptionController:
    def __init__(self, client: KubeClient, *, resync_period: float = 30.0,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        self.client = client
        self.clock = clock
        self.events = EventRecorder(client)
        self.budgets = Informer(client, PODDISRUPTIONBUDGETS)
        self.pods = Informer(client, r.PODS)
        self.loop = PeriodicLoop("disruption", [self.budgets, self.pods], self.sync, resync_period)
        self.budgets.add_handler(lambda event_type, new, old: self.loop.wake())
        self.pods.add_handler(self._on_pod)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()

    def _on_pod(self, event_type: str, new: Optional[Obj], old: Optional[Obj]) -> None:
        pod = new if new is not None else old
        if pod is not None and any(budgets.covers(pdb, pod) or (old is not None and budgets.covers(pdb, old))
                                   for pdb in self.budgets.store.list()):
            self.loop.wake()

    def sync(self) -> Optional[float]:
        """One pass over every budget; returns how soon a note expires (None: nothing pending)."""
        now = self.clock()
        pods = self.pods.store.list()
        recheck: Optional[float] = None
        for pdb in self.budgets.store.list():
            covered = [p for p in pods if budgets.covers(pdb, p)]
            scales = self._scales(pdb, covered) if disruption_budget.needs_scales(pdb) else {}
            decision = disruption_budget.decide(pdb, covered, scales, now)
            # Said when the status changes, not at every pass: a pass looks at every budget.
            for about, event in decision.events if decision.status is not None else ():
                self.events.record(about, event, COMPONENT, now)
            due = decision.recheck_in
            if decision.status is not None and not self._write(pdb, decision.status):
                due = RETRY_AFTER if due is None else min(due, RETRY_AFTER)
            if due is not None:
                recheck = due if recheck is None else min(recheck, due)
        return recheck

    def _scales(self, pdb: Obj, pods: list[Obj]) -> dict[str, Optional[int]]:
        """The scale of each controller of ``pods`` (None where it cannot be read)."""
        scales: dict[str, Optional[int]] = {}
        namespace = pdb["metadata"].get("namespace")
        for pod in pods:
            ref = r.controller_owner(pod)
            if ref is None or str(ref.get("uid", "")) in scales:
                continue
            uid = str(ref.get("uid", ""))
            scales[uid] = None
            try:
                resource = r.resource_for(ref.get("apiVersion", ""), ref.get("kind", ""))
                scale = self.client.get(resource, namespace, ref.get("name", ""), subresource="scale")
            except (KeyError, ApiError) as exc:
                log.warning("cannot read a controller's scale", extra={"pdb": pdb["metadata"]["name"], "error": str(exc)})
                continue
            if scale["metadata"].get("uid") in (None, uid):
                scales[uid] = int((scale.get("spec") or {}).get("replicas") or 0)
        return scales

    def _write(self, pdb: Obj, status: Obj) -> bool:
        try:
            written = self.client.replace(PODDISRUPTIONBUDGETS, {**pdb, "status": status}, subresource="status")
        except ApiError as exc:  # a conflict (an eviction took a disruption) or a busy server: a pass soon
            log.info("budget status not written, retrying", extra={"pdb": pdb["metadata"]["name"], "error": str(exc)})
            return False
        self.budgets.store.upsert(written, only_if_newer=True)
        return True
