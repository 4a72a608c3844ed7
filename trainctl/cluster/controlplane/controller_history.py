"""A workload's revisions as apps/v1 ControllerRevisions, kept as kube's controller history keeps them.

``kubectl rollout history|undo sts`` read a StatefulSet's past pod templates from the
ControllerRevisions it owns: each holds one template (its ``data``, the patch that puts the
template back) and a ``revision`` number. This module is those rules, pure:

- a revision is named ``<owner>-<hash of its data and the collision count>``, labelled with
  the template's labels (so the owner's selector finds it) and ``controller.kubernetes.io/hash``;
- the owner's current data either matches an existing revision, which becomes the newest
  (its number raised above every other, as a rollback makes an old template current again),
  or is a new revision numbered one above the highest; a name already taken by other data
  raises the collision count, which changes the name;
- revisions beyond ``revisionHistoryLimit`` that no pod runs and that are neither the current
  nor the update revision are deleted, lowest number first.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Optional

from trainctl.cluster.controlplane import controller_ref
from trainctl.cluster.controlplane.deployment_decision import short_hash
from trainctl.cluster.podutil import metadata

Obj = dict[str, Any]

HASH_LABEL = "controller.kubernetes.io/hash"
_MAX_COLLISIONS = 100


def template_data(owner: Obj) -> Obj:
    """A StatefulSet's or DaemonSet's revision data: the patch that restores its pod template."""
    template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
    return {"spec": {"template": {**template, "$patch": "replace"}}}


def template_of(revision: Obj) -> Obj:
    """The pod template a revision holds."""
    template = dict((((revision.get("data") or {}).get("spec") or {}).get("template") or {}))
    template.pop("$patch", None)
    return template


def number(revision: Obj) -> int:
    return int(revision.get("revision") or 0)


def _name(owner: Obj, data: Obj, collisions: int) -> str:
    return f"{metadata(owner).get('name')}-{short_hash([data, collisions] if collisions else data)}"


@dataclass
class History:
    update: Obj  # the revision of the owner's current template (maybe not yet stored)
    revisions: list[Obj]  # the owner's revisions as this pass leaves them, the update one included
    collision_count: int
    create: Optional[Obj] = None  # the update revision, when new
    rewrite: list[Obj] = field(default_factory=list)  # revisions adopted, released or renumbered


def plan(owner: Obj, api_version: str, kind: str, candidates: list[Obj]) -> History:
    """The owner's history after recording its current template; ``candidates``: the
    ControllerRevisions of its namespace."""
    claimed = controller_ref.claim(owner, api_version, kind, candidates)
    owned = sorted(claimed.owned, key=lambda r: (number(r), metadata(r).get("name") or ""))
    rewrite = list(claimed.adopt) + list(claimed.release)
    data = template_data(owner)
    collisions = int((owner.get("status") or {}).get("collisionCount") or 0)
    highest = max((number(r) for r in owned), default=0)
    equal = [r for r in owned if r.get("data") == data]
    if equal:
        update = equal[-1]
        if number(update) < highest:
            renumbered = {**update, "revision": highest + 1}
            rewrite = [r for r in rewrite if r is not update] + [renumbered]
            owned = [renumbered if r is update else r for r in owned]
            update = renumbered
        return History(update=update, revisions=owned, collision_count=collisions, rewrite=rewrite)
    taken = {metadata(r).get("name") for r in candidates}
    while _name(owner, data, collisions) in taken and collisions < _MAX_COLLISIONS:
        collisions += 1
    meta = metadata(owner)
    labels = {**((((owner.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {})}
    name = _name(owner, data, collisions)
    labels[HASH_LABEL] = name.rsplit("-", 1)[-1]
    created: Obj = {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                    "metadata": {"name": name, "namespace": meta.get("namespace"), "labels": labels,
                                 "ownerReferences": [controller_ref.owner_reference(owner, api_version, kind)]},
                    "data": data, "revision": highest + 1}
    return History(update=created, revisions=[*owned, created], collision_count=collisions, create=created, rewrite=rewrite)


def hash_of(revision: Obj) -> str:
    """The hash a revision's name ends with (a DaemonSet's pods carry it as their revision)."""
    return str((metadata(revision).get("labels") or {}).get(HASH_LABEL) or metadata(revision)["name"].rsplit("-", 1)[-1])


@dataclass
class RevisionWrites:
    """What the controller writes to the owner's ControllerRevisions in one pass."""

    create: list[Obj] = field(default_factory=list)
    rewrite: list[Obj] = field(default_factory=list)  # adopted, released or renumbered
    delete: list[str] = field(default_factory=list)  # names beyond the history limit


def writes(history: History, limit: int, keep: set[str]) -> RevisionWrites:
    """The history's writes, pruning the oldest revisions beyond ``limit`` not named in ``keep``."""
    idle = [r for r in history.revisions if metadata(r).get("name") not in keep and r is not history.create]
    return RevisionWrites(create=[history.create] if history.create is not None else [], rewrite=history.rewrite,
                          delete=[metadata(r)["name"] for r in idle[:max(len(idle) - max(limit, 0), 0)]])
