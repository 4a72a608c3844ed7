"""The horizontal pod autoscaler controller: the loop around :mod:`.hpa_decision`'s decision.

Every sync period (15 s, kube's ``--horizontal-pod-autoscaler-sync-period``) and whenever an
HPA appears, each HPA in the informer cache is synced: GET its target's ``scale``
subresource, list the pods the Scale's ``status.selector`` selects and their
``metrics.k8s.io/v1beta1`` PodMetrics, decide, PUT the new replica count through ``scale``,
then write the status (only when it changed) and the Events. The recommendations and
scale events the decision needs are kept in memory per HPA, as kube-controller-manager
keeps them (a restarted controller starts afresh).
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from trainctl.cluster.controlplane import hpa_decision
from trainctl.cluster.controlplane.api_resources import POD_METRICS
from trainctl.cluster.controlplane.periodic import PeriodicLoop
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import EventRecorder
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane.hpa")

COMPONENT = "horizontal-pod-autoscaler"
HpaKey = tuple[str, str, str]  # (namespace, name, uid)


class HorizontalPodAutoscalerController:
    def __init__(
        self,
        client: KubeClient,
        *,
        sync_period: float = 15.0,
        config: hpa_decision.HpaConfig = hpa_decision.HpaConfig(),
        namespace: Optional[str] = None,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self.client = client
        self.config = config
        self.clock = clock
        self.events = EventRecorder(client)
        self.histories: dict[HpaKey, hpa_decision.History] = {}
        self.informer = Informer(client, r.HPAS, namespace=namespace)
        self.informer.add_handler(self._on_hpa)
        self.loop = PeriodicLoop("horizontal-pod-autoscaler", [self.informer], self.sync_all, sync_period)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()

    def _on_hpa(self, event_type: str, new: Optional[dict[str, Any]], old: Optional[dict[str, Any]]) -> None:
        if event_type == "ADDED":
            self.loop.wake()
        elif event_type == "DELETED" and old is not None:
            self.histories.pop(_key(old), None)

    def sync_all(self) -> None:
        for item in self.informer.store.list():
            try:
                self.sync(item)
            except Exception:
                log.exception("HPA sync failed", extra={"hpa": _name(item)})

    def sync(self, autoscaler: dict[str, Any]) -> hpa_decision.Decision:
        """One HPA: read, decide, act. Returns the decision as applied."""
        namespace = autoscaler["metadata"].get("namespace") or "default"
        observed, target = self._observe(autoscaler, namespace)
        key = _key(autoscaler)
        previous = self.histories.get(key, hpa_decision.History())
        now = self.clock()
        decision = hpa_decision.decide(autoscaler, observed, previous, now, self.config)
        if decision.scale_to is not None and observed.scale is not None and target is not None:
            scale = {**observed.scale, "spec": {**(observed.scale.get("spec") or {}), "replicas": decision.scale_to}}
            try:
                self.client.replace(target, scale, subresource="scale")
            except ApiError as exc:
                decision = hpa_decision.rescale_failed(decision, autoscaler, previous, str(exc), now)
        self.histories[key] = decision.history
        if decision.status != (autoscaler.get("status") or {}):
            try:
                self.client.replace(r.HPAS, {**autoscaler, "status": decision.status}, subresource="status")
            except ApiError as exc:
                log.warning("could not write HPA status", extra={"hpa": _name(autoscaler), "error": str(exc)})
        for event in decision.events:
            self.events.record(autoscaler, event, COMPONENT, now)
        if decision.scale_to is not None:
            log.info("rescaled", extra={"hpa": _name(autoscaler), "target": hpa_decision.target_name(autoscaler),
                                        "replicas": decision.scale_to, "reason": decision.reason})
        return decision

    def _observe(self, autoscaler: dict[str, Any], namespace: str) -> tuple[hpa_decision.Observed, Optional[r.Resource]]:
        ref = (autoscaler.get("spec") or {}).get("scaleTargetRef") or {}
        try:
            target = r.resource_for(ref.get("apiVersion", ""), ref.get("kind", ""))
        except KeyError:
            return hpa_decision.Observed(scale_error=f'no matches for kind "{ref.get("kind")}" in group "{ref.get("apiVersion")}"'), None
        try:
            scale = self.client.get(target, namespace, ref.get("name", ""), subresource="scale")
        except ApiError as exc:
            return hpa_decision.Observed(scale_error=str(exc)), target
        selector = (scale.get("status") or {}).get("selector")
        if not selector:
            return hpa_decision.Observed(scale=scale), target
        pods, _ = self.client.list(r.PODS, namespace, label_selector=selector)
        try:
            metrics, _ = self.client.list(POD_METRICS, namespace, label_selector=selector)
        except ApiError as exc:
            return hpa_decision.Observed(scale=scale, pods=tuple(pods), metrics_error=f"{exc} (get pods.metrics.k8s.io)"), target
        return hpa_decision.Observed(scale=scale, pods=tuple(pods), pod_metrics=tuple(metrics)), target


def _key(obj: dict[str, Any]) -> HpaKey:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"], meta.get("uid") or ""


def _name(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace')}/{meta['name']}"
