"""The local kubelet: node, scheduler, pod workers and Service networking in one process.

Every watch event marks the node dirty; one sync thread then looks at the whole picture
(it is one machine: a few hundred pods at most) and acts: force-deleted pods are killed,
terminating pods are stopped and removed, pending pods are bound or told why not, bound
pods get a worker, and the Service proxy and hosts file are brought up to date. Workers
report their pods' status themselves.

When the kubelet starts it kills any process group a previous kubelet on this directory
left behind and marks the pods it was running Failed: processes are never adopted, so
what happens after a crash does not depend on timing.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from trainctl.controller.kube.client import ApiError, KubeClient
from trainctl.controller.kube.informer import Informer
from trainctl.controller.kube.resources import CONFIGMAPS, LEASES, NAMESPACES, NODES, PODS, SECRETS, SERVICES, controller_owner

from ..network import HOST_IP, cluster_ranges
from ..network.hosts import HostsFile, service_fqdn
from ..network.ipam import PodIPAllocator
from ..network.names import Pending, Resolution, rewrite
from ..network.proxy import Backend, Frontend, ServiceProxy
from . import node as nodes
from .pod_worker import PodWorker
from .runtime import ProcessRegistry, now_rfc3339
from .scheduler import (DEVICE_RESOURCES, MACHINE_PORT_PROBLEM, fit, is_terminal, pod_requests, port_free_on_machine,
                        wants_this_scheduler)

log = logging.getLogger(__name__)

Obj = dict[str, Any]
DEFAULT_NODE_NAME = "trainctl-local"
RETRY_SECONDS = 2.0


@dataclass
class KubeletConfig:
    directory: Path
    kubeconfig: Path
    node_name: str = DEFAULT_NODE_NAME
    gpus: int = 0
    npus: int = 0
    workdir: Path = field(default_factory=Path.cwd)
    backoff_base: float = 10.0
    backoff_cap: float = 300.0
    heartbeat_seconds: float = 10.0
    # Pod addresses; by default this directory's slice of the pod space (network.cluster_ranges).
    pod_cidr: Optional[str] = None


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata", {})


def selects(selector: Optional[dict[str, str]], pod: Obj) -> bool:
    labels = _meta(pod).get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _is_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions") or [])


def _creation_order(pod: Obj) -> tuple[str, str, str]:
    meta = _meta(pod)
    return meta.get("creationTimestamp") or "", meta.get("namespace", ""), meta.get("name", "")


class Kubelet:
    """Runs pods bound to one Node as local process groups."""

    def __init__(self, config: KubeletConfig) -> None:
        self.config = config
        self.node_name = config.node_name
        self.host_ip = HOST_IP
        # No client-side retries or rate limit: the sync loop retries what failed, and a
        # failed write must reach it at once (the API server may be restarting).
        self.client = KubeClient.from_kubeconfig(str(config.kubeconfig), qps=0, max_attempts=1, pool_size=8)
        self.allocatable: dict[str, Any] = nodes.capacity(config.gpus, config.npus)
        kubelet_dir = config.directory / "kubelet"
        self.registry = ProcessRegistry(kubelet_dir / "processes")
        self.pods_dir = config.directory / "pods"
        self.backoff_base = config.backoff_base
        self.backoff_cap = config.backoff_cap
        self.hosts = HostsFile(config.directory / "network")
        self.ips = PodIPAllocator(config.pod_cidr or cluster_ranges(config.directory)[0])
        self.proxy = ServiceProxy()
        self._dirty = threading.Event()
        self._stopped = threading.Event()
        self._changed = threading.Condition()
        self._lock = threading.RLock()
        self.workers: dict[str, PodWorker] = {}
        self._devices: dict[str, dict[str, list[int]]] = {}
        self._finished: set[str] = set()
        self._deleting: set[str] = set()
        self._just_bound: dict[str, Obj] = {}
        self._unschedulable: dict[str, str] = {}
        self._written: dict[str, Obj] = {}
        self._latest_status: dict[str, tuple[Obj, Obj]] = {}
        self._status_retry: set[str] = set()
        self._status_lock = threading.Lock()  # guards the three above and _status_locks
        self._status_locks: dict[str, threading.Lock] = {}
        self._waiting_for_machine_ports = False
        self.pods = self._informer(PODS)
        self.services = self._informer(SERVICES)
        self._node: Obj = {}
        self._ready_since = now_rfc3339()
        self._threads: list[threading.Thread] = []

    # --- lifecycle ------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> None:
        killed = self.registry.kill_leftovers()
        if killed:
            log.info("stopped %d process group(s) left by a previous kubelet", len(killed))
        self.hosts.install_resolver()
        self.proxy.start()
        self._register_node()
        self.pods.start()
        self.services.start()
        deadline = time.monotonic() + timeout
        if not all(i.synced.wait(max(0.0, deadline - time.monotonic())) for i in (self.pods, self.services)):
            raise TimeoutError("the API server did not answer the kubelet's list requests")
        self._fail_orphans()
        for target, name in ((self._sync_loop, "sync"), (self._heartbeat_loop, "heartbeat")):
            thread = threading.Thread(target=target, name=f"kubelet-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        self._dirty.set()

    def stop(self, grace_cap: float = 10.0) -> None:
        """Stop every pod (SIGTERM, then SIGKILL after at most ``grace_cap`` s) and leave."""
        self._stopped.set()
        self._dirty.set()
        with self._lock:
            workers = list(self.workers.values())
        stoppers = [threading.Thread(target=w.stop, args=(min(grace_cap, self._grace(w.pod)),), daemon=True)
                    for w in workers]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join()
        self.registry.kill_leftovers()
        try:
            self._write_node_status(ready=False, message="kubelet stopped")
        except (ApiError, OSError) as exc:
            log.debug("node status on stop: %s", exc)
        self.pods.stop()
        self.services.stop()
        for thread in self._threads:
            thread.join(timeout=10)
        self.client.close()
        self.proxy.stop()

    def wait_for_change(self, timeout: float) -> None:
        with self._changed:
            self._changed.wait(timeout)

    def _informer(self, resource: Any) -> Informer:
        """A cache of every ``resource`` in the cluster; any change marks the node dirty, and so
        does each relist (what failed while disconnected may be retried now)."""
        informer = Informer(self.client, resource, retry_delay=0.05, max_retry_delay=2.0, on_synced=self._dirty.set)
        informer.add_handler(lambda event, new, old: self._on_event(event, new or old or {}))
        return informer

    # --- node -----------------------------------------------------------------------------
    def _register_node(self) -> None:
        node = self.client.get_or_none(NODES, None, self.node_name)
        if node is None:
            node = self.client.create(NODES, nodes.node_object(self.node_name)).object or self.client.get(NODES, None, self.node_name)
        self._node = node
        self._write_node_status(ready=True, message="kubelet is posting ready status")
        self._renew_lease()

    def _write_node_status(self, ready: bool, message: str) -> None:
        status = nodes.node_status(self.node_name, self.allocatable, ready, message, self._ready_since)
        try:
            self.client.patch(NODES, None, self.node_name, {"status": status}, subresource="status")
        except ApiError as exc:
            if exc.code not in (404, 405):
                raise
            self.client.patch(NODES, None, self.node_name, {"status": status})

    def _renew_lease(self) -> None:
        try:
            self.client.patch(LEASES, nodes.LEASE_NAMESPACE, self.node_name,
                              {"spec": {"renewTime": nodes.micro_time(), "holderIdentity": self.node_name}})
        except ApiError as exc:
            if exc.code != 404:
                raise
            self.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": nodes.LEASE_NAMESPACE}})
            self.client.create(LEASES, nodes.lease_object(self._node))

    def _heartbeat_loop(self) -> None:
        beats = 0
        while not self._stopped.wait(self.config.heartbeat_seconds):
            try:
                self._renew_lease()
                beats += 1
                if beats % 6 == 0:  # node status once a minute, the lease every beat
                    self._write_node_status(ready=True, message="kubelet is posting ready status")
            except (ApiError, OSError) as exc:
                log.debug("heartbeat: %s", exc)
            except Exception as exc:  # urllib3 errors while the API server restarts
                log.debug("heartbeat: %s", exc)

    # --- events and the sync loop -----------------------------------------------------------
    def _on_event(self, kind: str, obj: Obj) -> None:
        if obj.get("kind") in (None, "Pod") and kind != "DELETED" and obj.get("spec", {}).get("containers") is not None:
            worker = self.workers.get(_meta(obj).get("uid", ""))
            if worker is not None:
                worker.update(obj)
        self._dirty.set()

    def _sync_loop(self) -> None:
        while not self._stopped.is_set():
            # A port held outside the cluster frees without any API event, and a failed status
            # write has no event to wait for: look again soon.
            self._dirty.wait(RETRY_SECONDS if self._waiting_for_machine_ports or self._status_retry else None)
            if self._stopped.is_set():
                break
            self._dirty.clear()
            try:
                self.sync()
            except Exception:
                log.exception("kubelet sync failed; retrying on the next event")
                self._stopped.wait(0.5)
                self._dirty.set()
            with self._changed:
                self._changed.notify_all()

    def sync(self) -> None:
        pods = self.pods.store.list()
        by_uid = {_meta(p).get("uid"): p for p in pods}
        with self._lock:
            for uid in list(self._just_bound):
                if by_uid.get(uid, {}).get("spec", {}).get("nodeName") or uid not in by_uid:
                    self._just_bound.pop(uid)
            self._finished &= set(by_uid)
            self._deleting &= set(by_uid) | set(self.workers)
            self._unschedulable = {u: m for u, m in self._unschedulable.items() if u in by_uid}
            # A pod that vanished from the API (force deletion) loses its processes at once.
            for uid, worker in list(self.workers.items()):
                if uid not in by_uid and uid not in self._deleting:
                    self._deleting.add(uid)
                    threading.Thread(target=self._terminate, args=(worker, None), daemon=True).start()
        with self._status_lock:
            retry = list(self._status_retry)
        for uid in retry:
            self._write_status(uid)
        with self._status_lock:
            for table in (self._written, self._latest_status, self._status_locks):
                for uid in [u for u in table if u not in by_uid and u not in self.workers and u not in self._status_retry]:
                    del table[uid]
        self._remove_logs_of_removed_pods(set(by_uid))
        for pod in pods:
            if _meta(pod).get("deletionTimestamp") and self._on_this_node(pod):
                self._handle_deletion(pod)
        self._schedule(pods)
        for pod in pods:
            if self._on_this_node(pod) and not _meta(pod).get("deletionTimestamp") and not self._stopped.is_set():
                try:
                    self._admit(pod)
                except (AttributeError, TypeError, ValueError, KeyError) as exc:
                    self._reject(pod, "UnexpectedAdmissionError",
                                 f"the local kubelet cannot read this pod's spec: {exc!r}")
        self._sync_network(pods)

    def _on_this_node(self, pod: Obj) -> bool:
        uid = _meta(pod).get("uid")
        return pod.get("spec", {}).get("nodeName") == self.node_name or uid in self._just_bound

    # --- deletion -------------------------------------------------------------------------
    def _remove_logs_of_removed_pods(self, present: set[str]) -> None:
        """Container logs go with their pod, as the real kubelet's garbage collection does."""
        if not self.pods_dir.is_dir():
            return
        for entry in self.pods_dir.iterdir():
            if entry.name not in present and entry.name not in self.workers:
                shutil.rmtree(entry, ignore_errors=True)

    @staticmethod
    def _grace(pod: Obj) -> float:
        grace = _meta(pod).get("deletionGracePeriodSeconds")
        if grace is None:
            grace = pod.get("spec", {}).get("terminationGracePeriodSeconds", 30)
        return float(grace or 0)

    def _handle_deletion(self, pod: Obj) -> None:
        uid = _meta(pod)["uid"]
        with self._lock:
            if uid in self._deleting:
                return
            self._deleting.add(uid)
            worker = self.workers.get(uid)
        threading.Thread(target=self._terminate, args=(worker, pod), daemon=True,
                         name=f"terminate-{_meta(pod).get('name')}").start()

    def _terminate(self, worker: Optional[PodWorker], pod: Optional[Obj]) -> None:
        """Stop the pod's processes; then, if it is still in the API, remove it for good."""
        try:
            if worker is not None:
                worker.stop(self._grace(pod) if pod is not None else 0.0)
            if pod is not None:
                meta = _meta(pod)
                try:
                    self.client.delete(PODS, meta.get("namespace"), meta["name"], grace_period_seconds=0,
                                       uid=meta["uid"])
                except ApiError as exc:
                    log.warning("delete pod %s/%s: %s", meta.get("namespace"), meta["name"], exc)
        finally:
            self._dirty.set()

    # --- scheduling -----------------------------------------------------------------------
    def _bound_pods(self, pods: list[Obj]) -> list[Obj]:
        bound = [p for p in pods if self._on_this_node(p) and not is_terminal(p)
                 and _meta(p).get("uid") not in self._finished]
        return bound

    def _schedule(self, pods: list[Obj]) -> None:
        pending = sorted((p for p in pods if not p.get("spec", {}).get("nodeName")
                          and _meta(p).get("uid") not in self._just_bound
                          and not _meta(p).get("deletionTimestamp") and not is_terminal(p)
                          and wants_this_scheduler(p)), key=_creation_order)
        if not pending:
            return
        bound = self._bound_pods(pods)
        self._waiting_for_machine_ports = False
        for pod in pending:
            uid = _meta(pod)["uid"]
            if uid in self._finished:
                continue
            try:
                decision = fit(pod, self.allocatable, bound, self._allocated_devices(), port_free_on_machine)
            except (AttributeError, TypeError, ValueError, KeyError) as exc:
                self._reject(pod, "UnexpectedAdmissionError", f"the local kubelet cannot read this pod's spec: {exc!r}")
                continue
            if decision.fits:
                if self._bind(pod):
                    bound.append(pod)
                    with self._lock:
                        self._just_bound[uid] = pod
                        self._unschedulable.pop(uid, None)
            else:
                self._waiting_for_machine_ports |= MACHINE_PORT_PROBLEM in decision.message
                if self._unschedulable.get(uid) != decision.message:
                    self._mark_unschedulable(pod, decision.message)

    def _allocated_devices(self) -> dict[str, set[int]]:
        taken: dict[str, set[int]] = {}
        with self._lock:
            for devices in self._devices.values():
                for resource, indices in devices.items():
                    taken.setdefault(resource, set()).update(indices)
        return taken

    def _bind(self, pod: Obj) -> bool:
        meta = _meta(pod)
        binding = {"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": meta["name"], "namespace": meta.get("namespace"), "uid": meta["uid"]},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_name}}
        try:
            self.client.create(PODS, binding, subresource="binding")
            return True
        except ApiError as exc:
            if exc.code != 404:  # 404: the pod is gone; the next sync no longer sees it
                log.info("bind %s/%s: %s", meta.get("namespace"), meta["name"], exc)
            return False

    def _mark_unschedulable(self, pod: Obj, message: str) -> None:
        meta = _meta(pod)
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                     "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
        try:
            self._patch_status(meta, {"status": {"phase": "Pending", "conditions": [condition]}})
            self._unschedulable[meta["uid"]] = message
        except ApiError as exc:
            log.debug("unschedulable status of %s: %s", meta["name"], exc)

    # --- running pods ---------------------------------------------------------------------
    def _admit(self, pod: Obj) -> None:
        uid = _meta(pod)["uid"]
        with self._lock:
            if uid in self.workers or uid in self._finished or is_terminal(pod):
                return
            wanted = pod_requests(pod)
            devices: dict[str, list[int]] = {}
            taken = self._allocated_devices()
            for resource in DEVICE_RESOURCES:
                count = int(wanted.get(resource, 0))
                if count > 0:
                    free = [i for i in range(int(float(self.allocatable.get(resource, 0))))
                            if i not in taken.get(resource, set())]
                    if len(free) < count:  # bound here by someone else, without room
                        self._reject(pod, f"OutOf{resource}", f"Pod was rejected: Node didn't have enough resource: {resource}")
                        return
                    devices[resource] = free[:count]
            self._devices[uid] = devices
            pod_ip = self.ips.allocate(uid)
            worker = PodWorker(self, pod, pod_ip, devices, self._worker_done)
            self.workers[uid] = worker
        worker.start()

    def _reject(self, pod: Obj, reason: str, message: str) -> None:
        """Fail a pod this node will not run (a real kubelet's admission rejection)."""
        meta = _meta(pod)
        self._finished.add(meta["uid"])
        log.warning("pod %s/%s rejected: %s", meta.get("namespace"), meta["name"], message)
        try:
            self._patch_status(meta, {"status": {"phase": "Failed", "reason": reason, "message": message}})
        except ApiError as exc:
            log.warning("status of pod %s/%s: %s", meta.get("namespace"), meta["name"], exc)

    def _worker_done(self, uid: str) -> None:
        with self._lock:
            self.workers.pop(uid, None)
            self._devices.pop(uid, None)
            self._finished.add(uid)
            self.ips.release(uid)
        self._dirty.set()

    def _fail_orphans(self) -> None:
        """Pods this node was running before a restart: their processes are gone; say so."""
        for pod in self.pods.store.list():
            meta = _meta(pod)
            if pod.get("spec", {}).get("nodeName") != self.node_name or is_terminal(pod):
                continue
            if meta.get("deletionTimestamp"):
                continue  # the sync loop removes it
            statuses = []
            for status in pod.get("status", {}).get("containerStatuses") or []:
                status = dict(status)
                if "running" in (status.get("state") or {}):
                    status["state"] = {"terminated": {"exitCode": 137, "reason": "Error", "message":
                                       "the kubelet restarted and stopped the container",
                                       "startedAt": status["state"]["running"].get("startedAt"),
                                       "finishedAt": now_rfc3339()}}
                    status["ready"] = False
                    status["started"] = False
                statuses.append(status)
            patch: Obj = {"status": {"phase": "Failed", "reason": "KubeletRestarted",
                                     "message": "The local kubelet restarted; the pod's processes were stopped."}}
            if statuses:
                patch["status"]["containerStatuses"] = statuses
            try:
                self._patch_status(meta, patch)
                self._finished.add(meta["uid"])
            except ApiError as exc:
                log.warning("marking pod %s/%s failed: %s", meta.get("namespace"), meta["name"], exc)

    # --- what pod workers call ----------------------------------------------------------------
    def report(self, pod: Obj, status: Obj) -> None:
        """Write a pod's status through the status subresource when it changed. A write that
        fails (the API server restarting) is kept and retried by the sync loop, so a pod's last
        state is never lost."""
        uid = _meta(pod)["uid"]
        with self._status_lock:
            self._latest_status[uid] = (pod, status)
        self._write_status(uid)

    def _write_status(self, uid: str) -> None:
        with self._status_lock:
            lock = self._status_locks.setdefault(uid, threading.Lock())
        with lock:  # one write at a time per pod, so they land in order
            with self._status_lock:
                if uid not in self._latest_status:
                    return
                pod, status = self._latest_status[uid]
                if self._written.get(uid) == status:
                    self._status_retry.discard(uid)
                    return
            meta = _meta(pod)
            try:
                self._patch_status(meta, {"status": status})
            except Exception as exc:  # an API error, or no connection while the API server restarts
                # 404: the pod is gone; 409: its name now belongs to a new pod (uid precondition)
                if not (isinstance(exc, ApiError) and exc.code in (404, 409)):
                    with self._status_lock:
                        self._status_retry.add(uid)
                    log.warning("status of pod %s/%s: %s", meta.get("namespace"), meta["name"], exc)
                    return
            with self._status_lock:
                self._written[uid] = status
                self._status_retry.discard(uid)

    def _patch_status(self, meta: Obj, patch: Obj) -> None:
        """Patch the status of exactly this pod: the uid in the patch is a precondition, so the
        news of a force-deleted pod never lands on a new pod that took its name."""
        if meta.get("uid"):
            patch = {**patch, "metadata": {"uid": meta["uid"]}}
        self.client.patch(PODS, meta.get("namespace"), meta["name"], patch, subresource="status")

    def configmap(self, namespace: str, name: str) -> Optional[Obj]:
        return self.client.get_or_none(CONFIGMAPS, namespace, name)

    def secret(self, namespace: str, name: str) -> Optional[Obj]:
        return self.client.get_or_none(SECRETS, namespace, name)

    def base_env(self, namespace: str) -> dict[str, str]:
        """The kubelet's own environment, with this interpreter's bin dir first on PATH."""
        env = dict(os.environ)
        bin_dir = os.path.dirname(sys.executable)
        env["PATH"] = os.pathsep.join([bin_dir] + [p for p in env.get("PATH", "").split(os.pathsep) if p and p != bin_dir])
        env.pop("KUBECONFIG", None)
        env.update(self.hosts.pod_env(namespace, os.environ.get("PYTHONPATH")))
        return env

    def working_dir(self, container: Obj) -> str:
        wanted = container.get("workingDir")
        if wanted and os.path.isdir(wanted):
            return wanted
        return str(self.config.workdir)

    # --- names and Services -----------------------------------------------------------------
    def _selected_address(self, service: Obj, index: Optional["PodIndex"] = None) -> Resolution:
        """A headless Service's address: its first live pod's IP, None when every pod it
        selects has Succeeded (none will come back, so the name stays unresolved, as DNS
        would leave it), else Pending: the pods are not created yet, or may be replaced."""
        namespace = _meta(service).get("namespace", "default")
        selector = service.get("spec", {}).get("selector")
        candidates = []
        selected = (index or PodIndex(self.pods.store.list())).select(namespace, selector)
        for pod in selected:
            if is_terminal(pod) or _meta(pod).get("deletionTimestamp"):
                continue
            address = self.ips.lookup(_meta(pod).get("uid", ""))
            if address:
                candidates.append((_meta(pod).get("name", ""), address))
        if candidates:
            return min(candidates)[1]
        meta = _meta(service)
        if selected and all(pod.get("status", {}).get("phase") == "Succeeded" for pod in selected):
            return None
        return Pending(f"a pod selected by headless Service {meta.get('namespace', 'default')}/{meta.get('name')}")

    def resolve(self, namespace: str, name: str, owner: Optional[str] = None, fresh: bool = False,
                index: Optional["PodIndex"] = None) -> Resolution:
        """What ``name`` in ``namespace`` reaches. ``owner`` is the asking pod's controller uid:
        a name of a pod with the same controller whose Service does not exist yet is worth
        waiting for (a job's controller creates pods and Services in parallel). ``fresh``
        reads a Service missing from the cache from the API server (its watch event may
        simply not have arrived yet)."""
        service = self.services.store.get(namespace, name)
        if service is None and fresh:
            service = self.client.get_or_none(SERVICES, namespace, name)
        if service is None:
            pod = self.pods.store.get(namespace, name)
            if owner and pod is not None and not is_terminal(pod) and controller_uid(pod) == owner:
                return Pending(f"Service {namespace}/{name} (pod {namespace}/{name} exists, its Service not yet)")
            return None
        spec = service.get("spec", {})
        if spec.get("type") == "ExternalName":
            return spec.get("externalName") or None
        cluster_ip = spec.get("clusterIP")
        if cluster_ip and cluster_ip != "None":
            return cluster_ip
        if cluster_ip == "None":
            if not spec.get("selector"):
                return None
            return self._selected_address(service, index)
        return Pending(f"a cluster IP for Service {namespace}/{name}")

    def rewrite(self, text: str, pod: Obj, memo: Optional[dict[tuple[str, str], Resolution]] = None) -> tuple[str, list[str]]:
        """``text`` with its Service names resolved; ``memo`` shares lookups across one start's
        texts, so a word that merely looks like a Service name is fetched once, not per text."""
        owner = controller_uid(pod)
        memo = {} if memo is None else memo

        def resolve(namespace: str, name: str) -> Resolution:
            if (namespace, name) not in memo:
                memo[namespace, name] = self.resolve(namespace, name, owner, fresh=True)
            return memo[namespace, name]

        return rewrite(text, _meta(pod).get("namespace", "default"), resolve)

    def _sync_network(self, pods: list[Obj]) -> None:
        rules: dict[Frontend, list[Backend]] = {}
        addresses: dict[str, str] = {}
        index = PodIndex(pods)
        for service in self.services.store.list():
            meta, spec = _meta(service), service.get("spec", {})
            resolved = self.resolve(meta.get("namespace", "default"), meta["name"], index=index)
            if isinstance(resolved, str):
                addresses[service_fqdn(meta["name"], meta.get("namespace", "default"))] = resolved
            cluster_ip = spec.get("clusterIP")
            if not cluster_ip or cluster_ip == "None" or spec.get("type") == "ExternalName":
                continue
            endpoints = [p for p in index.select(meta.get("namespace", "default"), spec.get("selector"))
                         if _is_ready(p)
                         and not _meta(p).get("deletionTimestamp") and p.get("status", {}).get("podIP")]
            for port in spec.get("ports") or []:
                if (port.get("protocol") or "TCP") != "TCP":
                    continue
                backends = []
                for pod in sorted(endpoints, key=lambda p: _meta(p).get("name", "")):
                    target = _target_port(port, pod)
                    if target:
                        backends.append((pod["status"]["podIP"], target))
                rules[(cluster_ip, int(port["port"]))] = backends
        self.hosts.write(addresses)
        self.proxy.update(rules)


class PodIndex:
    """Pods by (namespace, label, value), so matching every Service's selector against the
    pods stays cheap when a job has hundreds of replicas, each with its own Service."""

    def __init__(self, pods: list[Obj]) -> None:
        self._by_label: dict[tuple[str, str, str], list[Obj]] = {}
        for pod in pods:
            namespace = _meta(pod).get("namespace", "default")
            for key, value in (_meta(pod).get("labels") or {}).items():
                self._by_label.setdefault((namespace, key, value), []).append(pod)

    def select(self, namespace: str, selector: Optional[dict[str, str]]) -> list[Obj]:
        if not selector:
            return []
        smallest = min((self._by_label.get((namespace, k, v), []) for k, v in selector.items()), key=len)
        return [pod for pod in smallest if selects(selector, pod)]


def controller_uid(pod: Obj) -> Optional[str]:
    return (controller_owner(pod) or {}).get("uid")


def _target_port(port: Obj, pod: Obj) -> Optional[int]:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in pod.get("spec", {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == target:
                return declared.get("containerPort")
    return None
