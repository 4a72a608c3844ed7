"""The ServiceAccount controller: every active namespace has its ``default`` ServiceAccount.

kube-controller-manager's ``serviceaccount`` controller: when a namespace appears, or its
``default`` ServiceAccount is deleted, the account is (re)created, so pods, which run as
``default`` unless they name another account, can always be admitted. (The local API server
already creates it with the namespace; this puts back one that was deleted.)
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from trainctl.cluster.controlplane.periodic import LoopController, PeriodicLoop
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane.serviceaccounts")

DEFAULT = "default"


def missing(namespaces: list[dict[str, Any]], accounts: list[dict[str, Any]]) -> list[str]:
    """The active namespaces without a ``default`` ServiceAccount."""
    present = {a["metadata"].get("namespace") for a in accounts if a["metadata"].get("name") == DEFAULT}
    return sorted(n["metadata"]["name"] for n in namespaces
                  if n["metadata"]["name"] not in present and not n["metadata"].get("deletionTimestamp")
                  and (n.get("status") or {}).get("phase", "Active") == "Active")


class ServiceAccountsController(LoopController):
    def __init__(self, client: KubeClient, resync_period: float = 30.0) -> None:
        self.client = client
        self.namespaces = Informer(client, r.NAMESPACES)
        self.accounts = Informer(client, r.SERVICE_ACCOUNTS, field_selector=f"metadata.name={DEFAULT}")
        self.loop = PeriodicLoop("serviceaccounts", [self.namespaces, self.accounts], self.sync, resync_period).wake_on_changes()

    def sync(self) -> Optional[float]:
        for namespace in missing(self.namespaces.store.list(), self.accounts.store.list()):
            try:
                self.client.create(r.SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                                        "metadata": {"name": DEFAULT, "namespace": namespace}})
                log.info("created the default ServiceAccount", extra={"namespace": namespace})
            except ApiError as exc:  # the namespace is going away, or the server is busy: next pass
                log.warning("cannot create the default ServiceAccount", extra={"namespace": namespace, "error": str(exc)})
        return None
