"""A rendezvous store that outlives the training pods of an elastic PyTorchJob.

With torchrun's c10d backend the store normally lives inside the agent of one training pod;
when that pod dies every other agent loses the rendezvous and the whole job ends
(elastic-fault-tolerance.md §0.1, measured). trainctl runs the store in its own small pod,
``<job>-rdzv``, behind a Service of the same name, and starts every agent with
``is_host=0``. The pod runs from the job's own image (the Worker's, which has torch), holds a
``torch.distributed.TCPStore`` server on the rendezvous port and does nothing else. It is
not a replica: it carries the job's base labels and ``trainctl.io/component: rendezvous``
but no replica-type label, so it is never counted or scaled.

A rendezvous ends for good: when its agents finish, or give up, torchrun marks it closed,
and every agent that joins it later leaves at once with ``RendezvousClosedError``. A pod
that starts after that (the replacement of a pod whose node died during an upload that
followed training, or an agent the kubelet restarts after its group failed) would find it
closed at every restart, for ever. So the agents' container keeps the end of a failed run's
log as its termination message (``terminationMessagePolicy: FallbackToLogsOnError``), and a
run that found the store's rendezvous closed, having started after the store itself did,
makes the controller replace the store: the next run joins a fresh rendezvous and resumes
from the job's checkpoint, which says whether anything is left to train.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, Optional

from trainctl.api import constants as c
from trainctl.api.replicas import default_container
from trainctl.controller.frameworks.base import RendezvousStore
from trainctl.controller.reconcile.children import (
    RENDEZVOUS_COMPONENT,
    JobRef,
    is_terminating,
    node_of,
    parse_time,
    typed_ref,
)
from trainctl.controller.reconcile.config import ReconcileConfig
from trainctl.controller.reconcile.state import Pass

RDZV_PORT_NAME = "rdzv"
RDZV_CONTAINER = "rendezvous"
# What torchrun raises in an agent that joins a closed rendezvous (the last line of its log).
CLOSED_ERROR = "RendezvousClosedError"
TERMINATION_MESSAGE_POLICY = "terminationMessagePolicy"
FALLBACK_TO_LOGS = "FallbackToLogsOnError"

# Binds the pod IP itself and hands the socket to TCPStore, because TCPStore on its own
# listens on every address (pods that share a host network would collide).
STORE_SCRIPT = """\
import os, signal, socket, sys, threading
import torch.distributed as dist
host = os.environ.get("POD_IP") or "0.0.0.0"
port = int(os.environ["RDZV_PORT"])
family = socket.AF_INET6 if ":" in host else socket.AF_INET
sock = socket.create_server((host, port), family=family, backlog=1024)
store = dist.TCPStore(host, port, is_master=True, wait_for_workers=False, master_listen_fd=sock.detach())
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print(f"rendezvous store listening on {host}:{port}", flush=True)
threading.Event().wait()
"""


def store_name(job_name: str) -> str:
    return f"{job_name}-rdzv"


def labels(base: dict[str, str]) -> dict[str, str]:
    return {**base, c.LABEL_COMPONENT: RENDEZVOUS_COMPONENT}


def store_pod(
    store_spec: RendezvousStore, *, job_ref: JobRef, container_name: str, base_labels: dict[str, str],
    config: ReconcileConfig,
) -> dict[str, Any]:
    """The store pod, from the image of ``container_name`` in the store spec's template."""
    template, port = store_spec.template, store_spec.port
    tspec = template.get("spec") or {}
    container = default_container(template, container_name) or {}
    store = {
        "name": RDZV_CONTAINER,
        "image": container.get("image"),
        "command": ["python", "-c", STORE_SCRIPT],
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "RDZV_PORT", "value": str(port)},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ],
        "ports": [{"name": RDZV_PORT_NAME, "containerPort": port}],
        "resources": {"requests": {"cpu": config.rdzv_store_cpu, "memory": config.rdzv_store_memory}},
    }
    if container.get("imagePullPolicy"):
        store["imagePullPolicy"] = container["imagePullPolicy"]
    spec: dict[str, Any] = {"containers": [store], "restartPolicy": "Always"}
    # What it takes to run the job's image where the job's pods run, at their priority: a
    # store of lower priority than its workers would be the first a scheduler preempts.
    for key in ("imagePullSecrets", "nodeSelector", "tolerations", "serviceAccountName", "priorityClassName"):
        if key in tspec:
            spec[key] = tspec[key]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": job_ref.child_metadata(store_name(job_ref.name), labels=labels(base_labels)),
        "spec": spec,
    }


def store_service(*, job_ref: JobRef, base_labels: dict[str, str], port: int) -> dict[str, Any]:
    """A ClusterIP Service: its address stays put when the store pod is replaced."""
    selector = labels(base_labels)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": job_ref.child_metadata(store_name(job_ref.name), labels=dict(selector)),
        "spec": {"selector": selector, "ports": [{"name": RDZV_PORT_NAME, "port": port, "targetPort": port}]},
    }


