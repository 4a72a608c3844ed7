"""How the shell names a job: its work-queue key, and the labels its kind gives Events and metrics.

Informer handlers, the work queue, expectations and every per-job memory of the shell are
keyed by the same triple; a job's kind also says which component its Events come from and
which ``framework`` label its metrics carry. Kept in one place so those parts cannot drift.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from trainctl.api import kinds
from trainctl.kube import restmapper as r


class JobKey(NamedTuple):
    """(kind, namespace, name): a tuple, so a plain triple is an equal key."""

    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, job: dict[str, Any]) -> JobKey:
        meta = job["metadata"]
        return cls(job.get("kind", ""), meta.get("namespace") or "", meta["name"])

    @classmethod
    def owner_of(cls, child: dict[str, Any]) -> Optional[JobKey]:
        """The key of the object that controls ``child`` (its controller ownerReference)."""
        owner = r.controller_owner(child)
        if owner is None:
            return None
        return cls(owner.get("kind", ""), child["metadata"].get("namespace") or "", owner.get("name", ""))

    @property
    def namespaced_name(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def component(self) -> str:
        """The source of the job's Events (the kind's controller name)."""
        found = kinds.find(self.kind)
        return found.controller_name if found is not None else "trainctl"

    @property
    def framework(self) -> str:
        """The ``framework`` label of the job's metrics."""
        found = kinds.find(self.kind)
        return found.framework if found is not None else ""


def is_job_kind(kind: Optional[str]) -> bool:
    return kinds.find(kind) is not None
