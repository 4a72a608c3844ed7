"""The local kubelet: one sync loop over the node's parts.

Every watch event marks the node dirty; one sync thread then looks at the whole picture
(it is one machine: a few hundred pods at most) and hands each part its share:
force-deleted and terminating pods to :mod:`.pod_deletion`, pods bound to this node to
:mod:`.pod_admission` (which gives each a :class:`~.pod_worker.PodWorker`),
Services to :mod:`.service_rules`. Pods reach a node through the cluster's one scheduler
(:mod:`trainctl.cluster.scheduler`); a kubelet only runs what is bound to it. Workers report their pods' status through
:class:`~trainctl.kube.podstatus.StatusWriter`; :mod:`.heartbeat` keeps the Node and its Lease alive.

One pod never stops the node from serving the others: a pod whose spec the kubelet cannot
read fails alone (``reason: InvalidSpec``, see :mod:`.podspec`), and each per-pod step runs
on its own, so an error in one is logged (and kept in :attr:`Kubelet.step_errors`, which the
tests check) while the loop goes on with the next pod.

When the kubelet starts it kills any process group a previous kubelet on this directory
left behind and marks the pods it was running Failed: processes are never adopted, so
what happens after a crash does not depend on timing.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, cast

from trainctl.cluster.compute import enforcer as enforcers
from trainctl.cluster.compute.cpu_cap import CapWatcher
from trainctl.cluster.kubelet import node as nodes
from trainctl.cluster.kubelet import paths, podspec, sandbox, thaw, volumes
from trainctl.cluster.kubelet.base_env import HOME_DIRECTORY, base_environment
from trainctl.cluster.kubelet.heartbeat import NodeHeartbeat
from trainctl.cluster.kubelet.kubelet_events import KubeletEvents
from trainctl.cluster.kubelet.paths import inside
from trainctl.cluster.kubelet.pod_admission import Admission
from trainctl.cluster.kubelet.pod_deletion import Terminator, grace_seconds
from trainctl.cluster.kubelet.pod_worker import TERMINATION_MESSAGE_DIRECTORY, PodWorker
from trainctl.cluster.kubelet.runtime import ProcessRegistry, claim_pod_directory, signal_live
from trainctl.cluster.kubelet.sandbox import PodSandbox
from trainctl.cluster.kubelet.service_names import ServiceNames
from trainctl.cluster.kubelet.service_rules import ServiceRules
from trainctl.cluster.kubelet.serviceaccount import DIRECTORY as SERVICE_ACCOUNT_DIRECTORY
from trainctl.cluster.kubelet.serviceaccount import (
    SERVICE_NAME,
    SERVICE_NAMESPACE,
    ServiceAccountFiles,
    api_server_env,
    may_listen_on,
)
from trainctl.cluster.kubelet.streaming.stream_server import PodTarget, StreamingServer, serving_context
from trainctl.cluster.kubelet.usage import UsagePublisher
from trainctl.cluster.network import isolation
from trainctl.cluster.network.forward import Forwarder, HostPort, HostPorts
from trainctl.cluster.network.hosts import HostsFile
from trainctl.cluster.network.names import Resolution
from trainctl.cluster.network.pod_ipam import PodIPAllocator
from trainctl.cluster.network.podnet import IsolatedNetwork, PodNetwork, RouterServices, SharedNetwork
from trainctl.cluster.network.proxy import ServiceProxy
from trainctl.cluster.network.ranges import HOST_IP, cluster_ranges, node_service_address, node_service_cidr
from trainctl.cluster.podutil import is_terminal
from trainctl.kube.client import KubeClient
from trainctl.kube.connect import load_configuration
from trainctl.kube.informer import Informer
from trainctl.kube.podstatus import StatusWriter
from trainctl.kube.restmapper import CONFIGMAPS, ENDPOINTS, PODS, SECRETS, SERVICES

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
    # This node's share of the machine (a quantity each); None: all of it.
    cpu: Optional[str] = None
    memory: Optional[str] = None
    # Pod addresses; by default this directory's slice of the pod space (network.cluster_ranges).
    pod_cidr: Optional[str] = None
    # "cgroup-v2", "cgroup-v1" or "polling"; None: the first that works here.
    resource_enforcer: Optional[str] = None
    metrics_interval: float = 15.0
    # "shared" (the machine's network) or "isolated" (the cluster's router: network.router).
    network: str = isolation.SHARED
    # The streaming server's TLS, as the kubelet's --tls-cert-file, --tls-private-key-file and
    # --client-ca-file; None: the cluster's files for this node (DIR/pki/nodes/NAME, DIR/pki/ca.crt).
    tls_cert_file: Optional[Path] = None
    tls_private_key_file: Optional[Path] = None
    client_ca_file: Optional[Path] = None
    # "auto" (bwrap where it runs here), "bwrap" or "none": the pods' sandbox (.sandbox).
    sandbox: str = sandbox.NONE


def tls_files(config: KubeletConfig) -> tuple[Path, Path, Path]:
    """The streaming server's certificate, key and client CA bundle."""
    home = config.directory / "pki" / "nodes" / config.node_name
    return (config.tls_cert_file or home / "kubelet.crt", config.tls_private_key_file or home / "kubelet.key",
            config.client_ca_file or config.directory / "pki" / "ca.crt")


