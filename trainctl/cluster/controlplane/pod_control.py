"""Pods written for a controller that owns them, as kube's ``PodControl`` writes them.

The ReplicaSet and DaemonSet controllers both end a decision the same way: pods adopted or
released, created (each expected in the cache before the owner is decided again, and a
``SuccessfulCreate`` Event), deleted (expected gone, a ``SuccessfulDelete`` Event). A pod the
API server refuses (403 from admission or RBAC, 422 invalid) is a ``FailedCreate`` Warning and
the reason the owner's status gives; any other error ends the pass, the next looks again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Optional

from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.expectations import Expectations
from trainctl.kube.informer import Store

log = logging.getLogger("trainctl.controlplane.pods")

Obj = dict[str, Any]
Record = Callable[[str, str, str], None]  # (type, reason, message) -> an Event on the owner


def by_namespace(objects: list[Obj]) -> dict[str, list[Obj]]:
    """Cached objects grouped by namespace, as each owner reads those of its own."""
    grouped: dict[str, list[Obj]] = {}
    for obj in objects:
        grouped.setdefault(obj["metadata"].get("namespace") or "", []).append(obj)
    return grouped


def sync_owners(owners: list[Obj], expectations: Expectations, pods: Store,
                step: Callable[[Obj], Optional[float]]) -> Optional[float]:
    """Run ``step`` (decide and apply) for each owner whose last pod writes the cache ``pods``
    shows; the soonest requeue any step asked for, at least half a second away."""

    def lookup(key: tuple[str, str, str]) -> Optional[Obj]:
        return pods.get(key[1], key[2])

    sooner: Optional[float] = None
    for owner in owners:
        if not expectations.satisfied(owner["metadata"].get("uid") or "", lookup):
            continue  # the watch event that satisfies it wakes the loop
        after = step(owner)
        if after is not None:
            sooner = after if sooner is None else min(sooner, after)
    return None if sooner is None else max(sooner, 0.5)


def apply_pods(client: KubeClient, expectations: Expectations, owner: Obj, *, rewrite: list[Obj], create: list[Obj],
               delete: list[str], record: Record) -> Optional[tuple[str, str]]:
    """Write the pod changes; returns (reason, message) when the API server refused a new pod."""
    meta = owner["metadata"]
    namespace, uid = meta.get("namespace") or "", meta.get("uid") or ""
    failure: Optional[tuple[str, str]] = None
    try:
        for pod in rewrite:
            client.replace(r.PODS, pod)
        for pod in create:
            try:
                created = client.create(r.PODS, pod).object
            except ApiError as exc:
                if exc.code in (403, 422):
                    failure = ("FailedCreate", str(exc))
                    record("Warning", "FailedCreate", f"Error creating: {exc}")
                raise
            if created is not None:
                expectations.expect_creates(uid, uid, [("Pod", namespace, created["metadata"]["name"])])
                record("Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
        for pod_name in delete:
            expectations.expect_deletes(uid, [(("Pod", namespace, pod_name), None)])
            if client.delete(r.PODS, namespace, pod_name):
                record("Normal", "SuccessfulDelete", f"Deleted pod: {pod_name}")
    except ApiError as exc:  # a conflict, a refused pod or a busy server: the next pass looks again
        log.info("cannot apply the next step", extra={"owner": f"{owner.get('kind')} {namespace}/{meta.get('name')}",
                                                     "error": str(exc)})
    return failure