def with_closed_rendezvous_reported(container: dict[str, Any]) -> dict[str, Any]:
    """An agent's container that reports the end of a failed run's log in its status (unless
    the user chose a termination message policy), so a closed rendezvous can be seen."""
    if container.get(TERMINATION_MESSAGE_POLICY):
        return container
    return {**container, TERMINATION_MESSAGE_POLICY: FALLBACK_TO_LOGS}


def _container_status(pod: dict[str, Any], container: str) -> dict[str, Any]:
    return next((cs for cs in (pod.get("status") or {}).get("containerStatuses") or [] if cs.get("name") == container), {})


def _closed_runs(pod: dict[str, Any], container: str, keys: tuple[str, ...] = ("state", "lastState")) -> Iterator[datetime]:
    """When each of the container's runs on record that found the rendezvous closed started."""
    status = _container_status(pod, container)
    for key in keys:
        terminated = (status.get(key) or {}).get("terminated") or {}
        if CLOSED_ERROR in str(terminated.get("message") or ""):
            started = parse_time(terminated.get("startedAt"))
            if started is not None:
                yield started


def store_started(store: dict[str, Any]) -> Optional[datetime]:
    """When the store's current process started; None unless it runs and stays."""
    if is_terminating(store):
        return None
    running = (_container_status(store, RDZV_CONTAINER).get("state") or {}).get("running") or {}
    return parse_time(running.get("startedAt"))


def found_closed(store: dict[str, Any], replicas: list[dict[str, Any]], container: str) -> Optional[dict[str, Any]]:
    """A replica pod that found the running store's rendezvous closed, if one did.

    Only a run that started after the store's process did can have spoken to this store
    (times have a second's precision, so a run of the same second is taken for an older
    one): an earlier run's error was about a store that is gone, whatever its end says.
    """
    started = store_started(store)
    if started is None:
        return None
    return next((pod for pod in replicas if any(run > started for run in _closed_runs(pod, container))), None)


def ended_on_closed(pod: dict[str, Any], container: str) -> Optional[datetime]:
    """When the run the container ended with started, if that run found the rendezvous closed."""
    return next(_closed_runs(pod, container, ("state",)), None)


# --- the store as a step of the pass ----------------------------------------------------------
def reconcile_store(p: Pass, store: RendezvousStore) -> bool:
    """Keep the store pod and its Service; whether the Service is there for agents to use."""
    base = p.framework.base_labels(p.name)
    name = store_name(p.name)
    pod = p.pods.by_name.get(name)
    if pod is None:
        p.plan.creates.append(
            store_pod(store, job_ref=p.job_ref, container_name=p.framework.container, base_labels=base, config=p.config)
        )
    elif (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded") and not is_terminating(pod):
        p.plan.deletes.append(typed_ref(pod, "Pod"))  # recreated once it is gone
    elif (closer := found_closed(pod, p.pods.replicas(), p.framework.container)) is not None:
        why = f"for a fresh rendezvous: {closer['metadata'].get('name')} found this one closed, its group had ended"
        p.plan.deletes.append(typed_ref(pod, "Pod", cause=why))  # recreated once it is gone
    if name in p.services.by_name:
        return True
    p.plan.creates.append(store_service(job_ref=p.job_ref, base_labels=base, port=store.port))
    return False


def withhold_store(p: Pass) -> None:
    """Take back this pass's creates of the store and its Service once the pass has ended the
    job: no agent will use them, and the finished path would only delete them again (a store
    that ends with the workers, seen first, would otherwise be replaced after the job)."""
    name = store_name(p.name)
    p.plan.creates = [
        obj for obj in p.plan.creates
        if not (obj["metadata"]["name"] == name
                and (obj["metadata"].get("labels") or {}).get(c.LABEL_COMPONENT) == RENDEZVOUS_COMPONENT)
    ]


def closed_out(p: Pass, pod: dict[str, Any]) -> bool:
    """A Failed replica whose run found the rendezvous of trainctl's store closed: it came
    after its group had ended, so it has neither failed nor run; it is recreated to join
    a fresh rendezvous, whatever the restart policy (its exit code says nothing)."""
    return (p.store is not None and (pod.get("status") or {}).get("phase") == "Failed"
            and ended_on_closed(pod, p.framework.container) is not None)


def rejoin_closed_out(p: Pass, pod: dict[str, Any]) -> None:
    """Recreate a closed-out replica once the store running started no earlier than its run
    (the store found closed is being replaced meanwhile; its events bring the next pass)."""
    store = p.pods.by_name.get(store_name(p.name))
    started = None if store is None else store_started(store)
    run = ended_on_closed(pod, p.framework.container)
    if started is not None and run is not None and started >= run:
        cause = f"to be recreated: it found the rendezvous closed on node {node_of(pod)}; a fresh one is running"
        p.delete(pod, with_service=False, cause=cause)


def delete_store(p: Pass) -> None:
    for pod in p.pods.rendezvous:
        if not is_terminating(pod):
            p.plan.deletes.append(typed_ref(pod, "Pod"))
    for service in p.services.rendezvous:
        if not is_terminating(service):
            p.plan.deletes.append(typed_ref(service, "Service"))
