"""The objects a job owns: their names, owner references, and finding them again.

Names are deterministic (``<job>-<type>-<index>``), so a create that raced with an earlier
one is a harmless conflict and a plan can be applied twice. Observed pods and Services are
indexed once per pass by (replica type, index); everything after that is a dict lookup.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

from trainctl.api import constants as c
from trainctl.controller.frameworks.base import UNKNOWN_EXIT_CODE
from trainctl.controller.reconcile.plan import ObjectRef

RENDEZVOUS_COMPONENT = "rendezvous"


@dataclass(frozen=True)
class JobRef:
    """The job a child belongs to: its name, its namespace and the ownerReference children carry.

    ``owner`` is shared by every child of one pass and must not be mutated.
    """

    name: str
    namespace: str
    owner: dict[str, Any]

    def child_metadata(self, name: str, **fields: Any) -> dict[str, Any]:
        """A child's metadata: its name, the job's namespace, ``fields``, then the owner."""
        return {"name": name, "namespace": self.namespace, **fields, "ownerReferences": [self.owner]}


def replica_name(job_name: str, rtype: str, index: int) -> str:
    return f"{job_name}-{rtype.lower()}-{index}".replace("/", "-")


def owner_reference(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def ref(obj: dict[str, Any], *, force: bool = False, as_observed: bool = False, cause: Optional[str] = None,
        grace_seconds: Optional[int] = None) -> ObjectRef:
    """A reference to delete ``obj``; ``as_observed``: only while it is the version seen here."""
    meta = obj.get("metadata") or {}
    return ObjectRef(
        api_version=obj.get("apiVersion", "v1"),
        kind=obj.get("kind", ""),
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        uid=meta.get("uid"),
        force=force,
        grace_seconds=grace_seconds,
        resource_version=meta.get("resourceVersion") if as_observed else None,
        cause=cause,
    )


def typed_ref(obj: dict[str, Any], kind: str, api_version: str = "v1", *, force: bool = False,
              as_observed: bool = False, cause: Optional[str] = None, grace_seconds: Optional[int] = None) -> ObjectRef:
    """A reference to an observed object; items of a list response carry no apiVersion/kind."""
    typed = {**obj, "apiVersion": obj.get("apiVersion") or api_version, "kind": obj.get("kind") or kind}
    return ref(typed, force=force, as_observed=as_observed, cause=cause, grace_seconds=grace_seconds)


def node_of(pod: dict[str, Any]) -> str:
    return (pod.get("spec") or {}).get("nodeName") or "(none)"


def exit_code(pod: dict[str, Any], container: str) -> int:
    """The framework container's exit code, or the references' placeholder 0xBEEF."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            terminated = (cs.get("state") or {}).get("terminated")
            if terminated is not None and terminated.get("exitCode") is not None:
                code: int = terminated["exitCode"]
                return code
    return UNKNOWN_EXIT_CODE


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: Optional[str]) -> Optional[datetime]:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def is_terminating(obj: dict[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


class ChildIndex:
    """Observed objects by lowercase replica type and index, and by name.

    A slot normally holds one object; the rare index with several (the reference only logs
    them) is listed in ``duplicates`` so the hot path allocates nothing per object.
    """

    def __init__(self, objects: list[dict[str, Any]]):
        self.by_slot: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
        self.duplicates: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(dict)
        self.by_name: dict[str, dict[str, Any]] = {}
        self.rendezvous: list[dict[str, Any]] = []
        for obj in objects:
            meta = obj.get("metadata") or {}
            labels = meta.get("labels") or {}
            self.by_name[meta.get("name", "")] = obj
            rtype, index = labels.get(c.LABEL_REPLICA_TYPE), labels.get(c.LABEL_REPLICA_INDEX)
            if rtype is None or index is None or not index.isdigit():
                if labels.get(c.LABEL_COMPONENT) == RENDEZVOUS_COMPONENT:
                    self.rendezvous.append(obj)
                continue  # not a replica (the reference skips these too)
            slots = self.by_slot[rtype]
            i = int(index)
            first = slots.setdefault(i, obj)
            if first is not obj:
                self.duplicates[rtype].setdefault(i, [first]).append(obj)

    def slots(self, rtype: str) -> dict[int, dict[str, Any]]:
        """Index → object; an index listed in ``duplicated(rtype)`` has more than one."""
        return self.by_slot.get(rtype.lower(), {})

    def duplicated(self, rtype: str) -> dict[int, list[dict[str, Any]]]:
        return self.duplicates.get(rtype.lower(), {})

    def missing(self, rtype: str, replicas: int, limit: int) -> list[int]:
        """Up to ``limit`` indices below ``replicas`` with no object, lowest first.

        Looks at no more indices than there are objects plus ``limit``, whatever ``replicas`` is.
        """
        slots, index = self.slots(rtype), 0
        if len(slots) == replicas and (not slots or max(slots) == replicas - 1):
            return []  # indices are distinct and non-negative: exactly 0 … replicas-1, none missing
        out: list[int] = []
        while index < replicas and len(out) < limit:
            if index not in slots:
                out.append(index)
            index += 1
        return out

    def missing_of(self, rtype: str, indices: Collection[int], limit: int) -> list[int]:
        """Up to ``limit`` of ``indices`` with no object, lowest first."""
        slots = self.slots(rtype)
        return sorted(index for index in indices if index not in slots)[:limit]

    def of_type(self, rtype: str) -> list[dict[str, Any]]:
        """Every object of ``rtype``, duplicates on one index included."""
        out = list(self.slots(rtype).values())
        out += [obj for objs in self.duplicated(rtype).values() for obj in objs[1:]]
        return out

    def replicas(self) -> list[dict[str, Any]]:
        out = [obj for slots in self.by_slot.values() for obj in slots.values()]
        out += [obj for dupes in self.duplicates.values() for objs in dupes.values() for obj in objs[1:]]
        return out
