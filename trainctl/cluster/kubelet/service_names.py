"""What a Service name reaches, for the names in a container's env and command line.

A ClusterIP Service resolves to its cluster IP (on a cluster of several nodes, to this
node's address for it: see :func:`~..network.ranges.node_service_cidr`), an ExternalName Service to its external
name, a headless Service to the IP of its first live selected pod. A name that will
resolve but cannot yet (no cluster IP, no pod, or a sibling pod of the same controller
whose Service is not created yet) is :class:`~..network.names.Pending`: the container
waits for it, as a job's pods wait for their rendezvous address.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional, cast

from trainctl.cluster.network.names import Pending, Resolution, rewrite
from trainctl.cluster.network.pod_ipam import PodIPAllocator
from trainctl.cluster.podutil import is_terminal, phase
from trainctl.kube.client import KubeClient
from trainctl.kube.informer import Store
from trainctl.kube.restmapper import PODS, SERVICES, controller_owner

Obj = dict[str, Any]


def _meta(obj: Obj) -> Obj:
    return cast("dict[str, Any]", obj.get("metadata", {}))


def selects(selector: Optional[dict[str, str]], pod: Obj) -> bool:
    if not selector:
        return False
    labels = _meta(pod).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def controller_uid(pod: Obj) -> Optional[str]:
    return (controller_owner(pod) or {}).get("uid")


class PodIndex:
    """Pods by (namespace, label, value), so matching every Service's selector against the
    pods stays cheap when a job has hundreds of replicas, each with its own Service."""

    def __init__(self, pods: list[Obj]) -> None:
        self._by_label: dict[tuple[str, str, str], list[Obj]] = {}
        for pod in pods:
            namespace = _meta(pod).get("namespace", "default")
            labels = _meta(pod).get("labels")
            for key, value in (labels.items() if isinstance(labels, dict) else ()):
                if isinstance(value, str):
                    self._by_label.setdefault((namespace, key, value), []).append(pod)

    def select(self, namespace: str, selector: Optional[dict[str, str]]) -> list[Obj]:
        if not selector:
            return []
        smallest = min((self._by_label.get((namespace, k, v), []) for k, v in selector.items()), key=len)
        return [pod for pod in smallest if selects(selector, pod)]


class ServiceNames:
    """Resolves Service names from the kubelet's caches (and the API, for a fresh Service)."""

    def __init__(self, client: KubeClient, pods: Store, services: Store, ips: PodIPAllocator,
                 service_address: Callable[[str], str] = str) -> None:
        self._client = client
        self._pods = pods
        self._services = services
        self._ips = ips
        self.service_address = service_address  # this node's address of a ClusterIP (its own proxy's)

    def resolve(self, namespace: str, name: str, owner: Optional[str] = None, fresh: bool = False,
                index: Optional[PodIndex] = None) -> Resolution:
        """What ``name`` in ``namespace`` reaches. ``owner`` is the asking pod's controller uid:
        a name of a pod with the same controller whose Service does not exist yet is worth
        waiting for (a job's controller creates pods and Services in parallel). ``fresh``
        reads a Service missing from the cache from the API server (its watch event may
        simply not have arrived yet)."""
        service = self._services.get(namespace, name)
        if service is None and fresh:
            service = self._client.get_or_none(SERVICES, namespace, name)
        if service is None:
            pod = self._pods.get(namespace, name)
            if owner and pod is not None and not is_terminal(pod) and controller_uid(pod) == owner:
                return Pending(f"Service {namespace}/{name} (pod {namespace}/{name} exists, its Service not yet)")
            return None
        spec = service.get("spec", {})
        if spec.get("type") == "ExternalName":
            return spec.get("externalName") or None
        cluster_ip = spec.get("clusterIP")
        if cluster_ip and cluster_ip != "None":
            return self.service_address(cluster_ip)
        if cluster_ip == "None":
            if not spec.get("selector"):
                return None
            return self._selected_address(service, index, fresh)
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

    def _selected_address(self, service: Obj, index: Optional[PodIndex] = None, fresh: bool = False) -> Resolution:
        """A headless Service's address: its first live pod's IP, None when every pod it
        selects has Succeeded (none will come back, so the name stays unresolved, as DNS
        would leave it), else Pending: the pods are not created yet, or may be replaced.

        ``fresh`` reads the selected pods from the API server: a container about to start
        keeps the address for its whole run, and the cache may still hold a pod that was
        replaced a moment ago (a job restarted as a whole), whose address nothing answers.
        """
        namespace = _meta(service).get("namespace", "default")
        selector = service.get("spec", {}).get("selector")
        if fresh and selector:
            listed, _ = self._client.list(PODS, namespace, label_selector=",".join(f"{k}={v}" for k, v in sorted(selector.items())))
            index = PodIndex(listed)
        candidates = []
        selected = (index or PodIndex(self._pods.list())).select(namespace, selector)
        for pod in selected:
            if is_terminal(pod) or _meta(pod).get("deletionTimestamp"):
                continue
            # This node's pods from its own allocator (known before their status says so);
            # another node's from the address its kubelet reported.
            address = self._ips.lookup(_meta(pod).get("uid", "")) or (pod.get("status") or {}).get("podIP")
            if address:
                candidates.append((_meta(pod).get("name", ""), address))
        if candidates:
            return min(candidates)[1]
        meta = _meta(service)
        if selected and all(phase(pod) == "Succeeded" for pod in selected):
            return None
        return Pending(f"a pod selected by headless Service {meta.get('namespace', 'default')}/{meta.get('name')}")
