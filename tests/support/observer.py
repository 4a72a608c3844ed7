"""What the end-to-end tests see of a running job: its status, its pods, their logs.

The e2e tests run real training processes on the embedded cluster and check what a user
would check: the job's conditions, which pods exist, and the lines the training scripts
print. :class:`JobObserver` follows one job through watches (the job, its pods) and streams
every container instance's log as it runs, so a test waits on events, never on sleeps, and
a wait that times out fails with the job's status, its pods and the tail of each log.

Samples are loaded and changed with tests/support/samples.py, then applied with kubectl.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import urllib3
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from trainctl.api import constants as c
from trainctl.launch.job_kinds import JobKind

from .conditions import condition
from .pods import container_status
from .waiting import wait_on

NAMESPACE = "default"
T = TypeVar("T")
Obj = dict[str, Any]

# `[event] key=value key=value ...` as printed by samples/pytorch/train.py
_EVENT = re.compile(r"^\[(?P<event>[a-z]+)\] (?P<fields>.*)$")
_FIELD = re.compile(r"(\w+)=('[^']*'|\"[^\"]*\"|\S+)")


@dataclass(frozen=True)
class LogLine:
    pod: str
    text: str
    at: float  # time.monotonic() when the test received it
    uid: str = ""  # the pod's uid and its container's restartCount: which instance printed it
    container_restart: int = 0

    @functools.cached_property
    def event(self) -> str | None:
        match = _EVENT.match(self.text.strip())
        return match["event"] if match else None

    @functools.cached_property
    def fields(self) -> dict[str, str]:
        match = _EVENT.match(self.text.strip())
        return dict(_FIELD.findall(match["fields"])) if match else {}

    def int(self, key: str) -> int:
        return int(self.fields[key])


# --- following a job -------------------------------------------------------------------------

Instance = tuple[str, int]  # a container instance: (pod uid, restartCount)
_STREAM_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)


def _lines(response: Any) -> Any:
    """The lines of a streamed HTTP body as they arrive."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=True):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        yield from (line.decode("utf-8", errors="replace") for line in lines)
    if buffer:
        yield buffer.decode("utf-8", errors="replace")


def _instance(pod: Obj) -> Instance | None:
    """The pod's current container instance, once it runs or has run (it then has a log)."""
    status = container_status(pod)
    if not {"running", "terminated"} & set(status.get("state") or {}):
        return None
    return pod["metadata"]["uid"], int(status.get("restartCount") or 0)


