"""Which objects a workload controller owns: kube's ControllerRefManager, as pure functions.

A ReplicaSet owns the pods, and a Deployment the ReplicaSets, that carry its controller
ownerReference. An object its selector matches that no controller owns (an orphan) is
adopted; an owned object the selector no longer matches is released. Both controllers claim
their children with these rules, so a pod is never counted by two ReplicaSets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from trainctl.cluster.label_selectors import selector_matches
from trainctl.cluster.podutil import metadata

Obj = dict[str, Any]


def controller_of(obj: Obj) -> Optional[Obj]:
    return next((ref for ref in metadata(obj).get("ownerReferences") or [] if ref.get("controller")), None)


def owner_reference(owner: Obj, api_version: str, kind: str) -> Obj:
    """The controller ownerReference a child of ``owner`` carries."""
    meta = metadata(owner)
    return {"apiVersion": api_version, "kind": kind, "name": meta.get("name"), "uid": meta.get("uid"),
            "controller": True, "blockOwnerDeletion": True}


@dataclass
class Claim:
    owned: list[Obj] = field(default_factory=list)  # the children, the adopted ones included
    adopt: list[Obj] = field(default_factory=list)  # orphans to write with the owner's reference
    release: list[Obj] = field(default_factory=list)  # children to write without it


def claim(owner: Obj, api_version: str, kind: str, candidates: list[Obj]) -> Claim:
    """Split ``candidates`` (objects of the owner's namespace) as kube's controllers claim them."""
    uid = metadata(owner).get("uid")
    selector = (owner.get("spec") or {}).get("selector")
    terminating_owner = bool(metadata(owner).get("deletionTimestamp"))
    result = Claim()
    for child in candidates:
        meta = metadata(child)
        labels = meta.get("labels") or {}
        ref = controller_of(child)
        matches = selector_matches(selector, labels)
        if ref is not None and ref.get("uid") == uid:
            if matches or terminating_owner:
                result.owned.append(child)
            else:
                refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != uid]
                result.release.append({**child, "metadata": {**meta, "ownerReferences": refs}})
        elif ref is None and matches and not terminating_owner and not meta.get("deletionTimestamp"):
            adopted = {**child, "metadata": {**meta, "ownerReferences": [*(meta.get("ownerReferences") or []),
                                                                         owner_reference(owner, api_version, kind)]}}
            result.adopt.append(adopted)
            result.owned.append(adopted)
    return result
