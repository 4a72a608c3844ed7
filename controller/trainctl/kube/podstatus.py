"""Writing pods' status: in order per pod, only when it changed, retried until it lands.

Pod workers report a status after every change; the kubelet's admission and the
scheduler write single conditions. All of it goes through the status subresource with
the pod's uid as a precondition, so the news of a force-deleted pod never lands on a new
pod that took its name. A write that fails (the API server restarting) is kept and
retried by the sync loop, so a pod's last state is never lost.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import PODS

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class StatusWriter:
    """The latest status per pod uid, what was written, and what must be retried."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._lock = threading.Lock()  # guards the four maps below
        self._latest: dict[str, tuple[Obj, Obj]] = {}
        self._written: dict[str, Obj] = {}
        self._retry: set[str] = set()
        self._pod_locks: dict[str, threading.Lock] = {}

    def patch(self, meta: Obj, patch: Obj) -> None:
        """Patch the status of exactly this pod (raises :class:`ApiError`)."""
        if meta.get("uid"):
            patch = {**patch, "metadata": {"uid": meta["uid"]}}
        self._client.patch(PODS, meta.get("namespace"), meta["name"], patch, subresource="status")

    def report(self, pod: Obj, status: Obj) -> None:
        """Write ``status`` for ``pod`` unless it is what was written last; never raises."""
        uid = pod["metadata"]["uid"]
        with self._lock:
            self._latest[uid] = (pod, status)
        self._write(uid)

    @property
    def retrying(self) -> bool:
        with self._lock:
            return bool(self._retry)

    def retry(self) -> None:
        """Write again what failed before."""
        with self._lock:
            failed = list(self._retry)
        for uid in failed:
            self._write(uid)

    def forget(self, keep: set[str]) -> None:
        """Drop what is known of pods not in ``keep`` (unless a write of theirs is pending)."""
        with self._lock:
            for table in (self._written, self._latest, self._pod_locks):
                for uid in [u for u in table if u not in keep and u not in self._retry]:
                    del table[uid]

    def _write(self, uid: str) -> None:
        with self._lock:
            pod_lock = self._pod_locks.setdefault(uid, threading.Lock())
        with pod_lock:  # one write at a time per pod, so they land in order
            with self._lock:
                if uid not in self._latest:
                    return
                pod, status = self._latest[uid]
                if self._written.get(uid) == status:
                    self._retry.discard(uid)
                    return
            meta = pod["metadata"]
            try:
                self.patch(meta, {"status": status})
            except Exception as exc:  # an API error, or no connection while the API server restarts
                # 404: the pod is gone; 409: its name now belongs to a new pod (uid precondition)
                if not (isinstance(exc, ApiError) and exc.code in (404, 409)):
                    with self._lock:
                        self._retry.add(uid)
                    log.warning("status of pod %s/%s: %s", meta.get("namespace"), meta["name"], exc)
                    return
            with self._lock:
                self._written[uid] = status
                self._retry.discard(uid)
