"""Expectations: what the controller wrote and has not yet seen in its cache.

The informer cache lags behind the controller's own writes. Reconciling a job whose cache
does not yet show the pods just created would create them again; reconciling before a
deleted pod's removal shows up would count its failure twice. So each write is recorded
here and the job is not reconciled until the cache has caught up (the watch event that
catches up also re-queues the job), or until the expectation is older than ``ttl``
(client-go's and the reference's five minutes), in case an event was lost for good.

Unlike the reference's add/del counters, expectations are names and uids checked against
the cache itself: a relist, a replayed event or an AlreadyExists answer cannot make the
counts drift. A create is seen only when the cached object is the job's own (its controller
owner's uid): a job re-created under the same name must not take its predecessor's
terminating pod, still in the cache, for the pod it has just created.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Optional

from trainctl.kube.restmapper import controller_owner

# (kind, namespace, name) of a child.
ChildKey = tuple[str, str, str]

DEFAULT_TTL = 300.0


@dataclass
class _Pending:
    # child key -> uid of the job that must own it
    creates: dict[ChildKey, str] = field(default_factory=dict)
    # child key -> uid that must disappear (or start terminating)
    deletes: dict[ChildKey, Optional[str]] = field(default_factory=dict)
    since: float = field(default_factory=time.monotonic)


class Expectations:
    def __init__(self, ttl: float = DEFAULT_TTL) -> None:
        self._ttl = ttl
        self._pending: dict[Hashable, _Pending] = {}
        self._lock = threading.Lock()

    def expect_creates(self, job: Hashable, owner_uid: str, children: list[ChildKey]) -> None:
        with self._lock:
            pending = self._pending.setdefault(job, _Pending())
            pending.creates.update((child, owner_uid) for child in children)
            pending.since = time.monotonic()

    def expect_deletes(self, job: Hashable, children: list[tuple[ChildKey, Optional[str]]]) -> None:
        with self._lock:
            pending = self._pending.setdefault(job, _Pending())
            pending.deletes.update(children)
            pending.since = time.monotonic()

    def creation_failed(self, job: Hashable, child: ChildKey) -> None:
        """A create that the server refused will never show up: stop waiting for it."""
        with self._lock:
            pending = self._pending.get(job)
            if pending is not None:
                pending.creates.pop(child, None)

    def deletion_failed(self, job: Hashable, child: ChildKey) -> None:
        with self._lock:
            pending = self._pending.get(job)
            if pending is not None:
                pending.deletes.pop(child, None)

    def satisfied(self, job: Hashable, lookup: Callable[[ChildKey], Optional[dict[str, Any]]]) -> bool:
        """True when the cache (``lookup``) shows every expected write, or they expired.

        Satisfied entries are dropped, so the check gets cheaper as the cache catches up.
        """
        with self._lock:
            pending = self._pending.get(job)
            if pending is None:
                return True
            if time.monotonic() - pending.since > self._ttl:
                del self._pending[job]
                return True
            pending.creates = {key: uid for key, uid in pending.creates.items() if not _owned(lookup(key), uid)}
            for key, uid in list(pending.deletes.items()):
                current = lookup(key)
                if (
                    current is None
                    or (uid and current["metadata"].get("uid") != uid)
                    or current["metadata"].get("deletionTimestamp")
                ):
                    del pending.deletes[key]
            if pending.creates or pending.deletes:
                return False
            del self._pending[job]
            return True

    def expires_in(self, job: Hashable) -> float:
        """Seconds until the job's expectations lapse (0 when it has none)."""
        with self._lock:
            pending = self._pending.get(job)
            return 0.0 if pending is None else max(0.0, self._ttl - (time.monotonic() - pending.since))

    def forget(self, job: Hashable) -> None:
        with self._lock:
            self._pending.pop(job, None)


def _owned(obj: Optional[dict[str, Any]], uid: str) -> bool:
    owner = controller_owner(obj) if obj is not None else None
    return owner is not None and owner.get("uid") == uid
