"""The Eviction API: ``POST pods/NAME/eviction``, a pod's deletion that honours the
PodDisruptionBudgets covering it, as kube-apiserver's eviction subresource does.

The body is a ``policy/v1`` Eviction (``policy/v1beta1`` is accepted too, as kube accepts
it) naming the pod, with optional ``deleteOptions``. A pod already terminal, still
Pending or already terminating is deleted at once; so is one no budget covers. Under a
budget, an unready pod goes when the budget is already met (``IfHealthyBudget``, the
default) or always (``AlwaysAllow``); otherwise the budget must allow a disruption: the
server takes one from ``status.disruptionsAllowed`` and notes the pod in
``status.disruptedPods`` (so the disruption controller does not count it healthy before it
is gone), or refuses with 429 ``TooManyRequests`` (clients such as ``kubectl drain`` retry).
More than one budget over a pod is a 500, as on kube. The pod then gets the
``DisruptionTarget`` condition (reason ``EvictionByEvictionAPI``) and a graceful delete
(``deleteOptions.gracePeriodSeconds``, else its ``terminationGracePeriodSeconds``).
"""

from __future__ import annotations

from typing import Any

from trainctl.cluster import disruption_budgets as budgets
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause
from trainctl.cluster.apiserver.apimachinery.resource_types import ResourceType
from trainctl.cluster.apiserver.storage.deletion import Deletion, existing
from trainctl.cluster.apiserver.storage.store import Store, clone
from trainctl.kube.timestamps import now_rfc3339

Obj = dict[str, Any]

PDB_STORAGE_KEY = "policy/poddisruptionbudgets"
EVICTION_VERSIONS = ("policy/v1", "policy/v1beta1")
MAX_DISRUPTED_POD_SIZE = 2000
_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


def _too_many_requests(why: str) -> errors.ApiError:
    return errors.ApiError(429, "TooManyRequests", _VIOLATION, {}, [Cause("", "DisruptionBudget", why)])


def _delete_options(body: Any, name: str) -> Obj:
    """The Eviction's deleteOptions, or a 400 for a body that is no Eviction of this pod."""
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request was in an unknown format - expected an Eviction object")
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if api_version is not None and api_version not in EVICTION_VERSIONS:
        raise errors.bad_request(f"the API version in the data ({api_version}) does not match the expected API version (policy/v1)")
    if kind is not None and kind != "Eviction":
        raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind (Eviction)")
    meta = body.get("metadata")
    if not isinstance(meta, dict) or meta.get("name") != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = body.get("deleteOptions")
    if options is not None and not isinstance(options, dict):
        raise errors.bad_request("deleteOptions must be an object")
    return dict(options or {})


def _ignores_budgets(pod: Obj) -> bool:
    """A pod that disrupts nothing more by going: finished, not yet running, or already going."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


class Evictions:
    def __init__(self, store: Store, deletion: Deletion) -> None:
        self.store = store
        self.deletion = deletion

    async def evict(self, pods: ResourceType, namespace: str, name: str, body: Any, *, dry_run: bool = False) -> None:
        """``dry_run`` (the request's, or the Eviction's ``deleteOptions.dryRun``): decide, change nothing."""
        options = _delete_options(body, name)
        dry_run = dry_run or bool(options.get("dryRun"))
        pod = existing(self.store, pods, namespace, name)
        if not _ignores_budgets(pod):
            covering = [p for p in self.store.list(PDB_STORAGE_KEY, namespace) if budgets.covers(p, pod)]
            if len(covering) > 1:
                raise errors.ApiError(500, "", "This pod has more than one PodDisruptionBudget, which the eviction "
                                               "subresource does not support.")
            if covering and not self._unhealthy_may_go(covering[0], pod):
                await self._take_disruption(covering[0], name, dry_run)
        if dry_run:
            return
        options.setdefault("preconditions", {}).setdefault("uid", pod["metadata"]["uid"])
        await self._mark_disruption_target(pods, pod)
        await self.deletion.delete(pods, namespace, name, options)

    @staticmethod
    def _unhealthy_may_go(pdb: Obj, pod: Obj) -> bool:
        if budgets.is_ready(pod):
            return False
        if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return True
        status = pdb.get("status") or {}
        desired = status.get("desiredHealthy") or 0
        return desired > 0 and (status.get("currentHealthy") or 0) >= desired

    async def _take_disruption(self, pdb: Obj, pod_name: str, dry_run: bool) -> None:
        """kube's checkAndDecrement: one disruption taken from the budget, or the refusal."""
        status = pdb.get("status") or {}
        pdb_name = pdb["metadata"]["name"]
        if (status.get("observedGeneration") or 0) < pdb["metadata"].get("generation", 1):
            raise _too_many_requests(f"The disruption budget {pdb_name} is still being processed by the server.")
        allowed = status.get("disruptionsAllowed") or 0
        if allowed < 0:
            raise errors.forbidden("poddisruptionbudget", "policy", pdb_name, "pdb disruptions allowed is negative")
        if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
            raise errors.forbidden("poddisruptionbudget", "policy", pdb_name,
                                   "DisruptedPods map too big - too many evictions not confirmed by PDB controller")
        if allowed == 0:
            raise _too_many_requests(f"The disruption budget {pdb_name} needs {status.get('desiredHealthy', 0)} "
                                     f"healthy pods and has {status.get('currentHealthy', 0)} currently")
        if dry_run:
            return
        now = now_rfc3339()
        new_status = {**status, "disruptionsAllowed": allowed - 1}
        if allowed - 1 == 0:
            new_status = budgets.with_allowed_condition(new_status, now)
        new_status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: now}
        await self.store.put(PDB_STORAGE_KEY, {**clone(pdb), "status": new_status})

    async def _mark_disruption_target(self, pods: ResourceType, pod: Obj) -> None:
        if pod["metadata"].get("deletionTimestamp"):
            return
        new = clone(pod)
        status = new.setdefault("status", {})
        condition = {"type": budgets.DISRUPTION_TARGET, "status": "True", "reason": "EvictionByEvictionAPI",
                     "message": "Eviction API: evicting"}
        conditions = budgets.set_condition(list(status.get("conditions") or []), condition, now_rfc3339())
        status["conditions"] = [{"lastProbeTime": None, **c} if c["type"] == budgets.DISRUPTION_TARGET else c
                                for c in conditions]
        await self.store.put(pods.storage_key, new)