DATA_DIR_VARIABLE = "TRAINCTL_DATA_DIR"


def namespace_data_dir(directory: Path, namespace: str) -> Path:
    """The directory every pod of ``namespace`` gets in ``$TRAINCTL_DATA_DIR``: the same on
    every node (they are all this machine), kept across pod restarts and ``local down``/``up``,
    and one cluster's own, so two clusters never read each other's checkpoints."""
    return inside(directory / "data", namespace)


def processes_dir(directory: Path, node_name: str) -> Path:
    """Where one node records its pods' process groups: killing or freezing a node acts on
    exactly these (``trainctl local node kill|freeze``)."""
    return directory / "kubelet" / node_name / "processes"


def _meta(obj: Obj) -> Obj:
    return cast("dict[str, Any]", obj.get("metadata", {}))


def _uid(obj: Obj) -> str:
    return str(_meta(obj).get("uid") or "")


def _host_ports(workers: dict[str, PodWorker]) -> set[HostPort]:
    """The TCP hostPorts of the pods running here, each to its pod's containerPort."""
    rules: set[HostPort] = set()
    for worker in workers.values():
        if worker.phase != "Running":
            continue
        for container in worker.pod.get("spec", {}).get("containers") or []:
            for port in container.get("ports") or []:
                host, target = port.get("hostPort"), port.get("containerPort")
                if isinstance(host, int) and isinstance(target, int) and (port.get("protocol") or "TCP") == "TCP":
                    rules.add((host, worker.pod_ip, target))
    return rules


