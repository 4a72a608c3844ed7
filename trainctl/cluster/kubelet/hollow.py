"""Hollow nodes, as kubemark's: many Nodes served by one process that runs no pod processes.

A thousand real kubelets do not fit on one machine, and a scale test of the control plane
does not need them: it needs what a kubelet says through the API. Each hollow node
registers its Node, renews its Lease and posts its status with the kubelet's own
:class:`~.heartbeat.NodeHeartbeat` (one thread paces the beats of all of them, a small pool
sends them), and reports each pod bound to it ``Running`` at once through ``pods/status``
with the pod's uid as a precondition (:class:`trainctl.kube.podstatus.StatusWriter`, as the
kubelet), then ``Succeeded`` or ``Failed`` on the schedule the pod's annotations give:

- ``hollow.trainctl.io/run-seconds``: the containers exit 0 this long after the pod started;
- ``hollow.trainctl.io/run-until``: ... or at this time (RFC 3339), whenever the pod started;
  without either the pod runs until it is deleted, as kubemark's hollow pods do. Set on a
  running pod, it ends the pod then (how a benchmark finishes ten thousand pods at once);
- ``hollow.trainctl.io/fail-runs``: the first N pods of this namespace/name (a replacement
  keeps its predecessor's name) fail instead, exit code 143 (SIGTERM: retryable under the
  ``ExitCode`` restart policy), ``hollow.trainctl.io/fail-after-seconds`` (default 1) after
  they started.

A pod being deleted is stopped at once and deleted with ``gracePeriodSeconds=0`` (uid
precondition), as the kubelet does. The nodes carry ``trainctl.io/hollow-node=true``: each is
a machine of its own to the scheduler (a port one holds is not held on the others), and
they exist while their process runs (it deletes them when it stops).

``python -m trainctl.cluster.kubelet.hollow --kubeconfig K --nodes N`` (``trainctl local up
--hollow-nodes N`` starts it) runs the heartbeats in a process of their own, forked at start,
apart from the pod work: under a flood of pod events one interpreter could not keep a
thousand Leases renewed, the nodes went NotReady and their jobs were restarted as lost.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import heapq
import logging
import os
import select
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import datetime
from typing import Any, Optional

from trainctl.cluster.flags import positive_float
from trainctl.cluster.kubelet.heartbeat import NodeHeartbeat
from trainctl.cluster.kubelet.node import capacity
from trainctl.cluster.kubelet.pod_worker import ContainerState, qos_class
from trainctl.cluster.network.ranges import HOST_IP
from trainctl.cluster.podutil import HOLLOW_NODE_LABEL, is_terminal
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.informer import Informer
from trainctl.kube.podstatus import StatusWriter
from trainctl.kube.restmapper import NODES, PODS
from trainctl.kube.timestamps import now_rfc3339

log = logging.getLogger(__name__)

Obj = dict[str, Any]
RUN_SECONDS = "hollow.trainctl.io/run-seconds"
RUN_UNTIL = "hollow.trainctl.io/run-until"
FAIL_RUNS = "hollow.trainctl.io/fail-runs"
FAIL_AFTER_SECONDS = "hollow.trainctl.io/fail-after-seconds"
FAILED_EXIT_CODE = 143
RETRY_SECONDS = 2.0
DEFAULT_PREFIX = "hollow-node-"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# Status writes in flight at once. Each is a round trip to an API server that commits
# writes in groups, so throughput grows with them: 8 held ten thousand pods to ~30
# writes a second, most of a pod's time from bound to Running.
WRITERS = 32
# Lease renewals in flight at once: a thousand nodes renew a hundred times a second, so 4
# allowed 40 ms a round trip; under load it took longer, the beats queued, the last nodes of
# each round missed their 40 s grace and went NotReady, and their jobs were restarted.
BEATERS = 32


def node_names(count: int, prefix: str = DEFAULT_PREFIX) -> list[str]:
    width = len(str(count))
    return [f"{prefix}{index:0{width}d}" for index in range(1, count + 1)]


def _number(annotations: dict[str, str], key: str, default: Optional[float]) -> Optional[float]:
    try:
        return float(annotations[key])
    except (KeyError, ValueError):
        return default


def _until(annotations: dict[str, str]) -> Optional[float]:
    """``run-until`` as a Unix time."""
    try:
        return datetime.fromisoformat(annotations[RUN_UNTIL].replace("Z", "+00:00")).timestamp()
    except (KeyError, ValueError):
        return None


def pod_status(pod: Obj, phase: str, started: str, exit_code: Optional[int] = None) -> Obj:
    """What a kubelet reports for a pod whose containers all run (``Running``) or all
    ended with ``exit_code``."""
    running = phase == "Running"
    now = now_rfc3339()
    states = []
    for container in pod.get("spec", {}).get("containers") or []:
        state = ContainerState(container.get("name", ""), container.get("image", ""), container_id="hollow://")
        if running:
            state.state = {"running": {"startedAt": started}}
        else:
            state.state = {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                                          "startedAt": started, "finishedAt": now, "containerID": "hollow://"}}
        states.append(state.render())

    def condition(kind: str, ok: bool) -> Obj:
        found: Obj = {"type": kind, "status": "True" if ok else "False", "lastProbeTime": None,
                      "lastTransitionTime": started if ok or kind == "Initialized" else now}
        if not ok:
            found["reason"] = "PodCompleted"
        return found

    return {
        "phase": phase,
        "conditions": [condition("Initialized", True), condition("Ready", running),
                       condition("ContainersReady", running), condition("PodScheduled", True)],
        "hostIP": HOST_IP, "hostIPs": [{"ip": HOST_IP}],
        "startTime": started, "qosClass": qos_class(pod), "containerStatuses": states,
    }


class HollowNodes:
    """``names`` served by one process: heartbeats, and pods reported as if they ran."""

    def __init__(self, client: KubeClient, names: list[str], allocatable: dict[str, str],
                 heartbeat_seconds: float = 10.0, writers: int = WRITERS) -> None:
        self.client = client
        self.names = names
        self._mine = set(names)
        self._interval = heartbeat_seconds
        self.heartbeats = [NodeHeartbeat(client, name, allocatable, heartbeat_seconds, labels={HOLLOW_NODE_LABEL: "true"})
                           for name in names]
        self.statuses = StatusWriter(client)
        self._writers = ThreadPoolExecutor(writers, thread_name_prefix="hollow-write")
        self._beaters = ThreadPoolExecutor(BEATERS, thread_name_prefix="hollow-beat")
        self._lock = threading.Lock()  # guards the maps and the heap below
        self._started: dict[str, tuple[Obj, str]] = {}  # uid -> (pod, startedAt)
        self._deleting: set[str] = set()
        self._runs: dict[tuple[str, str], int] = {}  # namespace/name -> pods of that name started
        self._timers: list[tuple[float, str, int]] = []  # (when, uid, exit code), maybe superseded
        self._ends: dict[str, tuple[float, int]] = {}  # uid -> when its containers exit, and how
        self._wake = threading.Condition(self._lock)
        self._stopped = threading.Event()
        self.pods = Informer(client, PODS, keep=self._bound_here, retry_delay=0.05, max_retry_delay=2.0)
        self.pods.add_handler(self._on_pod)
        self._threads: list[threading.Thread] = []
        self._serving = (False, False)  # (heartbeats, pods)

    def _bound_here(self, pod: Obj) -> bool:
        return (pod.get("spec") or {}).get("nodeName") in self._mine

    # --- lifecycle ------------------------------------------------------------------------
    def start(self, timeout: float = 120.0, *, heartbeats: bool = True, pods: bool = True) -> None:
        """Register every node (in parallel) and keep them beating, and serve their pods
        (either part alone: :func:`main` runs each in a process of its own)."""
        self._serving = (heartbeats, pods)
        loops = []
        if heartbeats:
            for future in [self._writers.submit(h.register, False) for h in self.heartbeats]:
                future.result(timeout)
            loops.append((self._beat_loop, "hollow-heartbeat"))
        if pods:
            self.pods.start()
            if not self.pods.synced.wait(timeout):
                raise TimeoutError("the API server did not answer the hollow nodes' pod list")
            loops.append((self._timer_loop, "hollow-timers"))
        for target, name in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stopped.set()
        with self._wake:
            self._wake.notify_all()
        self.pods.stop()
        for thread in self._threads:
            thread.join(timeout=10)
        self._beaters.shutdown(wait=True)
        if self._serving[0]:  # hollow nodes live as long as their heartbeats
            wait([self._writers.submit(self._delete_node, name) for name in self.names], timeout=60)
        self._writers.shutdown(wait=True)

    def _delete_node(self, name: str) -> None:
        with contextlib.suppress(ApiError, OSError):
            self.client.delete(NODES, None, name)

    # --- heartbeats -----------------------------------------------------------------------
    def _beat_loop(self) -> None:
        """Every node beats once per interval, the beats spread evenly over it; a node whose
        last beat has not been sent yet (the API server is slow) skips this one."""
        pending: dict[str, Any] = {}
        last = time.monotonic()
        while not self._stopped.is_set():
            start = time.monotonic()
            late = start - last > 2 * self._interval
            last = start
            for index, heartbeat in enumerate(self.heartbeats):
                if self._stopped.wait(max(0.0, start + index * self._interval / len(self.heartbeats) - time.monotonic())):
                    return
                previous = pending.get(heartbeat.node_name)
                if previous is None or previous.done():
                    pending[heartbeat.node_name] = self._beaters.submit(heartbeat.beat, late)
            self._stopped.wait(max(0.0, start + self._interval - time.monotonic()))

    # --- pods -----------------------------------------------------------------------------
    def _on_pod(self, event: str, new: Optional[Obj], old: Optional[Obj]) -> None:
        pod = new or old or {}
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        if event == "DELETED":
            with self._lock:
                self._started.pop(uid, None)
                self._ends.pop(uid, None)
                self._deleting.discard(uid)
            return
        if meta.get("deletionTimestamp"):
            with self._lock:
                if uid in self._deleting:
                    return
                self._deleting.add(uid)
                self._started.pop(uid, None)
            self._writers.submit(self._delete_pod, pod)
            return
        with self._lock:
            if is_terminal(pod):
                return
            if uid in self._started:
                self._reschedule(uid, meta.get("annotations") or {})
                return
            started = now_rfc3339()
            self._started[uid] = (pod, started)
            key = (meta.get("namespace", ""), meta.get("name", ""))
            run = self._runs.get(key, 0)
            self._runs[key] = run + 1
            when, code = self._schedule(meta.get("annotations") or {}, run)
            if when is not None:
                self._end_at(uid, when, code)
        self._writers.submit(self.statuses.report, pod, pod_status(pod, "Running", started))

    @staticmethod
    def _schedule(annotations: dict[str, str], run: int) -> tuple[Optional[float], int]:
        """When this run of the pod ends (Unix time; None: never) and with which exit code."""
        now = time.time()
        if run < (_number(annotations, FAIL_RUNS, 0) or 0):
            return now + (_number(annotations, FAIL_AFTER_SECONDS, 1.0) or 0.0), FAILED_EXIT_CODE
        seconds = _number(annotations, RUN_SECONDS, None)
        if seconds is not None:
            return now + seconds, 0
        return _until(annotations), 0

    def _end_at(self, uid: str, when: float, code: int) -> None:
        self._ends[uid] = (when, code)
        heapq.heappush(self._timers, (when, uid, code))
        self._wake.notify()

    def _reschedule(self, uid: str, annotations: dict[str, str]) -> None:
        """A running pod got a ``run-until``: it ends then, unless it was to fail earlier."""
        until = _until(annotations)
        end = self._ends.get(uid)
        if until is not None and (end is None or (end[1] == 0 and end[0] != until)):
            self._end_at(uid, until, 0)

    def _timer_loop(self) -> None:
        """Ends pods when their time comes; retries status writes that failed (the API
        server was away or too slow), as the kubelet's sync loop does."""
        retried = time.monotonic()
        with self._wake:
            while not self._stopped.is_set():
                if time.monotonic() - retried >= RETRY_SECONDS and self.statuses.retrying:
                    self._writers.submit(self.statuses.retry)
                    retried = time.monotonic()
                now = time.time()
                while self._timers and self._timers[0][0] <= now:
                    when, uid, code = heapq.heappop(self._timers)
                    entry = self._started.get(uid)
                    if entry is not None and self._ends.get(uid) == (when, code):
                        pod, started = entry
                        phase = "Succeeded" if code == 0 else "Failed"
                        self._writers.submit(self.statuses.report, pod, pod_status(pod, phase, started, code))
                self._wake.wait(min(RETRY_SECONDS, self._timers[0][0] - now) if self._timers else RETRY_SECONDS)

    def _delete_pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        try:
            self.client.delete(PODS, meta.get("namespace"), meta["name"], uid=meta["uid"], grace_period_seconds=0)
        except ApiError as exc:
            if exc.code not in (404, 409):
                log.warning("delete pod %s/%s: %s", meta.get("namespace"), meta["name"], exc)


