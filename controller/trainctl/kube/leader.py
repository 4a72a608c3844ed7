"""Leader election on a ``coordination.k8s.io/v1`` Lease, so that one replica acts at a time.

The Python client only ships a ConfigMap lock, so this is the Lease protocol written out
(the same rules as client-go's ``leaderelection``):

- a candidate takes the Lease when it is free (no holder) or expired; expiry is judged by
  the candidate's own monotonic clock from the moment it last saw the record change, never
  by comparing ``renewTime`` with its wall clock, so clock skew between nodes cannot cause
  two leaders;
- every write is a PUT carrying the observed resourceVersion, so two candidates racing for
  the same Lease cannot both win;
- the leader renews every ``retry_period``; if it cannot renew within ``renew_deadline`` it
  steps down (``on_lost``) before anyone else may take over;
- :meth:`release` on shutdown empties the holder so a successor starts at once.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import LEASES

log = logging.getLogger("trainctl.controller.leader")


def _micro_time(now: Optional[datetime] = None) -> str:
    return (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_lost: Optional[Callable[[], None]] = None,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_lost = on_lost
        self.is_leader = threading.Event()
        self._stop = threading.Event()
        self._observed: Optional[dict[str, Any]] = None
        self._observed_spec: Optional[tuple[Any, ...]] = None
        self._observed_at = 0.0
        self._thread: Optional[threading.Thread] = None

    # --- the protocol ---------------------------------------------------------------------
    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the Lease afterwards."""
        now = datetime.now(timezone.utc)
        lease = self.client.get_or_none(LEASES, self.namespace, self.name)
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, int(round(self.lease_duration))),
            "renewTime": _micro_time(now),
        }
        if lease is None:
            spec["acquireTime"] = _micro_time(now)
            spec["leaseTransitions"] = 0
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": spec,
            }
            created = self.client.create(LEASES, body)
            if created.existed:
                return False  # another candidate created it first
            self._see(created.object)
            return True

        self._see(lease)
        current = lease.get("spec") or {}
        holder = current.get("holderIdentity") or ""
        if holder and holder != self.identity:
            duration = float(current.get("leaseDurationSeconds") or self.lease_duration)
            if time.monotonic() < self._observed_at + duration:
                return False  # held, and not expired by our own clock
        if holder == self.identity:
            spec["acquireTime"] = current.get("acquireTime") or _micro_time(now)
            spec["leaseTransitions"] = current.get("leaseTransitions") or 0
        else:
            spec["acquireTime"] = _micro_time(now)
            spec["leaseTransitions"] = (current.get("leaseTransitions") or 0) + 1
        lease["spec"] = spec
        try:
            updated = self.client.replace(LEASES, lease)
        except ApiError as exc:
            if exc.code == 409:
                return False  # someone else wrote first
            raise
        self._see(updated)
        return True

    def _see(self, lease: Optional[dict[str, Any]]) -> None:
        spec = (lease or {}).get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self._observed_spec:
            self._observed_spec = record
            self._observed_at = time.monotonic()
        self._observed = lease

    def release(self) -> None:
        """Give the Lease up (only if we hold it), so a successor need not wait for expiry."""
        if not self.is_leader.is_set():
            return
        self.is_leader.clear()
        try:
            lease = self.client.get_or_none(LEASES, self.namespace, self.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["leaseDurationSeconds"] = 1
            lease["spec"]["renewTime"] = _micro_time()
            self.client.replace(LEASES, lease)
            log.info("released the lease", extra={"lease": f"{self.namespace}/{self.name}"})
        except ApiError as exc:
            log.warning("could not release the lease", extra={"error": str(exc)})

    # --- the loop ---------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.retry_period * 2 + 5)

    def _attempt(self) -> bool:
        try:
            return self.try_acquire_or_renew()
        except ApiError as exc:
            log.info("lease attempt failed", extra={"error": str(exc)})
            return False

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._attempt():
                break
            self._stop.wait(self.retry_period)
        if self._stop.is_set():
            return
        self.is_leader.set()
        log.info("became leader", extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity})
        last_renew = time.monotonic()
        while not self._stop.wait(self.retry_period):
            if self._attempt():
                last_renew = time.monotonic()
            elif time.monotonic() - last_renew > self.renew_deadline:
                self.is_leader.clear()
                log.error("lost the lease", extra={"lease": f"{self.namespace}/{self.name}"})
                if self.on_lost is not None:
                    self.on_lost()
                return
