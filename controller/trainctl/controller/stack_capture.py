"""A hung job's Python stacks, dumped and kept before its workers are restarted.

The core asks for it (``Plan.stack_captures``) in the pass that restarts the workers; the plan
applier runs this before the deletes. Each worker's container runs the in-pod program
(:mod:`trainctl.controller.pod_exec`), first to freeze every worker (and report the states
of their processes as they were), then to dump: every Python process writes all its threads'
stacks to the pod's log (faulthandler on SIGABRT, enabled by ``PYTHONFAULTHANDLER=1``) and
dies. The stacks are then read back from the log (the container's previous instance if
the kubelet restarted it meanwhile) and kept, with the processes' states, in a ConfigMap
owned by the job, one key per pod: the pods are deleted next, their logs with them, and the
ConfigMap stays as long as the job (``kubectl describe configmap <job>-hang-<n>``).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from trainctl.controller.pod_exec import DUMP, FREEZE, PodExec
from trainctl.controller.reconcile.plan import StackCapture
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient

log = logging.getLogger("trainctl.controller")

FAULT_HEADER = "Fatal Python error"
# A ConfigMap holds at most 1 MiB: each pod's entry keeps the end of its stacks within this.
MAX_PER_POD = 120_000
_TAIL_LINES = 200


def stacks_of(log_text: str) -> str:
    """The faulthandler dumps in a log (from the first one on), else the log's last lines."""
    start = log_text.find(FAULT_HEADER)
    text = log_text[start:] if start >= 0 else "\n".join(log_text.splitlines()[-_TAIL_LINES:])
    return text[-MAX_PER_POD:]


def describe(processes: Optional[list[dict[str, Any]]]) -> str:
    if processes is None:
        return "processes: could not be read (exec into the container failed; see the controller's log)\n"
    lines = [f"  pid {p.get('pid')} state {p.get('state')}: {p.get('command', '')}" for p in processes]
    return "processes before the dump (state T: stopped by a signal):\n" + "\n".join(lines) + "\n"


class StackCapturer:
    """Runs one StackCapture: dump every pod's stacks, read them back, keep them in a ConfigMap."""

    def __init__(self, client: KubeClient, pod_exec: Optional[PodExec] = None) -> None:
        self.client = client
        self.pod_exec = pod_exec or PodExec(client)

    def capture(self, capture: StackCapture) -> list[str]:
        """Dump and keep; the errors (none: all kept)."""
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(capture.pods)))) as pool:
            # All frozen first (their states as they were), then all dumped: see in_pod_processes.
            frozen = [pool.submit(self.pod_exec.processes, capture.namespace, pod, container, FREEZE)
                      for pod, container in capture.pods]
            states = [future.result() for future in frozen]
            dumped = [pool.submit(self._one, capture.namespace, pod, container, found)
                      for (pod, container), found in zip(capture.pods, states, strict=True)]
            entries = [future.result() for future in dumped]
        config_map = {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": capture.config_map, "namespace": capture.namespace, "labels": dict(capture.labels),
                         "ownerReferences": [capture.owner]},
            "data": {pod: entry for (pod, _), entry in zip(capture.pods, entries, strict=True)},
        }
        try:
            self.client.create(r.CONFIGMAPS, config_map)
        except ApiError as exc:
            return [f"create ConfigMap {capture.config_map}: {exc}"]
        return []

    def _one(self, namespace: str, pod: str, container: str, processes: Optional[list[dict[str, Any]]]) -> str:
        self.pod_exec.processes(namespace, pod, container, DUMP)
        text = self._log(namespace, pod, container, previous=False)
        if FAULT_HEADER not in text:
            text = self._log(namespace, pod, container, previous=True) or text
        return describe(processes) + "\n" + (stacks_of(text) if text else "(no log)\n")

    def _log(self, namespace: str, pod: str, container: str, *, previous: bool) -> str:
        try:
            stream = self.client.log(namespace, pod, container=container, previous=previous)
            return b"\n".join(stream.lines()).decode(errors="replace")
        except ApiError:
            return ""