class Kubelet:
    """Runs pods bound to one Node as local process groups (the :class:`PodContext` of its workers)."""

    def __init__(self, config: KubeletConfig) -> None:
        self.config = config
        self.node_name = config.node_name
        self.host_ip = HOST_IP
        self.allocatable: dict[str, Any] = nodes.capacity(config.gpus, config.npus, cpu=config.cpu, memory=config.memory)
        self.pods_dir = config.directory / "pods"
        self.registry = ProcessRegistry(processes_dir(config.directory, config.node_name))
        self.enforcer = enforcers.detect(cluster=enforcers.cluster_key(config.directory), node=config.node_name,
                                         force=config.resource_enforcer)
        log.info("resource limits: %s", self.enforcer.describe())
        self.cpu_cap = CapWatcher(config.directory, config.node_name, self.enforcer)
        self.backoff_base = config.backoff_base
        self.backoff_cap = config.backoff_cap
        isolated = config.network == isolation.ISOLATED
        pod_cidr = config.pod_cidr or (isolation.node_cidr(0) if isolated else cluster_ranges(config.directory)[0])
        self.network: PodNetwork = SharedNetwork()
        self.api_path: Optional[Forwarder] = None
        self.host_ports: Optional[HostPorts] = None
        if isolated:
            self.network = IsolatedNetwork(config.directory, config.node_name, pod_cidr)
            self.network.on_healing = lambda: self._dirty.set()
            self.api_path = Forwarder(self.network.dial_apiserver)
            self.host_ports = HostPorts(self.network.dial)
        log.info("pod network: %s", isolation.DESCRIPTIONS[self.network.mode])
        self.sandbox_mode, why = sandbox.choose(config.sandbox, Path(config.workdir))
        log.info("pod sandbox: %s", sandbox.describe(self.sandbox_mode, why))
        # No client-side retries or rate limit: the sync loop retries what failed, and a
        # failed write must reach it at once (the API server may be restarting).
        self.client = KubeClient(self._api_configuration(), qps=0, max_attempts=1, pool_size=8, component="kubelet")
        self._dirty = threading.Event()
        self._stopped = threading.Event()
        self._thawed = threading.Event()
        self._changed = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self.step_errors: list[str] = []  # per-pod steps that raised: kubelet bugs, never input
        self.pods = self._informer(PODS)
        self.services = self._informer(SERVICES)
        self.endpoints = self._informer(ENDPOINTS)
        ips = PodIPAllocator(pod_cidr)
        self.statuses = StatusWriter(self.client)
        # Events have a client of their own, rate-limited as a kubelet's (--event-qps 50).
        self.events = KubeletEvents(KubeClient(self._api_configuration(), qps=50, max_attempts=3, pool_size=2,
                                               component="kubelet"),
                                    self.node_name)
        self.heartbeat = NodeHeartbeat(self.client, self.node_name, self.allocatable, config.heartbeat_seconds,
                                       events=self.events, labels={isolation.POD_NETWORK_LABEL: self.network.mode,
                                               sandbox.SANDBOX_LABEL: self.sandbox_mode,
                                               **nodes.role_labels(self.node_name, DEFAULT_NODE_NAME)})
        self.admission = Admission(self, self.statuses, ips, self._dirty.set)
        self.terminator = Terminator(self.client, self.pods_dir, self.node_name, self._dirty.set)
        # On a cluster of several nodes each node serves the ClusterIPs at addresses of its
        # own, so its pods' names resolve to its own proxy and its own hosts file.
        node_services = node_service_cidr(config.directory, config.pod_cidr) if config.pod_cidr and not isolated else None
        service_address = functools.partial(node_service_address, service_cidr=cluster_ranges(config.directory)[1],
                                            node_cidr=node_services)
        self.names = ServiceNames(self.client, self.pods.store, self.services.store, ips, service_address)
        network_dir = config.directory / "network"
        self.hosts = HostsFile(network_dir / "nodes" / config.node_name if node_services else network_dir)
        self.proxy = RouterServices(self.network) if isinstance(self.network, IsolatedNetwork) else ServiceProxy()
        self.usage = UsagePublisher(self.client, self.node_name, self.admission.workers,
                                    node_labels=lambda: self.heartbeat.labels, interval=config.metrics_interval)
        self.service_rules = ServiceRules(self.names, self.hosts, self.proxy, publish_names=(
            self.proxy.update_names if isinstance(self.proxy, RouterServices) else None))
        ca_file = load_configuration(str(config.kubeconfig)).ssl_ca_cert
        self.service_accounts = ServiceAccountFiles(self.client, self.pods_dir, Path(ca_file).read_bytes() if ca_file else b"")
        # The proxy serves the kubernetes Service's port 443 where this process may listen on it.
        self._may_listen_on_443 = may_listen_on(443)
        # The API server reaches it with its kubelet client certificate.
        self.streaming = StreamingServer(self, serving_context(*map(str, tls_files(config))), self.host_ip)

    def _api_configuration(self) -> Any:
        """The kubeconfig's server and credentials; in isolated mode the server is the
        kubelet's path through the router (cut while the node is partitioned)."""
        api = load_configuration(str(self.config.kubeconfig))
        if self.api_path is not None:
            api.host = f"https://127.0.0.1:{self.api_path.port}"
            api.refresh_api_key_hook = None  # it would reload the kubeconfig's server on every request
        return api

    # --- lifecycle ------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> None:
        killed = self.registry.kill_leftovers()
        if killed:
            log.info("stopped %d process group(s) left by a previous kubelet", len(killed))
        self.cpu_cap.start()  # a degraded node's cap holds before its first pod runs
        if isinstance(self.network, IsolatedNetwork):
            self.network.attach()
        if self.api_path is not None:
            self.api_path.start()
        self.hosts.install_resolver()
        self.proxy.start()
        self.events.node("Normal", "Starting", "Starting kubelet.")
        self.heartbeat.kubelet_port = self.streaming.start()
        self.heartbeat.register()
        self.pods.start()
        self.services.start()
        self.endpoints.start()
        deadline = time.monotonic() + timeout
        if not all(i.synced.wait(max(0.0, deadline - time.monotonic())) for i in (self.pods, self.services, self.endpoints)):
            raise TimeoutError("the API server did not answer the kubelet's list requests")
        self.admission.fail_orphans(self._listed_pods()[1], self.node_name)
        self._thread = threading.Thread(target=self._sync_loop, name="kubelet-sync", daemon=True)
        self._thread.start()
        self._dirty.set()
        self.usage.start()

    def stop(self, grace_cap: float = 10.0) -> None:
        """Stop every pod (SIGTERM, then SIGKILL after at most ``grace_cap`` s) and leave."""
        self._stopped.set()
        self._dirty.set()
        stoppers = [threading.Thread(target=w.stop, args=(min(grace_cap, grace_seconds(w.pod)),), daemon=True)
                    for w in self.admission.workers().values()]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join()
        self.usage.stop()
        self.cpu_cap.stop()
        self.registry.kill_leftovers()
        self.enforcer.close()
        self.heartbeat.stop()
        self.events.stop()
        self.pods.stop()
        self.services.stop()
        self.endpoints.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.client.close()
        self.events.recorder.client.close()
        self.proxy.stop()
        self.streaming.stop()
        if self.api_path is not None:
            self.api_path.stop()
        if self.host_ports is not None:
            self.host_ports.stop()

    def thawed(self) -> None:
        """SIGCONT arrived: the node was frozen and its pods' processes still are (see
        :mod:`.thaw`). Called from a signal handler, so it only takes note."""
        self._thawed.set()
        self._dirty.set()

    @property
    def workers(self) -> dict[str, PodWorker]:
        """The pods running here, by uid (a snapshot)."""
        return self.admission.workers()

    def _informer(self, resource: Any) -> Informer:
        """A cache of every ``resource`` in the cluster; any change marks the node dirty, and so
        does each relist (what failed while disconnected may be retried now)."""
        informer = Informer(self.client, resource, retry_delay=0.05, max_retry_delay=2.0, on_synced=self._dirty.set)
        informer.add_handler(lambda event, new, old: self._on_event(event, new or old or {}))
        return informer

    # --- events and the sync loop -----------------------------------------------------------
    def _on_event(self, kind: str, obj: Obj) -> None:
        if obj.get("kind") in (None, "Pod") and kind != "DELETED" and isinstance(obj.get("spec"), dict):
            worker = self.admission.workers().get(_uid(obj))
            if worker is not None:
                worker.update(obj)
        self._dirty.set()

    def _sync_loop(self) -> None:
        while not self._stopped.is_set():
            # A failed status write has no event to wait for: look again soon.
            self._dirty.wait(RETRY_SECONDS if self.statuses.retrying else None)
            if self._stopped.is_set():
                break
            self._dirty.clear()
            if self._thawed.is_set():
                self._thawed.clear()
                self._step("resume after a freeze", None, self._resume_after_freeze)
            if isinstance(self.network, IsolatedNetwork) and self.network.healing.is_set():
                self.network.healing.clear()
                self._step("rejoin the pod network", None, self._rejoin_network)
            try:
                self.sync()
            except Exception:
                log.exception("kubelet sync failed; retrying on the next event")
                self.record_error("sync")
                self._stopped.wait(0.5)
                self._dirty.set()
            with self._changed:
                self._changed.notify_all()

    def _resume_after_freeze(self) -> None:
        """Kill the processes of pods deleted while the node was frozen, then resume the rest."""
        present = thaw.bound_pod_uids(self.client, self.node_name)
        if present is not None:
            self.terminator.kill_vanished(present, self.admission.workers())
        resumed = signal_live(thaw.to_resume(self.registry.records(), present), signal.SIGCONT)
        log.info("thawed: resumed %d process group(s)%s", resumed,
                 "" if present is not None else " (the API server did not answer: all of them)")

    def _rejoin_network(self) -> None:
        """The node's partition healed: list its pods afresh, kill the processes of those
        deleted meanwhile (and start stopping those being deleted), then give the pods still
        here their links back, so no old process of a replaced pod reaches its job again."""
        assert isinstance(self.network, IsolatedNetwork)
        try:
            pods, _ = self.client.list(PODS, field_selector=f"spec.nodeName={self.node_name}")
        except Exception as exc:  # the API server is not there yet: again on the next pass
            log.warning("after the partition, listing the node's pods: %s", exc)
            self.network.healing.set()
            self._stopped.wait(0.5)
            self._dirty.set()
            return
        workers = self.admission.workers()
        self.terminator.kill_vanished({_uid(pod) for pod in pods}, workers)
        for pod in pods:
            if _meta(pod).get("deletionTimestamp"):
                self.terminator.delete(pod, workers.get(_uid(pod)))
        live = {_uid(pod) for pod in pods if not _meta(pod).get("deletionTimestamp")} & set(workers)
        self.network.restore(live)
        log.info("partition healed: %d pod(s) back on the network, %d stopped", len(live), len(workers) - len(live))

    def _listed_pods(self) -> tuple[dict[str, Obj], list[Obj]]:
        """Every cached pod with a name and uid, by uid; and those the kubelet can look into.
        A pod whose spec or status is not even an object is rejected, once."""
        by_uid: dict[str, Obj] = {}
        pods = []
        for pod in self.pods.store.list():
            if not podspec.addressable(pod):
                continue  # no name or uid: nothing to act on, nothing to write to
            by_uid[_uid(pod)] = pod
            if podspec.well_formed(pod):
                pods.append(pod)
            elif not self.admission.is_finished(_uid(pod)):
                self._reject_invalid(pod, podspec.problems(pod))
        return by_uid, pods

    def sync(self) -> None:
        by_uid, pods = self._listed_pods()
        present = set(by_uid)
        workers = self.admission.workers()
        self.admission.forget(present)
        self.terminator.forget(present | set(workers))
        self.terminator.kill_vanished(present, workers)
        self.statuses.retry()
        self.statuses.forget(present | set(workers))
        self.terminator.remove_logs(present | set(workers))
        for pod in pods:
            if _meta(pod).get("deletionTimestamp") and self._on_this_node(pod):
                self._step("delete", pod, self.terminator.delete, pod, workers.get(_uid(pod)))
        if not self._stopped.is_set():
            for pod in pods:
                if self._runnable(pod):
                    self._step("admit", pod, self.admission.admit, pod)
        self._step("sync Services", None, self.service_rules.sync, pods, self.services.store.list(),
                   self.endpoints.store.list())
        if self.host_ports is not None:
            self._step("sync hostPorts", None, self.host_ports.sync, _host_ports(self.admission.workers()))

    def _runnable(self, pod: Obj) -> bool:
        """A live pod bound to this node that it can read; a pod it cannot read is rejected
        here, once."""
        meta = _meta(pod)
        if meta.get("deletionTimestamp") or is_terminal(pod) or self.admission.is_finished(_uid(pod)):
            return False
        if not self._on_this_node(pod):
            return False
        problems = podspec.problems(pod)
        if problems:
            self._reject_invalid(pod, problems)
            return False
        return True

    def _reject_invalid(self, pod: Obj, problems: podspec.Problems) -> None:
        self.admission.reject(pod, podspec.INVALID_SPEC, "The local kubelet cannot run this pod: " + "; ".join(problems))

    def _step(self, what: str, pod: Optional[Obj], action: Callable[..., None], *args: Any) -> None:
        """One step for one pod (or one part of the node): whatever it raises stays its own."""
        try:
            action(*args)
        except Exception:
            name = f" of pod {_meta(pod).get('namespace')}/{_meta(pod).get('name')}" if pod else ""
            log.exception("kubelet: %s%s failed; serving the rest", what, name)
            self.record_error(f"{what}{name}")

    def record_error(self, what: str) -> None:
        self.step_errors.append(what)

    def _on_this_node(self, pod: Obj) -> bool:
        return bool(pod.get("spec", {}).get("nodeName") == self.node_name)

    # --- what pod workers call (PodContext) -----------------------------------------------
    def wait_for_change(self, timeout: float) -> None:
        with self._changed:
            self._changed.wait(timeout)

    def report(self, pod: Obj, status: Obj) -> None:
        self.statuses.report(pod, status)

    def rewrite(self, text: str, pod: Obj, memo: Optional[dict[tuple[str, str], Resolution]] = None) -> tuple[str, list[str]]:
        return self.names.rewrite(text, pod, memo)

    def configmap(self, namespace: str, name: str) -> Optional[Obj]:
        return self.client.get_or_none(CONFIGMAPS, namespace, name)

    def secret(self, namespace: str, name: str) -> Optional[Obj]:
        return self.client.get_or_none(SECRETS, namespace, name)

    def base_env(self, namespace: str, pod_uid: str) -> dict[str, str]:
        """A container's environment before its spec's (:mod:`.base_env`), with what the
        cluster adds: the Service-name resolver, the namespace's data directory and the API
        server's address."""
        home = paths.inside(self.pods_dir, pod_uid, HOME_DIRECTORY)
        home.mkdir(parents=True, exist_ok=True)
        env = base_environment(os.environ, os.path.dirname(sys.executable), str(home))
        env.update(self.hosts.pod_env(namespace))
        data_dir = namespace_data_dir(self.config.directory, namespace)
        data_dir.mkdir(parents=True, exist_ok=True)
        env[DATA_DIR_VARIABLE] = str(data_dir)
        env.update(api_server_env(self.services.store.get(SERVICE_NAMESPACE, SERVICE_NAME),
                                  self.endpoints.store.get(SERVICE_NAMESPACE, SERVICE_NAME),
                                  self.names.service_address, self.api_through_proxy))
        return env

    @property
    def api_through_proxy(self) -> bool:
        """Whether pods reach the API server at the kubernetes Service's ClusterIP (port 443):
        always inside a pod network of their own, else where this kubelet's proxy may listen on 443."""
        return self.network.mode != "shared" or self._may_listen_on_443

    def mount_service_account(self, pod: Obj) -> None:
        claim_pod_directory(self.pods_dir, _uid(pod), self.node_name)  # removed with the pod's logs
        self.service_accounts.write(pod)
    def find_pod(self, namespace: str, name: str) -> Optional[PodTarget]:
        """A pod this node runs, for the streaming server."""
        for worker in self.admission.workers().values():
            meta = _meta(worker.pod)
            if meta.get("namespace", "default") == namespace and meta.get("name") == name:
                return PodTarget(namespace, name, worker.uid, worker.pod_ip,
                                 {spec.get("name", ""): worker.running(spec.get("name", ""))
                                  for spec in worker.specs + worker.ephemeral_specs})
        return None

    def running_pods(self) -> list[Obj]:
        return [worker.pod for worker in self.admission.workers().values()]

    def start_sandbox(self, pod: Obj) -> Optional[PodSandbox]:
        """The pod's sandbox (None: pods run without one here), with its volumes made first;
        raises :class:`.volumes.VolumeError` or :class:`.sandbox.SandboxError` while it cannot be."""
        if self.sandbox_mode != sandbox.BWRAP:
            return None
        uid, namespace = _uid(pod), _meta(pod).get("namespace", "default")
        pod_dir = paths.inside(self.pods_dir, uid)
        made = volumes.make_volumes(pod, pod_dir, self.configmap, self.secret, owner=sandbox.POD_USER)
        tmp, home = pod_dir / "tmp", pod_dir / HOME_DIRECTORY
        messages = pod_dir / TERMINATION_MESSAGE_DIRECTORY
        data = namespace_data_dir(self.config.directory, namespace)
        for directory in (tmp, home, data, messages):
            directory.mkdir(parents=True, exist_ok=True)
        sandbox.chown_all((tmp, home, data, messages), sandbox.POD_USER)
        account = pod_dir / SERVICE_ACCOUNT_DIRECTORY
        layout = sandbox.SandboxLayout(
            cluster_dir=self.config.directory, tmp=tmp, read_only=[Path(self.config.workdir), *sandbox.python_paths()],
            own_read_only=[self.hosts.path.parent], own_writable=[home, data, messages],
            service_account=account if (account / "token").exists() else None, volumes=volumes.mounts(pod, made))
        return PodSandbox.start(layout, self.network.namespaces_argv(uid), pod_dir / "sandbox.log")

    def sandbox_workdir(self, container: Obj) -> str:
        """A container's working directory inside its pod's sandbox."""
        wanted = container.get("workingDir")
        return str(wanted) if isinstance(wanted, str) and wanted.startswith("/") else str(self.config.workdir)

    def working_dir(self, container: Obj) -> str:
        wanted = container.get("workingDir")
        if wanted and os.path.isdir(wanted):
            return str(wanted)
        return str(self.config.workdir)
