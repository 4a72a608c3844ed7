"""The endpoint and endpointslice controllers: every Service with a selector has its addresses written.

kube-controller-manager keeps a Service's Endpoints and EndpointSlices in step with the pods
it selects; ``kubectl get ep``, ``kubectl describe svc`` and cluster DNS read them. This loop
is level-based like the other control-plane controllers: each pass compares what
:mod:`~trainctl.cluster.controlplane.endpoints` computes with what is stored and writes the
difference. Endpoints of a Service that is gone are deleted; its slices, owned by the
Service, go with it (and are deleted here too, should the collector be slow).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from trainctl.cluster.controlplane import endpoints as ep
from trainctl.cluster.controlplane.api_resources import ENDPOINT_SLICES
from trainctl.cluster.controlplane.periodic import LoopController, PeriodicLoop
from trainctl.cluster.podutil import metadata
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane.endpoints")

Obj = dict[str, Any]


class EndpointsController(LoopController):
    def __init__(self, client: KubeClient, resync_period: float = 30.0) -> None:
        self.client = client
        self.services = Informer(client, r.SERVICES)
        self.pods = Informer(client, r.PODS)
        self.endpoints = Informer(client, r.ENDPOINTS)
        self.slices = Informer(client, ENDPOINT_SLICES, label_selector=f"{ep.MANAGED_BY_LABEL}={ep.MANAGED_BY}")
        informers = [self.services, self.pods, self.endpoints, self.slices]
        self.loop = PeriodicLoop("endpoints", informers, self.sync, resync_period).wake_on_changes()

    def sync(self) -> Optional[float]:
        services: dict[tuple[str, str], Obj] = {
            (metadata(s).get("namespace") or "", metadata(s).get("name") or ""): s for s in self.services.store.list()}
        pods_by_namespace: dict[str, list[Obj]] = {}
        for pod in self.pods.store.list():
            pods_by_namespace.setdefault(metadata(pod).get("namespace") or "", []).append(pod)
        slices_by_service: dict[tuple[str, str], list[Obj]] = {}
        for slice_ in self.slices.store.list():
            key = (metadata(slice_).get("namespace") or "", (metadata(slice_).get("labels") or {}).get(ep.SERVICE_NAME_LABEL) or "")
            slices_by_service.setdefault(key, []).append(slice_)
        for (namespace, name), service in services.items():
            if not (service.get("spec") or {}).get("selector"):
                continue  # someone else's endpoints (the API server's own `kubernetes`, a user's)
            pods = pods_by_namespace.get(namespace, [])
            self._write(self._endpoints_writes(service, ep.desired_endpoints(service, pods)))
            self._sync_slices(service, ep.desired_slices(service, pods), slices_by_service.pop((namespace, name), []))
        for endpoints in self.endpoints.store.list():
            key = (metadata(endpoints).get("namespace") or "", metadata(endpoints).get("name") or "")
            if key not in services and self._ours(endpoints):
                self._delete(r.ENDPOINTS, endpoints)
        for leftovers in slices_by_service.values():
            for slice_ in leftovers:
                self._delete(ENDPOINT_SLICES, slice_)
        return None

    @staticmethod
    def _ours(endpoints: Obj) -> bool:
        """Endpoints whose Service is gone that kube deletes: not the API server's own, not a leader-election record."""
        meta = metadata(endpoints)
        return ((meta.get("labels") or {}).get("endpointslice.kubernetes.io/skip-mirror") != "true"
                and "control-plane.alpha.kubernetes.io/leader" not in (meta.get("annotations") or {}))

    def _endpoints_writes(self, service: Obj, desired: Obj) -> list[tuple[str, Obj]]:
        current = self.endpoints.store.get(metadata(service).get("namespace") or "", metadata(service).get("name") or "")
        if current is None:
            return [("create", desired)]
        if ep.same_content(current, desired, ("subsets",)):
            return []
        updated = {**current, "subsets": desired.get("subsets"), "metadata": {**metadata(current), "labels": metadata(desired).get("labels")}}
        if updated.get("subsets") is None:
            updated.pop("subsets")
        return [("replace", updated)]

    def _write(self, writes: list[tuple[str, Obj]]) -> None:
        for verb, obj in writes:
            try:
                if verb == "create":
                    self.client.create(r.ENDPOINTS, obj)
                else:
                    self.client.replace(r.ENDPOINTS, obj)
            except ApiError as exc:  # a conflict or a busy server: the next pass looks again
                log.info("cannot write Endpoints", extra={"endpoints": metadata(obj).get("name"), "error": str(exc)})

    def _sync_slices(self, service: Obj, desired: list[Obj], current: list[Obj]) -> None:
        current = sorted(current, key=lambda s: metadata(s).get("name") or "")
        for want, have in zip(desired, current, strict=False):
            if ep.same_content(have, want, ("endpoints", "ports", "addressType")):
                continue
            updated = {**have, "endpoints": want["endpoints"], "ports": want["ports"],
                       "metadata": {**metadata(have), "labels": metadata(want)["labels"]}}
            try:
                self.client.replace(ENDPOINT_SLICES, updated)
            except ApiError as exc:
                log.info("cannot update an EndpointSlice", extra={"endpointslice": metadata(have).get("name"), "error": str(exc)})
        for want in desired[len(current):]:
            try:
                self.client.create(ENDPOINT_SLICES, want)
            except ApiError as exc:
                log.info("cannot create an EndpointSlice", extra={"service": metadata(service).get("name"), "error": str(exc)})
        for have in current[len(desired):]:
            self._delete(ENDPOINT_SLICES, have)

    def _delete(self, resource: r.Resource, obj: Obj) -> None:
        try:
            self.client.delete(resource, metadata(obj).get("namespace"), metadata(obj).get("name") or "", uid=metadata(obj).get("uid"))
        except ApiError as exc:
            log.info("cannot delete", extra={"kind": resource.kind, "object": metadata(obj).get("name"), "error": str(exc)})