@dataclass
class JobObserver:
    """Follows one job: its object, its pods (every uid ever created) and all their logs.

    Two list-then-watch loops (the job, the job's pods) survive an API server restart by
    listing again; one thread per pod streams ``pods/log?follow=true`` for each container
    instance as the pod watch shows it running. Everything lands under one condition
    variable, so :meth:`wait_for` re-checks its predicate on every change.
    """

    api: client.ApiClient
    kind: JobKind
    name: str
    namespace: str = NAMESPACE
    job: Obj | None = None
    pods: dict[str, Obj] = field(default_factory=dict)
    created: list[tuple[str, str]] = field(default_factory=list)  # (pod name, uid), in creation order
    first_seen: dict[str, float] = field(default_factory=dict)  # uid -> time.monotonic() of its first watch event
    lines: list[LogLine] = field(default_factory=list)
    # pod name -> its phase when its deletion began (deletionTimestamp first seen, or gone)
    deleted: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._changed = threading.Condition()
        self._stopped = threading.Event()
        self._responses: set[Any] = set()
        self._deleting: set[str] = set()
        self._streamed: set[Instance] = set()  # instances whose log stream was opened
        self._drained: set[Instance] = set()  # ... and read to its end
        self._pod_handlers: list[Callable[[str, Obj], None]] = []
        custom, self._core = client.CustomObjectsApi(self.api), client.CoreV1Api(self.api)
        jobs = functools.partial(custom.list_namespaced_custom_object, self.kind.group, self.kind.version,
                                 self.namespace, self.kind.plural, field_selector=f"metadata.name={self.name}")
        pods = functools.partial(self._core.list_namespaced_pod, self.namespace,
                                 label_selector=f"{c.LABEL_JOB_NAME}={self.name}")
        self._threads = [threading.Thread(target=self._watch, args=(jobs, self._on_job), daemon=True),
                         threading.Thread(target=self._watch, args=(pods, self._on_pod), daemon=True)]

    def start(self) -> JobObserver:
        for thread in self._threads:
            if thread.ident is None:  # not started yet
                thread.start()
        return self

    def __enter__(self) -> JobObserver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        with self._changed:
            responses = list(self._responses)
            self._changed.notify_all()
        for response in responses:
            # Unblocks a thread reading it; one already back in the pool has nothing to unblock.
            with contextlib.suppress(RuntimeError, OSError):
                response.shutdown()

    # --- watching ---
    def _open(self, call: Callable[..., Any], **kwargs: Any) -> Any:
        response = call(_preload_content=False, **kwargs)
        with self._changed:
            self._responses.add(response)
        if self._stopped.is_set():
            response.shutdown()
        return response

    def _close(self, response: Any) -> None:
        with self._changed:
            self._responses.discard(response)
        response.release_conn()

    def _watch(self, list_call: Callable[..., Any], on_event: Callable[[str, Obj], None]) -> None:
        known: dict[str, Obj] = {}
        version: str | None = None
        while not self._stopped.is_set():
            try:
                if version is None:
                    response = self._open(list_call, _request_timeout=(5, 30))
                    try:
                        listing = json.loads(response.data)
                    finally:
                        self._close(response)
                    current = {obj["metadata"]["uid"]: obj for obj in listing["items"]}
                    for uid, obj in current.items():
                        on_event("MODIFIED" if uid in known else "ADDED", obj)
                    for uid in set(known) - set(current):
                        on_event("DELETED", known[uid])
                    known, version = current, listing["metadata"]["resourceVersion"]
                response = self._open(list_call, watch=True, resource_version=version, allow_watch_bookmarks=True,
                                      timeout_seconds=30, _request_timeout=(5, 60))
                try:
                    for line in _lines(response):
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        obj = event["object"]
                        if event["type"] == "ERROR":  # 410 Gone: list again
                            version = None
                            break
                        version = obj["metadata"]["resourceVersion"]
                        if event["type"] == "BOOKMARK":
                            continue
                        if event["type"] == "DELETED":
                            known.pop(obj["metadata"]["uid"], None)
                        else:
                            known[obj["metadata"]["uid"]] = obj
                        on_event(event["type"], obj)
                finally:
                    self._close(response)
            except _STREAM_ERRORS:
                # The API server is restarting (or the watch was cut): list again shortly.
                version = None
                self._stopped.wait(0.2)

    def _on_job(self, event: str, job: Obj) -> None:
        with self._changed:
            self.job = None if event == "DELETED" else job
            self._changed.notify_all()

    def _on_pod(self, event: str, pod: Obj) -> None:
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        with self._changed:
            if (name, uid) not in self.created:
                self.created.append((name, uid))
                self.first_seen[uid] = time.monotonic()
                threading.Thread(target=self._follow_logs, args=(name, uid), daemon=True).start()
            if (event == "DELETED" or pod["metadata"].get("deletionTimestamp")) and uid not in self._deleting:
                self._deleting.add(uid)
                known = self.pods.get(name)
                before = known if known and known["metadata"]["uid"] == uid else pod
                self.deleted[name] = (before.get("status") or {}).get("phase", "")
            if event == "DELETED":
                if self.pods.get(name, {}).get("metadata", {}).get("uid") == uid:
                    del self.pods[name]
            else:
                self.pods[name] = pod
            for handler in self._pod_handlers:
                handler(event, pod)
            self._changed.notify_all()

    def on_pod(self, handler: Callable[[str, Obj], None]) -> None:
        """Call ``handler(event, pod)`` for every pod watch event from now on, in order, with
        the pods known so far first (as "ADDED"): a check run on wake-ups can miss a version
        that two quick events replaced (a failed pod deleted at once)."""
        with self._changed:
            for pod in list(self.pods.values()):
                handler("ADDED", pod)
            self._pod_handlers.append(handler)

    def _follow_logs(self, name: str, uid: str) -> None:
        """Stream each container instance of one pod (one uid) as it starts, in order."""
        while True:
            with self._changed:
                def next_instance() -> Instance | None:
                    pod = self.pods.get(name)
                    if self._stopped.is_set() or pod is None or pod["metadata"]["uid"] != uid:
                        return None
                    instance = _instance(pod)
                    return instance if instance and instance not in self._streamed else None

                instance = next_instance()
                while instance is None:
                    pod = self.pods.get(name)
                    if self._stopped.is_set() or (pod is not None and pod["metadata"]["uid"] != uid) or (
                            pod is None and (name, uid) in self.created and uid in self._deleting):
                        return
                    self._changed.wait()
                    instance = next_instance()
                self._streamed.add(instance)
                container = self._container(self.pods[name])
            self._stream_instance(name, container, instance)

    def _stream_instance(self, name: str, container: str, instance: Instance) -> None:
        """Read one container instance's log to its end, reopening a stream the API server cut."""
        seen: set[str] = set()  # lines as "<timestamp> <text>": a reopened stream starts from the beginning
        previous = False  # the instance's container restarted before its stream opened: read the previous log
        while True:
            try:
                response = self._open(self._core.read_namespaced_pod_log, name=name, namespace=self.namespace,
                                      container=container, follow=True, timestamps=True, previous=previous,
                                      _request_timeout=(5, None))
            except _STREAM_ERRORS:
                response = None
            # Logs are read by pod name and restart: the stream is of whatever instance holds the
            # name now. The pod that took over the name (an OOM relaunch, say) has its own
            # follower; a container restarted once since has this instance's log as "previous".
            now = self._current_instance(name, container) if response is not None else None
            if response is not None and now is not None and self._served(now, previous) != instance:
                response.close()  # unread: its connection must not go back to the pool
                self._close(response)
                if not previous and self._served(now, True) == instance:
                    previous = True
                    continue
                with self._changed:
                    self._drained.add(instance)
                    self._changed.notify_all()
                return
            if response is not None:
                try:
                    for stamped in _lines(response):
                        if stamped in seen:
                            continue
                        seen.add(stamped)
                        text = stamped.split(" ", 1)[1] if " " in stamped else ""
                        line = LogLine(name, text, time.monotonic(), *instance)  # timed before waiting for the lock
                        with self._changed:
                            self.lines.append(line)
                            self._changed.notify_all()
                except _STREAM_ERRORS:
                    pass
                finally:
                    self._close(response)
            with self._changed:
                pod = self.pods.get(name)
                running = (pod is not None and _instance(pod) == instance
                           and "running" in (container_status(pod).get("state") or {}))
                if not running or self._stopped.is_set():
                    self._drained.add(instance)
                    self._changed.notify_all()
                    return
            self._stopped.wait(0.2)  # cut while it runs (the API server restarting?): read on

    def _current_instance(self, name: str, container: str) -> tuple[str, int, bool] | None:
        """Pod ``name``'s (uid, restartCount, whether it waits after a run that ended) now that a
        log stream of it is open; None once gone (the stream was then of the pod that is gone)."""
        try:
            current = self._core.read_namespaced_pod(name, self.namespace, _request_timeout=5)
        except _STREAM_ERRORS:
            return None
        statuses = [cs for cs in current.status.container_statuses or () if cs.name == container]
        if not statuses:
            return current.metadata.uid, 0, False
        status = statuses[0]
        ended = bool(status.state and status.state.waiting and status.last_state and status.last_state.terminated)
        return current.metadata.uid, int(status.restart_count or 0), ended

    @staticmethod
    def _served(now: tuple[str, int, bool], previous: bool) -> Instance:
        """The instance whose log the API server serves, as a real kubelet picks it: the
        current run, or the one that ended while the container waits to restart (then
        ``previous`` is that one too, restartCount still naming it)."""
        uid, restarts, ended = now
        return uid, restarts - 1 if previous and not ended else restarts

    def _container(self, pod: Obj) -> str:
        names = [ct["name"] for ct in pod["spec"]["containers"]]
        return self.kind.container if self.kind.container in names else names[0]

    # --- queries ---
    def events(self, event: str, pod: str | None = None, since: float = 0.0) -> list[LogLine]:
        with self._changed:
            return [ln for ln in self.lines if ln.event == event and (pod is None or ln.pod == pod) and ln.at >= since]

    def uids(self, name: str) -> list[str]:
        with self._changed:
            return [uid for pod, uid in self.created if pod == name]

    def duplicate_ranks(self) -> dict[str, list[int]]:
        """Rendezvous rounds in which two processes claimed one rank, as "MASTER_PORT/WORLD_SIZE"
        -> the ranks claimed. A round is what its [start] lines share: the WORLD_SIZE and the
        fresh MASTER_PORT torchrun picks for it; a log line read twice is one start."""
        ranks: dict[str, list[int]] = {}
        for line in {(line.uid, line.text): line for line in self.events("start")}.values():
            ranks.setdefault(f"{line.fields['MASTER_PORT']}/{line.fields['WORLD_SIZE']}", []).append(line.int("RANK"))
        return {key: found for key, found in ranks.items()
                if len(found) != len(set(found)) or len(found) > int(key.split("/")[1])}

    # --- waiting ---
    def wait_for(self, what: str, check: Callable[[], T | None], timeout: float) -> T:
        """The first truthy ``check()``, re-evaluated on every job, pod or log event."""
        result = wait_on(self._changed, check, timeout)
        if not result:
            with self._changed:
                raise AssertionError(f"{self.kind.kind} {self.name}: no {what} within {timeout:g}s\n{self.dump()}")
        return result

    def wait_line(self, what: str, match: Callable[[LogLine], bool], timeout: float, since: float = 0.0) -> LogLine:
        def found() -> LogLine | None:
            return next((ln for ln in self.lines if ln.at >= since and match(ln)), None)
        return self.wait_for(what, found, timeout)

    def wait_finished(self, timeout: float) -> str:
        """'Succeeded' or 'Failed', once the job has a terminal condition."""
        def terminal() -> str | None:
            return next((t for t in ("Succeeded", "Failed") if condition(self.job, t)), None)
        return self.wait_for("Succeeded or Failed condition", terminal, timeout)

    def wait_succeeded(self, timeout: float) -> Obj:
        outcome = self.wait_finished(timeout)
        assert outcome == "Succeeded", f"{self.kind.kind} {self.name} {outcome}\n{self.dump()}"
        self.wait_pods_settled()
        return self.wait_logs_drained()

    def wait_pods_settled(self, timeout: float = 60.0) -> None:
        """Give the pods still running when the job succeeded time to end on their own.

        A job succeeds when its lead replica does (Master 0, or Worker 0 without a Master);
        the other replicas, left running by ``cleanPodPolicy: None``, finish a moment later,
        and a test that reads every rank's last line must wait for them. A pod that never ends
        is not this wait's business: the test's own assertions speak for it.
        """
        def settled() -> bool:
            return not any("running" in (container_status(pod).get("state") or {}) and pod["metadata"]["uid"] not in self._deleting
                           for pod in self.pods.values())
        wait_on(self._changed, settled, timeout)

    def wait_logs_drained(self, timeout: float = 15.0) -> Obj:
        """Every exited container's log read to its end; returns the job."""
        def drained() -> bool:
            exited = [_instance(pod) for pod in self.pods.values() if "terminated" in (container_status(pod).get("state") or {})]
            return all(instance in self._drained for instance in exited)
        self.wait_for("end of every exited container's log", drained, timeout)
        assert self.job is not None
        return self.job

    def dump(self, tail: int = 12) -> str:
        """The job's status, its pods and the end of each pod's log, for failure messages."""
        out = ["--- job status:", yaml.safe_dump((self.job or {}).get("status") or {}, sort_keys=False).rstrip()]
        out.append("--- pods:")
        for name, pod in sorted(self.pods.items()):
            status = pod.get("status") or {}
            cs = container_status(pod)
            out.append(f"{name} uid={pod['metadata']['uid'][:8]} phase={status.get('phase')} "
                       f"restarts={cs.get('restartCount', 0)} state={json.dumps(cs.get('state') or {})} "
                       f"deleting={bool(pod['metadata'].get('deletionTimestamp'))}")
        out.append(f"--- pod creations: {[(n, u[:8]) for n, u in self.created]}")
        for name in sorted({ln.pod for ln in self.lines}):
            out.append(f"--- log tail of {name}:")
            out.extend(ln.text for ln in [ln for ln in self.lines if ln.pod == name][-tail:])
        others = [f"{ln.pod}: {ln.text}" for ln in self.lines if ln.event not in ("step", "checkpoint")]
        if others:
            out.append("--- other log lines:")
            out.extend(others[-40:])
        return "\n".join(out)
