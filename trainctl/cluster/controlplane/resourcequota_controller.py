"""The ResourceQuota controller: the loop around :mod:`.resourcequota_decision`.

Informers keep quotas and pods cached; a change to either (and every resync period) runs a
pass that recounts every quota and writes the status of those whose count changed through
the ``status`` subresource. Other kinds a quota counts (``count/deployments.apps``,
``configmaps``...) are listed from the server in the quota's namespace during the pass. A
status write that fails (a conflict with an edit of the quota, a busy server) is retried by a
pass soon after. Admission does not wait for this count: it counts for itself.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Optional

from trainctl.cluster.controlplane import resourcequota_decision
from trainctl.cluster.controlplane.api_resources import RESOURCE_QUOTAS
from trainctl.cluster.controlplane.periodic import LoopController, PeriodicLoop
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane.resourcequota")

Obj = dict[str, Any]

RETRY_AFTER = 1.0  # seconds before a pass after a status write that failed
_VERSIONS = ("v1", "v2", "v1beta1", "v1alpha1")  # tried in this order for a group a quota counts


def _listed(listed: dict[str, list[Obj]], storage_key: str) -> list[Obj]:
    return listed.get(storage_key) or []


class ResourceQuotaController(LoopController):
    def __init__(self, client: KubeClient, resync_period: float = 30.0) -> None:
        self.client = client
        self.quotas = Informer(client, RESOURCE_QUOTAS)
        self.pods = Informer(client, r.PODS)
        self.loop = PeriodicLoop("resourcequota", [self.quotas, self.pods], self.sync, resync_period).wake_on_changes()
        self._versions: dict[str, Optional[str]] = {"": "v1"}

    def sync(self) -> Optional[float]:
        sooner: Optional[float] = None
        for quota in self.quotas.store.list():
            namespace = quota["metadata"].get("namespace", "")
            listed = {key: self._list(key, namespace) for key in resourcequota_decision.counted_keys(quota)}
            wanted = resourcequota_decision.decide(quota, functools.partial(_listed, listed))
            if wanted is not None and not self._write(quota, wanted):
                sooner = RETRY_AFTER
        return sooner

    def _list(self, storage_key: str, namespace: str) -> list[Obj]:
        if storage_key == "/pods":
            return [p for p in self.pods.store.list() if p["metadata"].get("namespace") == namespace]
        group, _, plural = storage_key.partition("/")
        version = self._version(group)
        if version is None:
            return []
        try:
            items, _ = self.client.list(r.Resource(group, version, plural, ""), namespace)
        except ApiError as exc:  # a kind the server does not serve counts nothing
            log.info("cannot list a counted resource", extra={"resource": storage_key, "error": str(exc)})
            return []
        return items

    def _version(self, group: str) -> Optional[str]:
        if group not in self._versions:
            self._versions[group] = next((v for v in _VERSIONS if self.client.group_version_served(group, v)), None)
        return self._versions[group]

    def _write(self, quota: Obj, status: Obj) -> bool:
        try:
            written = self.client.replace(RESOURCE_QUOTAS, {**quota, "status": status}, subresource="status")
        except ApiError as exc:
            log.info("quota status not written, retrying", extra={"quota": quota["metadata"]["name"], "error": str(exc)})
            return False
        self.quotas.store.upsert(written, only_if_newer=True)
        return True
