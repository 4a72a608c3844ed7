"""Watching the progress of jobs with a hang timeout: what the reconcile core judges hangs from.

The progress signal is each worker pod's CPU usage, read from the resource Metrics API
(``metrics.k8s.io/v1beta1`` PodMetrics: metrics-server in a real cluster, the kubelets'
published usage on ``trainctl local``): a training step computes, so a pod using at least
``idle_cores`` in a usage window made progress in it. It needs nothing of the training script,
and it sees the two ways a rank stops: a frozen rank (SIGSTOP, a stuck device) uses no CPU at
all, and its peers, blocked in the collective that waits for it, use next to none (gloo and
NCCL wait on a socket or a condition). A log line per step would be a finer signal, but not
every script prints one and a silent script would look hung; CPU is always there.

For a pod idle in its latest window, the observer also looks at its processes through
``pods/exec`` (:mod:`trainctl.controller.pod_exec`): a Python process stopped by a signal
(state T) names the culprit, since its peers are idle but never stopped; one runnable (R) or
in disk sleep (D) is working, only starved of CPU by a busy node (torch importing on an
overloaded machine uses a few hundredths of a core), and counts as progress.

Per pod uid the observer keeps ``PodProgress`` (the end of the last busy window, the end of the
latest window read, stopped or not) and hands it to the core with the job's other observed
state; a replaced pod is a new uid, seen afresh. It reads every ``poll_seconds`` and enqueues
a job when what it knows of its pods changed, so a hang is judged within a poll of the
reading that shows it.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any, Callable, Iterable, Optional

from trainctl.api import constants as c
from trainctl.api.quantity import parse_quantity
from trainctl.controller.caches import Caches
from trainctl.controller.frameworks import framework_for
from trainctl.controller.keys import JobKey
from trainctl.controller.pod_exec import PodExec
from trainctl.controller.reconcile.children import is_terminating, parse_time
from trainctl.controller.reconcile.hang import ANNOTATION_HANG_TIMEOUT
from trainctl.controller.reconcile.plan import PodProgress
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.workqueue import WorkQueue

log = logging.getLogger("trainctl.controller")

POD_METRICS = r.Resource("metrics.k8s.io", "v1beta1", "pods", "PodMetrics")
# A training step keeps a core busy; a rank waiting in a collective, its launcher and the
# Python runtime's threads stay far below a twentieth of one.
IDLE_CORES = 0.05
POLL_SECONDS = 5.0


def cpu_cores(metrics: dict[str, Any]) -> Optional[float]:
    """The pod's CPU usage in cores over its window, summed over containers; None if unreadable."""
    total = 0.0
    for container in metrics.get("containers") or []:
        try:
            total += float(parse_quantity((container.get("usage") or {}).get("cpu", "0")))
        except ValueError:
            return None
    return total


def reading_time(metrics: dict[str, Any]) -> Optional[datetime]:
    """The end of the PodMetrics' usage window."""
    return parse_time(metrics.get("timestamp"))


STOPPED, WORKING, WAITING = "stopped", "working", "waiting"


def process_look(found: Optional[list[dict[str, Any]]]) -> Optional[str]:
    """What a pod's processes say: a Python process stopped by a signal (state T) is STOPPED;
    one running or runnable (R) or in disk sleep (D) is WORKING, only short of CPU on a busy
    node; else they are WAITING (S: a collective, a socket). None: nobody could look."""
    if found is None:
        return None
    states = {p.get("state") for p in found if p.get("python")}
    if states & {"T", "t"}:
        return STOPPED
    return WORKING if states & {"R", "D"} else WAITING


def observe(seen: Optional[PodProgress], cores: float, at: datetime, idle_cores: float,
            look: Callable[[], Optional[str]]) -> Optional[PodProgress]:
    """What is known of a pod after a reading of ``cores`` whose window ended ``at``;
    ``look`` looks at its processes (asked only for an idle window; ``process_look``).
    Nothing is known of a pod until it has worked once: one that waits from its start (for
    its peers, on a busy node) has not stopped, and is not judged."""
    if seen is not None and at <= seen.observed_at:
        return seen
    if cores >= idle_cores:
        return PodProgress(last_progress=at, observed_at=at)
    looked = look()
    if looked == WORKING:
        return PodProgress(last_progress=at, observed_at=at)
    if seen is None:
        return None
    stopped = None if looked is None else looked == STOPPED
    if stopped is None and seen.observed_at > seen.last_progress:
        stopped = seen.stopped  # idle before too: what an earlier look saw still holds
    return PodProgress(last_progress=seen.last_progress, observed_at=at, stopped=stopped)