def _connect(args: argparse.Namespace) -> tuple[KubeClient, HollowNodes]:
    client = KubeClient.from_kubeconfig(args.kubeconfig, qps=0, max_attempts=3, pool_size=WRITERS + 8)
    return client, HollowNodes(client, node_names(args.nodes, args.name_prefix),
                               capacity(cpu=args.cpu, memory=args.memory), args.node_lease_renew_interval)


def _heartbeats(args: argparse.Namespace, ready: int) -> None:
    """The heartbeat process: the nodes' Leases and status, nothing else, so a flood of pod
    work in the other process (its GIL, its backlog) never makes a node miss its Lease
    (a thousand nodes went NotReady that way, and their jobs were restarted as lost)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # dies with the pod process
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    client, hollow = _connect(args)
    try:
        hollow.start(pods=False)
    except Exception as exc:
        print(f"hollow nodes cannot register: {exc}", file=sys.stderr)
        os._exit(1)
    os.write(ready, b"ok")
    os.close(ready)
    while not stop.wait(3600):
        pass
    hollow.stop()
    client.close()
    os._exit(0)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainctl.cluster.kubelet.hollow")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--nodes", type=int, required=True, help="how many hollow nodes")
    parser.add_argument("--name-prefix", default=DEFAULT_PREFIX)
    parser.add_argument("--cpu", default="8", help="each node's allocatable CPU")
    parser.add_argument("--memory", default="32Gi", help="each node's allocatable memory")
    parser.add_argument("--node-lease-renew-interval", type=positive_float, default=10.0, metavar="SECONDS")
    parser.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    registered, ready = os.pipe()
    beating = os.fork()  # before any thread or connection of this process exists
    if beating == 0:
        os.close(registered)
        _heartbeats(args, ready)
    os.close(ready)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        if select.select([registered], [], [], 300)[0] == [] or os.read(registered, 8) != b"ok":
            print("hollow nodes cannot start: their heartbeat process did not register them", file=sys.stderr)
            return 1
        client, hollow = _connect(args)
        try:
            hollow.start(heartbeats=False)
        except Exception as exc:
            print(f"hollow nodes cannot start: {exc}", file=sys.stderr)
            return 1
        log.info("%d hollow nodes ready", args.nodes)
        if args.ready_fd is not None:
            with contextlib.suppress(OSError):
                os.write(args.ready_fd, b"ready\n")
                os.close(args.ready_fd)
        while not stop.wait(3600):
            pass
        hollow.stop()
        client.close()
        return 0
    finally:
        os.kill(beating, signal.SIGTERM)  # it deletes the nodes
        os.waitpid(beating, 0)


if __name__ == "__main__":
    sys.exit(main())
