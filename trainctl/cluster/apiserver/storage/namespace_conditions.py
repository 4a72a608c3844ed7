"""The conditions of a Terminating namespace, as kube-controller-manager's namespace
controller writes them.

``kubectl describe ns`` and ``get ns -o yaml`` show why a namespace stays Terminating: what
is still in it and which finalizers hold that content. Each pass of the deletion computes
the five ``NamespaceDeletion*`` / ``Namespace*Remaining`` conditions from what remains; a
condition keeps its ``lastTransitionTime`` until its status changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

Obj = dict[str, Any]

KUBERNETES_FINALIZER = "kubernetes"  # spec.finalizers: the namespace controller's own

# (type, reason, message) of each condition when nothing is wrong, in kube's order.
_OK = [
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "ContentDeleted",
     "All content successfully deleted, may be waiting on finalization"),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentHasNoFinalizers", "All content-preserving finalizers have been removed"),
]


def group_resource(group: str, plural: str) -> str:
    """``pods``, ``deployments.apps``: a GroupResource as kube prints it."""
    return f"{plural}.{group}" if group else plural


def deletion_conditions(remaining: Iterable[tuple[str, Obj]], previous: list[Obj], now: str) -> list[Obj]:
    """The conditions for a namespace whose content is ``remaining`` (group-resource, object)
    pairs; ``previous`` are its conditions so far."""
    resources: Counter[str] = Counter()
    finalizers: Counter[str] = Counter()
    for resource, obj in remaining:
        resources[resource] += 1
        finalizers.update(obj.get("metadata", {}).get("finalizers") or [])
    problems = {}
    if resources:
        problems["NamespaceContentRemaining"] = (
            "SomeResourcesRemain", "Some resources are remaining: "
            + ", ".join(f"{name} has {count} resource instances" for name, count in sorted(resources.items())))
    if finalizers:
        problems["NamespaceFinalizersRemaining"] = (
            "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: "
            + ", ".join(f"{name} in {count} resource instances" for name, count in sorted(finalizers.items())))
    before = {c.get("type"): c for c in previous if isinstance(c, dict)}
    conditions = []
    for kind, ok_reason, ok_message in _OK:
        status = "True" if kind in problems else "False"
        reason, message = problems.get(kind, (ok_reason, ok_message))
        old = before.get(kind) or {}
        since = old.get("lastTransitionTime") if old.get("status") == status and old.get("lastTransitionTime") else now
        conditions.append({"type": kind, "status": status, "lastTransitionTime": since, "reason": reason,
                           "message": message})
    return conditions


def held(namespace: Obj) -> bool:
    """Whether finalizers still keep a terminating namespace: its own (``spec.finalizers``,
    removed through ``namespaces/finalize``) or its metadata's."""
    return bool((namespace.get("spec") or {}).get("finalizers") or namespace["metadata"].get("finalizers"))