class ProgressObserver:
    """The thread that reads the usage of opted-in jobs' pods and keeps their ``PodProgress``."""

    def __init__(self, client: KubeClient, caches: Caches, queue: WorkQueue[JobKey], *,
                 poll_seconds: float = POLL_SECONDS, idle_cores: float = IDLE_CORES,
                 pod_exec: Optional[PodExec] = None) -> None:
        self.client = client
        self.caches = caches
        self.queue = queue
        self.poll_seconds = poll_seconds
        self.idle_cores = idle_cores
        self.pod_exec = pod_exec or PodExec(client)
        self._progress: dict[str, PodProgress] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hang-observer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=10)

    def progress(self, pods: Iterable[dict[str, Any]]) -> dict[str, PodProgress]:
        """What is known of ``pods``, by uid."""
        with self._lock:
            return {uid: self._progress[uid] for pod in pods
                    if (uid := (pod.get("metadata") or {}).get("uid")) in self._progress}

    def _run(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                self.poll()
            except Exception as exc:  # the API server may be restarting: next time
                log.warning("hang observer: reading progress failed", extra={"error": str(exc)})

    def poll(self) -> None:
        """One round: read the usage of every watched pod, update, enqueue the changed jobs."""
        watched = self._watched()
        live: set[str] = set()
        metrics_by_namespace: dict[str, dict[str, dict[str, Any]]] = {}
        for key, job, pods in watched:
            changed = False
            for pod in pods:
                uid = pod["metadata"]["uid"]
                live.add(uid)
                if key.namespace not in metrics_by_namespace:
                    metrics_by_namespace[key.namespace] = self._metrics(key.namespace)
                metrics = metrics_by_namespace[key.namespace].get(pod["metadata"]["name"])
                changed |= self._read(pod, metrics, job)
            if changed:
                self.queue.add(key)
        with self._lock:
            for uid in set(self._progress) - live:
                del self._progress[uid]

    def _watched(self) -> list[tuple[JobKey, dict[str, Any], list[dict[str, Any]]]]:
        """The unfinished jobs with a hang timeout and their Running pods."""
        out = []
        for informer in self.caches.job_informers.values():
            for job in informer.store.list():
                if ANNOTATION_HANG_TIMEOUT not in ((job.get("metadata") or {}).get("annotations") or {}):
                    continue
                if any(cond.get("type") in (c.CONDITION_SUCCEEDED, c.CONDITION_FAILED) and cond.get("status") == "True"
                       for cond in (job.get("status") or {}).get("conditions") or []):
                    continue
                pods = [pod for pod in self.caches.child_informers["Pod"].store.owned_by(job["metadata"].get("uid", ""))
                        if (pod.get("status") or {}).get("phase") == "Running" and not is_terminating(pod)]
                out.append((JobKey.of(job), job, pods))
        return out

    def _metrics(self, namespace: str) -> dict[str, dict[str, Any]]:
        try:
            items, _ = self.client.list(POD_METRICS, namespace)
        except ApiError as exc:
            log.debug("hang observer: no pod metrics", extra={"namespace": namespace, "error": str(exc)})
            return {}
        return {item["metadata"]["name"]: item for item in items if isinstance(item.get("metadata"), dict)}

    def _read(self, pod: dict[str, Any], metrics: Optional[dict[str, Any]], job: dict[str, Any]) -> bool:
        """Update one pod from its PodMetrics; whether what is known of it changed."""
        if metrics is None:
            return False
        cores, at = cpu_cores(metrics), reading_time(metrics)
        if cores is None or at is None:
            return False
        uid, meta = pod["metadata"]["uid"], pod["metadata"]
        with self._lock:
            seen = self._progress.get(uid)

        def look() -> Optional[str]:
            container = framework_for(job.get("kind", "")).container
            return process_look(self.pod_exec.processes(meta.get("namespace", "default"), meta["name"], container))

        now = observe(seen, cores, at, self.idle_cores, look)
        if now is None:
            return False
        if now != seen and now.observed_at > now.last_progress:
            log.info("hang observer: pod idle", extra={
                "pod": f"{meta.get('namespace')}/{meta['name']}", "cores": round(cores, 4), "window_end": metrics.get("timestamp"),
                "idle_since": now.last_progress.isoformat(), "stopped": now.stopped})
        with self._lock:
            self._progress[uid] = now
        return now != seen

